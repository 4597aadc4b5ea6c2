// Symbolic values for the checker: sets of contributing ranks and buffers of
// segments, each segment a run of consecutive elements with one rank set.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace cclab::coll::detail {

// Disjoint, sorted, non-adjacent half-open rank intervals.
class RankSet {
 public:
  RankSet() = default;
  static RankSet single(int r) { return range(r, r + 1); }
  static RankSet range(int lo, int hi);
  // Union; returns the first rank in both (a double contribution) or -1.
  static int merge(const RankSet& a, const RankSet& b, RankSet& out);
  bool operator==(const RankSet&) const = default;
  std::string str() const;  // "{0-3,5}"

 private:
  std::vector<std::pair<int, int>> iv_;
};

using SetPtr = std::shared_ptr<const RankSet>;

// A run of elements: position p of the run holds element `elem + (p - start)`.
struct Piece {
  std::uint64_t len = 0;
  std::int64_t elem = 0;
  SetPtr set;  // null: never written (uninitialised)
};

class SegmentBuffer {
 public:
  explicit SegmentBuffer(std::uint64_t size = 0) : size_(size) {
    if (size) segs_[0] = {size, 0, nullptr};
  }
  std::uint64_t size() const { return size_; }
  std::vector<Piece> read(std::uint64_t off, std::uint64_t len) const;
  void write(std::uint64_t off, const std::vector<Piece>& pieces);

 private:
  struct Seg {
    std::uint64_t end;
    std::int64_t elem;
    SetPtr set;
  };
  void split_at(std::uint64_t pos);
  void coalesce(std::uint64_t lo, std::uint64_t hi);
  std::uint64_t size_;
  std::map<std::uint64_t, Seg> segs_;  // keyed by start
};

}  // namespace cclab::coll::detail
