// The symbolic checker (see checker.h). It runs all ranks in rounds: in each
// round every rank issues steps until one waits on a dependency, then every
// matched send/receive pair completes. A round without progress while steps
// remain is a deadlock.
#include "cclab/collectives/checker.h"

#include <algorithm>
#include <deque>
#include <numeric>
#include <span>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "symbolic.h"

namespace cclab::coll {
namespace {

using detail::Piece;
using detail::RankSet;
using detail::SegmentBuffer;
using detail::SetPtr;

struct Violation {
  std::string what;
};
// CheckOptions::max_steps ran out.
struct BudgetSpent {};

// A buffer region resolved to storage: in place, input and output share one.
struct Span {
  int storage;  // 0 = input, 1 = output (and input, in place), 2 = scratch
  std::uint64_t lo, hi;
  bool overlaps(const Span& o) const { return storage == o.storage && lo < o.hi && o.lo < hi; }
};

struct Access {
  std::int64_t id;
  Span span;
  bool write;
};

struct RankState {
  Program program;
  bool has_next = false;
  Step next;
  std::int64_t next_id = 0;
  std::vector<std::uint8_t> done;
  std::int64_t incomplete = 0;
  std::vector<Access> inflight;
  SegmentBuffer storage[3];
  InPlaceOffsets offsets;
};

struct Posted {
  int rank;
  std::int64_t id;
  Step step;
};

class Checker {
 public:
  Checker(const Schedule& s, const CheckOptions& o) : sched_(s), shape_(s.shape()), opt_(o) {}
  CheckResult run();

 private:
  void init_rank(int r);
  bool issue_ready(int r);
  void issue(int r);
  bool complete_matches();
  void transfer(const Posted& send, const Posted& recv);
  void finish(int r, std::int64_t id);
  void check_final(int r);
  std::string deadlock_report();
  Span span(int r, const Region& reg, std::int64_t id);
  // Reads into `out`; fails on uninitialised data.
  void read(int r, const Region& reg, std::int64_t id, std::vector<Piece>& out);
  void write(int r, const Region& reg, const std::vector<Piece>& p);
  // out = a (op) b element-wise.
  void combine(int r, std::int64_t id, const std::vector<Piece>& a, const std::vector<Piece>& b,
               std::vector<Piece>& out);
  [[noreturn, gnu::cold, gnu::noinline]] void fail(int r, std::int64_t id, const std::string& what);

