#include "symbolic.h"

#include <algorithm>

#include <fmt/format.h>

namespace cclab::coll::detail {

RankSet RankSet::range(int lo, int hi) {
  RankSet s;
  if (lo < hi) s.iv_.push_back({lo, hi});
  return s;
}

int RankSet::merge(const RankSet& a, const RankSet& b, RankSet& out) {
  out.iv_.clear();
  std::size_t i = 0, j = 0;
  while (i < a.iv_.size() || j < b.iv_.size()) {
    const bool take_a = j == b.iv_.size() || (i < a.iv_.size() && a.iv_[i] < b.iv_[j]);
    const auto iv = take_a ? a.iv_[i++] : b.iv_[j++];
    if (!out.iv_.empty() && iv.first < out.iv_.back().second) return iv.first;  // overlap
    if (!out.iv_.empty() && iv.first == out.iv_.back().second)
      out.iv_.back().second = iv.second;
    else
      out.iv_.push_back(iv);
  }
  return -1;
}

std::string RankSet::str() const {
  std::string s = "{";
  for (const auto& [lo, hi] : iv_) {
    if (s.size() > 1) s += ",";
    s += hi - lo == 1 ? fmt::format("{}", lo) : fmt::format("{}-{}", lo, hi - 1);
  }
  return s + "}";
}

void SegmentBuffer::split_at(std::uint64_t pos) {
  if (pos == 0 || pos >= size_) return;
  auto it = segs_.upper_bound(pos);
  --it;  // the segment containing pos
  if (it->first == pos) return;
  Seg right{it->second.end, it->second.elem + static_cast<std::int64_t>(pos - it->first),
            it->second.set};
  it->second.end = pos;
  segs_.emplace(pos, right);
}

std::vector<Piece> SegmentBuffer::read(std::uint64_t off, std::uint64_t len) const {
  std::vector<Piece> out;
  if (len == 0) return out;
  auto it = segs_.upper_bound(off);
  --it;
  for (std::uint64_t pos = off, end = off + len; pos < end; ++it) {
    const std::uint64_t stop = std::min(end, it->second.end);
    out.push_back(
        {stop - pos, it->second.elem + static_cast<std::int64_t>(pos - it->first), it->second.set});
    pos = stop;
  }
  return out;
}

void SegmentBuffer::write(std::uint64_t off, const std::vector<Piece>& pieces) {
  std::uint64_t len = 0;
  for (const auto& p : pieces) len += p.len;
  if (len == 0) return;
  split_at(off);
  split_at(off + len);
  segs_.erase(segs_.lower_bound(off), segs_.lower_bound(off + len));
  std::uint64_t pos = off;
  for (const auto& p : pieces) {
    segs_.emplace(pos, Seg{pos + p.len, p.elem, p.set});
    pos += p.len;
  }
  coalesce(off, off + len);
}

// Joins neighbours that continue each other (consecutive elements, equal sets)
// so a fully reduced buffer is one segment again.
void SegmentBuffer::coalesce(std::uint64_t lo, std::uint64_t hi) {
  auto it = segs_.upper_bound(lo);
  if (it != segs_.begin()) --it;
  if (it != segs_.begin()) --it;
  while (it != segs_.end() && it->first <= hi) {
    auto next = std::next(it);
    if (next == segs_.end()) break;
    const Seg& a = it->second;
    const Seg& b = next->second;
    const bool same_set = a.set == b.set || (a.set && b.set && *a.set == *b.set);
    const bool continues = a.elem + static_cast<std::int64_t>(a.end - it->first) == b.elem;
    if (same_set && (continues || !a.set)) {
      it->second.end = b.end;
      segs_.erase(next);
    } else {
      it = next;
    }
  }
}

}  // namespace cclab::coll::detail
