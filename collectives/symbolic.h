// Symbolic values for the checker: sets of contributing ranks, and buffers
// whose elements each hold "element e with the contributions of ranks S".
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace cclab::coll::detail {

// Disjoint, sorted, non-adjacent half-open rank intervals. Up to four
// intervals live inline (no allocation): the sets that rings, trees and
// halving-doubling build are one or two intervals almost always.
class RankSet {
 public:
  using Interval = std::pair<int, int>;
  RankSet() = default;
  static RankSet single(int r) { return range(r, r + 1); }
  static RankSet range(int lo, int hi);
  // Union; returns the first rank in both (a double contribution) or -1.
  static int merge(const RankSet& a, const RankSet& b, RankSet& out);
  bool operator==(const RankSet& o) const;
  std::string str() const;  // "{0-3,5}"

 private:
  static constexpr std::size_t kInline = 4;
  std::size_t size() const { return n_; }
  const Interval& at(std::size_t i) const { return i < kInline ? inline_[i] : spill_[i - kInline]; }
  Interval& back() { return n_ <= kInline ? inline_[n_ - 1] : spill_.back(); }
  void push_back(Interval iv);
  void clear() {
    n_ = 0;
    spill_.clear();
  }

  std::array<Interval, kInline> inline_{};
  std::size_t n_ = 0;
  std::vector<Interval> spill_;
};

// Sets are immutable and live as long as the arena (one check run), so values
// refer to them by plain pointer.
using SetPtr = const RankSet*;
class SetArena {
 public:
  SetPtr add(RankSet s) { return &sets_.emplace_back(std::move(s)); }

 private:
  std::deque<RankSet> sets_;
};

// A run of elements: position p of the run holds element `elem + (p - start)`.
struct Piece {
  std::uint64_t len = 0;
  std::int64_t elem = 0;
  SetPtr set = nullptr;  // null: never written (uninitialised)
};

// A buffer of symbolic elements. Dense mode stores every element (fast:
// direct indexing, no cache-unfriendly tree walks, for the sizes tests and
// typical checks use); sparse mode stores runs in an ordered map, so huge
// counts cost memory in proportion to the number of distinct runs.
class SegmentBuffer {
 public:
  SegmentBuffer() = default;
  SegmentBuffer(std::uint64_t size, bool dense);
  std::uint64_t size() const { return size_; }
  // Replaces `out` with the runs covering [off, off+len).
  void read(std::uint64_t off, std::uint64_t len, std::vector<Piece>& out) const;
  void write(std::uint64_t off, const std::vector<Piece>& pieces);

 private:
  struct Seg {
    std::uint64_t end;
    std::int64_t elem;
    SetPtr set;
  };
  void split_at(std::uint64_t pos);
  std::uint64_t size_ = 0;
  bool dense_ = true;
  std::vector<std::int64_t> elem_;  // dense mode
  std::vector<SetPtr> set_;
  std::map<std::uint64_t, Seg> segs_;  // sparse mode, keyed by start
};

}  // namespace cclab::coll::detail