  const Schedule& sched_;
  const CollectiveShape& shape_;
  CheckOptions opt_;
  std::vector<RankState> ranks_;
  std::unordered_map<std::uint64_t, std::pair<std::deque<Posted>, std::deque<Posted>>> pairs_;
  std::vector<std::uint64_t> touched_, keys_;  // pairs posted to this round
  CheckResult result_;
  std::vector<Piece> a_, b_, c_;  // reused piece lists
  detail::SetArena arena_;
  bool dense_ = true;
  // Ranks with a step finished since the round began: the only ones that can
  // issue more in the next (a rank waits on its own steps alone). Visiting
  // every rank every round cost ranks x rounds: ring at 100,000 ranks.
  std::vector<int> woken_;
  std::vector<char> is_woken_;
};

std::uint64_t pair_key(int from, int to) {
  return (static_cast<std::uint64_t>(from) << 32) | static_cast<std::uint32_t>(to);
}

void Checker::fail(int r, std::int64_t id, const std::string& what) {
  throw Violation{id >= 0 ? fmt::format("rank {} step {}: {}", r, id, what)
                          : fmt::format("rank {}: {}", r, what)};
}

void Checker::init_rank(int r) {
  RankState& st = ranks_[r];
  st.offsets = sched_.in_place_offsets(r);
  const std::uint64_t in_n = shape_.input_count(), out_n = shape_.output_count();
  st.storage[0] = SegmentBuffer(opt_.in_place ? 0 : in_n, dense_);
  st.storage[1] = SegmentBuffer(opt_.in_place ? st.offsets.storage_count : out_n, dense_);
  st.storage[2] = SegmentBuffer(sched_.scratch_count(), dense_);
  // Input element j of rank r: which global element it is, contributed by r.
  std::int64_t first = 0;
  if (shape_.kind == CollectiveKind::kAllGather) first = static_cast<std::int64_t>(in_n) * r;
  if (in_n > 0) {
    const std::uint64_t at = opt_.in_place ? st.offsets.input : 0;
    st.storage[opt_.in_place ? 1 : 0].write(at,
                                            {Piece{in_n, first, arena_.add(RankSet::single(r))}});
  }
  st.program = sched_.program(r);
  st.has_next = st.program.next();
  if (st.has_next) st.next = st.program.value();
}

Span Checker::span(int r, const Region& reg, std::int64_t id) {
  const RankState& st = ranks_[r];
  std::uint64_t limit = 0, base = 0;
  int storage = 2;
  switch (reg.buffer) {
    case BufferId::kInput:
      limit = shape_.input_count();
      storage = opt_.in_place ? 1 : 0;
      base = opt_.in_place ? st.offsets.input : 0;
      break;
    case BufferId::kOutput:
      limit = shape_.output_count();
      storage = 1;
      base = opt_.in_place ? st.offsets.output : 0;
      break;
    case BufferId::kScratch:
      limit = sched_.scratch_count();
      break;
  }
  if (reg.end() > limit)
    fail(r, id,
         fmt::format("{}[{},{}) is out of bounds (size {})", buffer_name(reg.buffer), reg.offset,
                     reg.end(), limit));
  return {storage, base + reg.offset, base + reg.end()};
}

void Checker::read(int r, const Region& reg, std::int64_t id, std::vector<Piece>& out) {
  const Span s = span(r, reg, id);
  ranks_[r].storage[s.storage].read(s.lo, s.hi - s.lo, out);
  for (const auto& p : out)
    if (!p.set)
      fail(r, id,
           fmt::format("reads uninitialised {}[{},{})", buffer_name(reg.buffer), reg.offset,
                       reg.end()));
}

void Checker::write(int r, const Region& reg, const std::vector<Piece>& p) {
  const Span s = span(r, reg, -1);
  ranks_[r].storage[s.storage].write(s.lo, p);
}

// Element-wise a (op) b: the same element on both sides, disjoint rank sets.
void Checker::combine(int r, std::int64_t id, const std::vector<Piece>& a,
                      const std::vector<Piece>& b, std::vector<Piece>& out) {
  out.clear();
  std::size_t i = 0, j = 0;
  std::uint64_t ia = 0, jb = 0, pos = 0;  // offsets consumed inside a[i], b[j]
  while (i < a.size() && j < b.size()) {
    const std::uint64_t len = std::min(a[i].len - ia, b[j].len - jb);
    const std::int64_t ea = a[i].elem + ia, eb = b[j].elem + jb;
    if (ea != eb)
      fail(r, id,
           fmt::format("reduces element {} with element {} (at offset {} of the range)", ea, eb,
                       pos));
    RankSet merged;
    if (int dup = RankSet::merge(*a[i].set, *b[j].set, merged); dup >= 0)
      fail(r, id,
           fmt::format("element {} would hold rank {}'s contribution twice ({} + {})", ea, dup,
                       a[i].set->str(), b[j].set->str()));
    out.push_back({len, ea, arena_.add(std::move(merged))});
    pos += len;
    if ((ia += len) == a[i].len) ++i, ia = 0;
    if ((jb += len) == b[j].len) ++j, jb = 0;
  }
}

bool Checker::issue_ready(int r) {
  RankState& st = ranks_[r];
  const Step& s = st.next;
  if (s.kind == StepKind::kFence) return st.incomplete == 0;
  for (int k = 0; k < s.num_deps; ++k) {
    const auto d = s.deps[k];
    if (d < 0 || d >= st.next_id)
      fail(r, st.next_id, fmt::format("depends on step {}, which is not an earlier step", d));
    if (!st.done[d]) return false;
  }
  return true;
}

void Checker::issue(int r) {
  RankState& st = ranks_[r];
  const Step s = st.next;
  if (opt_.max_steps > 0 && result_.steps == opt_.max_steps) throw BudgetSpent{};
  const std::int64_t id = st.next_id++;
  st.done.push_back(0);
  ++st.incomplete;
  ++result_.steps;
  if (s.is_transfer() && (s.peer < 0 || s.peer >= shape_.ranks || s.peer == r))
    fail(r, id,
         fmt::format("{}: peer {} is not another rank of {}", describe(s), s.peer, shape_.ranks));
  // Accesses this step makes, checked against unfinished steps of the rank.
  Access acc_buf[2];
  int n_acc = 0;
  if (s.kind == StepKind::kSend || s.kind == StepKind::kRecvReduce || s.kind == StepKind::kCopy ||
      s.kind == StepKind::kReduce)
    acc_buf[n_acc++] = {id, span(r, s.src, id), false};
  if (s.kind != StepKind::kSend && s.kind != StepKind::kFence)
    acc_buf[n_acc++] = {id, span(r, s.dst, id), true};
  const std::span<const Access> acc(acc_buf, n_acc);
  for (const auto& a : acc)
    for (const auto& b : st.inflight)
      if ((a.write || b.write) && a.span.overlaps(b.span))
        fail(r, id,
             fmt::format("{} races with unfinished step {} on overlapping data (missing "
                         "dependency)",
                         describe(s), b.id));
  switch (s.kind) {
    case StepKind::kCopy:
      read(r, s.src, id, a_);
      write(r, s.dst, a_);
      break;
    case StepKind::kReduce:
      read(r, s.dst, id, a_);
      read(r, s.src, id, b_);
      combine(r, id, a_, b_, c_);
      write(r, s.dst, c_);
      break;
    case StepKind::kFence:
      break;
    default: {
      for (const auto& a : acc) st.inflight.push_back(a);
      auto& q = s.kind == StepKind::kSend ? pairs_[pair_key(r, s.peer)].first
                                          : pairs_[pair_key(s.peer, r)].second;
      q.push_back({r, id, s});
      touched_.push_back(s.kind == StepKind::kSend ? pair_key(r, s.peer) : pair_key(s.peer, r));
      return;
    }
  }
  finish(r, id);
}

void Checker::finish(int r, std::int64_t id) {
  RankState& st = ranks_[r];
  st.done[id] = 1;
  --st.incomplete;
  if (!is_woken_[r]) is_woken_[r] = 1, woken_.push_back(r);
  std::erase_if(st.inflight, [id](const Access& a) { return a.id == id; });
}

void Checker::transfer(const Posted& send, const Posted& recv) {
  const Step& ss = send.step;
  const Step& rs = recv.step;
  if (ss.src.count != rs.dst.count)
    fail(send.rank, send.id,
         fmt::format("sends {} elements to rank {}, whose matching receive (step {}) expects {}",
                     ss.src.count, recv.rank, recv.id, rs.dst.count));
  if (ss.into_reduce != (rs.kind == StepKind::kRecvReduce))
    fail(send.rank, send.id,
         fmt::format("sends to rank {} marked {}, but its matching receive (step {}) {}", recv.rank,
                     ss.into_reduce ? "into a reduction" : "as a plain copy", recv.id,
                     rs.kind == StepKind::kRecvReduce ? "reduces" : "copies"));
  read(send.rank, ss.src, send.id, a_);
  if (rs.kind == StepKind::kRecvReduce) {
    read(recv.rank, rs.src, recv.id, b_);
    combine(recv.rank, recv.id, b_, a_, c_);
    write(recv.rank, rs.dst, c_);
  } else {
    write(recv.rank, rs.dst, a_);
  }
  ++result_.transfers;
  finish(send.rank, send.id);
  finish(recv.rank, recv.id);
}

bool Checker::complete_matches() {
  bool progress = false;
  keys_.swap(touched_);  // both keep their capacity across rounds
  touched_.clear();
  for (auto key : keys_) {
    auto& [sends, recvs] = pairs_[key];
    while (!sends.empty() && !recvs.empty()) {
      const Posted s = sends.front(), rv = recvs.front();
      sends.pop_front();
      recvs.pop_front();
      transfer(s, rv);
      progress = true;
    }
  }
  return progress;
}

std::string Checker::deadlock_report() {
  std::string msg = "deadlock: no rank can make progress";
  int shown = 0;
  for (int r = 0; r < shape_.ranks && shown < 4; ++r) {
    const RankState& st = ranks_[r];
    if (!st.has_next && st.incomplete == 0) continue;
    ++shown;
    if (st.has_next)
      msg += fmt::format("; rank {} cannot issue step {} ({})", r, st.next_id, describe(st.next));
    for (const auto& a : st.inflight) {
      msg += fmt::format("; rank {} step {} waits for its peer", r, a.id);
      break;
    }
  }
  return msg;
}

void Checker::check_final(int r) {
  RankState& st = ranks_[r];
  const std::uint64_t n_out = shape_.output_count();
  const std::uint64_t base = opt_.in_place ? st.offsets.output : 0;
  std::vector<Piece> pieces;
  st.storage[1].read(base, n_out, pieces);
  std::uint64_t pos = 0;
  for (const auto& p : pieces) {
    for (std::uint64_t k = 0; k < p.len;) {
      const std::uint64_t at = pos + k;
      // What output element `at` must be, and whose contributions it must hold.
      std::int64_t elem = static_cast<std::int64_t>(at);
      RankSet want = RankSet::range(0, shape_.ranks);
      std::uint64_t run = p.len - k;  // elements with the same expectation
      if (shape_.kind == CollectiveKind::kReduceScatter) elem += shape_.count * r;
      if (shape_.kind == CollectiveKind::kBroadcast) want = RankSet::single(shape_.root);
      if (shape_.kind == CollectiveKind::kAllGather) {
        const int owner = static_cast<int>(at / shape_.count);
        want = RankSet::single(owner);
        run = std::min(run, (owner + 1) * shape_.count - at);
      }
      if (!p.set) fail(r, -1, fmt::format("output[{},{}) is never written", at, at + run));
      if (p.elem + static_cast<std::int64_t>(k) != elem)
        fail(r, -1,
             fmt::format("output[{}] holds element {}, expected element {}", at,
                         p.elem + static_cast<std::int64_t>(k), elem));
      if (!(*p.set == want))
        fail(r, -1,
             fmt::format("output[{},{}) holds contributions of ranks {}, expected {}", at, at + run,
                         p.set->str(), want.str()));
      k += run;
    }
    pos += p.len;
  }
}

CheckResult Checker::run() {
  try {
    ranks_.resize(shape_.ranks);
    // Dense buffers (16 bytes per element) while every rank's buffers
    // together stay under 16M elements; runs in a map beyond that.
    const std::uint64_t per_rank =
        shape_.input_count() + shape_.output_count() + sched_.scratch_count();
    dense_ = per_rank * shape_.ranks <= (16u << 20);
    for (int r = 0; r < shape_.ranks; ++r) init_rank(r);
    is_woken_.assign(shape_.ranks, 0);
    std::vector<int> visit(shape_.ranks);
    std::iota(visit.begin(), visit.end(), 0);
    for (;;) {
      bool progress = false;
      for (int r : visit) {
        RankState& st = ranks_[r];
        while (st.has_next && issue_ready(r)) {
          issue(r);
          progress = true;
          st.has_next = st.program.next();
          if (st.has_next) st.next = st.program.value();
        }
      }
      progress |= complete_matches();
      ++result_.rounds;
      if (!progress) break;
      // Next round, in rank order as before: the woken ones.
      visit.swap(woken_);
      woken_.clear();
      for (int r : visit) is_woken_[r] = 0;
      std::sort(visit.begin(), visit.end());
    }
    for (int r = 0; r < shape_.ranks; ++r)
      if (ranks_[r].has_next) throw Violation{deadlock_report()};
    for (const auto& [key, q] : pairs_) {
      if (!q.first.empty())
        fail(q.first.front().rank, q.first.front().id,
             fmt::format("sends to rank {}, which never posts a matching receive",
                         q.first.front().step.peer));
      if (!q.second.empty())
        fail(q.second.front().rank, q.second.front().id,
             fmt::format("receives from rank {}, which never sends the matching message",
                         q.second.front().step.peer));
    }
    for (int r = 0; r < shape_.ranks; ++r)
      if (ranks_[r].incomplete > 0) throw Violation{deadlock_report()};
    for (int r = 0; r < shape_.ranks; ++r) check_final(r);
  } catch (const Violation& v) {
    result_.ok = false;
    result_.error = v.what;
  } catch (const BudgetSpent&) {
    result_.ok = false;
    result_.stopped = true;
    result_.error =
        fmt::format("stopped after {} steps, before the schedule ended: not proved", result_.steps);
  }
  return result_;
}

}  // namespace

CheckResult check_schedule(const Schedule& schedule, const CheckOptions& options) {
  return Checker(schedule, options).run();
}

}  // namespace cclab::coll
