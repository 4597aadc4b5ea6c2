#include "symbolic.h"

#include <algorithm>

#include <fmt/format.h>

namespace cclab::coll::detail {

RankSet RankSet::range(int lo, int hi) {
  RankSet s;
  if (lo < hi) s.push_back({lo, hi});
  return s;
}

void RankSet::push_back(Interval iv) {
  if (n_ < kInline)
    inline_[n_] = iv;
  else
    spill_.push_back(iv);
  ++n_;
}

bool RankSet::operator==(const RankSet& o) const {
  if (n_ != o.n_) return false;
  for (std::size_t i = 0; i < n_; ++i)
    if (at(i) != o.at(i)) return false;
  return true;
}

int RankSet::merge(const RankSet& a, const RankSet& b, RankSet& out) {
  out.clear();
  std::size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    const bool take_a = j == b.size() || (i < a.size() && a.at(i) < b.at(j));
    const Interval iv = take_a ? a.at(i++) : b.at(j++);
    if (out.n_ > 0 && iv.first < out.back().second) return iv.first;  // overlap
    if (out.n_ > 0 && iv.first == out.back().second)
      out.back().second = iv.second;
    else
      out.push_back(iv);
  }
  return -1;
}

std::string RankSet::str() const {
  std::string s = "{";
  for (std::size_t i = 0; i < n_; ++i) {
    const auto [lo, hi] = at(i);
    if (s.size() > 1) s += ",";
    s += hi - lo == 1 ? fmt::format("{}", lo) : fmt::format("{}-{}", lo, hi - 1);
  }
  return s + "}";
}

SegmentBuffer::SegmentBuffer(std::uint64_t size, bool dense) : size_(size), dense_(dense) {
  if (dense_) {
    elem_.assign(size, 0);
    set_.assign(size, nullptr);
  } else if (size > 0) {
    segs_[0] = {size, 0, nullptr};
  }
}

namespace {
// Two runs continue each other: same set and consecutive elements (or both
// uninitialised).
bool continues(const Piece& p, std::int64_t elem, SetPtr set) {
  return p.set == set && (!set || p.elem + static_cast<std::int64_t>(p.len) == elem);
}
}  // namespace

void SegmentBuffer::read(std::uint64_t off, std::uint64_t len, std::vector<Piece>& out) const {
  out.clear();
  if (len == 0) return;
  if (dense_) {
    for (std::uint64_t i = off; i < off + len; ++i) {
      if (!out.empty() && continues(out.back(), elem_[i], set_[i]))
        ++out.back().len;
      else
        out.push_back({1, elem_[i], set_[i]});
    }
    return;
  }
  auto it = segs_.upper_bound(off);
  --it;
  for (std::uint64_t pos = off, end = off + len; pos < end; ++it) {
    const std::uint64_t stop = std::min(end, it->second.end);
    out.push_back(
        {stop - pos, it->second.elem + static_cast<std::int64_t>(pos - it->first), it->second.set});
    pos = stop;
  }
}

void SegmentBuffer::split_at(std::uint64_t pos) {
  if (pos == 0 || pos >= size_) return;
  auto it = segs_.upper_bound(pos);
  --it;  // the run containing pos
  if (it->first == pos) return;
  Seg right{it->second.end, it->second.elem + static_cast<std::int64_t>(pos - it->first),
            it->second.set};
  it->second.end = pos;
  segs_.emplace(pos, right);
}

void SegmentBuffer::write(std::uint64_t off, const std::vector<Piece>& pieces) {
  if (dense_) {
    for (const auto& p : pieces)
      for (std::uint64_t k = 0; k < p.len; ++k, ++off) {
        elem_[off] = p.elem + static_cast<std::int64_t>(k);
        set_[off] = p.set;
      }
    return;
  }
  std::uint64_t len = 0;
  for (const auto& p : pieces) len += p.len;
  if (len == 0) return;
  split_at(off);
  split_at(off + len);
  auto hint = segs_.erase(segs_.lower_bound(off), segs_.lower_bound(off + len));
  for (const auto& p : pieces) {
    hint = std::next(segs_.emplace_hint(hint, off, Seg{off + p.len, p.elem, p.set}));
    off += p.len;
  }
}

}  // namespace cclab::coll::detail
