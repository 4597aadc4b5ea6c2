// The stream planner (see stream_plan.h). Nomenclature: a *point* (s, n) is
// "after the first n ops of stream s"; every step completes at a point, and a
// stream that must see a step complete waits for that point. Each stream keeps
// a vector clock (the prefix of every other stream it has waited for), so a
// wait that an earlier one already implies is dropped. Cost: O(steps) ops and
// O(waits x streams) clock memory; GPU worlds have tens of ranks, not
// thousands.
#include "cclab/collectives/stream_plan.h"

#include <algorithm>
#include <deque>
#include <map>

#include <fmt/format.h>

#include "cclab/collectives/error.h"
#include "cclab/collectives/step_runner.h"

namespace cclab::coll {
namespace {

struct Point {
  int stream = 0;
  std::uint32_t pos = 0;
  auto operator<=>(const Point&) const = default;
};

struct PendingSend {
  std::int64_t id;
  Step step;
  std::vector<Point> ready;  // kPull: where the data the send reads is final
};

struct PendingRecv {
  std::int64_t id;
  Step step;
};

BufferRef ref(int rank, const Region& r) {
  return {rank, static_cast<PlanBuffer>(r.buffer), r.offset};
}

class Planner {
 public:
  Planner(const Schedule& schedule, TransferLowering lowering);
  StreamPlan build();

 private:
  bool issue(int rank, std::int64_t id, const Step& s);
  void wait_deps(int rank, const Step& s);
  std::vector<Point> ready_points(int rank, const Step& s);
  void wait_for(int stream, Point p);
  void flush(int stream);
  void emit_wait(int stream, Point p);
  bool implies(Point q, Point p) const;
  std::int64_t append(const PlanOp& op);
  Point here(int stream) const { return {stream, pos_[stream]}; }
  const std::vector<std::uint32_t>* clock_at(Point p) const;
  void match(int from, int to);
  void lower_pull(int from, int to, const PendingSend& s, const PendingRecv& r);
  void lower_send_recv(int from, int to, const PendingSend& s, const PendingRecv& r);
  void complete(int rank, std::int64_t id, std::int64_t first, std::int64_t done);
  [[noreturn]] void fail_deadlock() const;
  void add_records();

  const Schedule& schedule_;
  TransferLowering lowering_;
  int n_;
  std::vector<detail::StepRunner> runners_;
  std::vector<std::deque<PendingSend>> sends_;      // [from * n + to]
  std::vector<std::deque<PendingRecv>> recvs_;      // [from * n + to], posted by `to`
  std::vector<std::vector<Point>> completion_;      // [rank][step id]
  std::vector<std::vector<Point>> remote_;          // [rank] done elsewhere since the last fence
  std::vector<std::uint32_t> local_;                // [rank] point after its last local step
  std::vector<std::vector<std::uint32_t>> fenced_;  // [rank] per stream: done before the fence
  std::vector<std::vector<Point>> pending_;         // [stream] waits not yet emitted
  std::vector<std::uint32_t> pos_;                  // ops per stream so far
  std::vector<std::uint32_t> op_pos_;               // per op: its stream's point after it
  std::vector<std::vector<std::uint32_t>> known_;   // [stream] vector clock
  struct Snapshot {
    std::uint32_t pos;
    std::vector<std::uint32_t> clock;
  };
  std::vector<std::vector<Snapshot>> snapshots_;  // [stream], after each wait
  std::map<Point, int> events_;                   // waited-for points
  std::pair<int, std::int64_t> current_{-1, -1};  // the step being issued
  bool current_done_ = false;
  StreamPlan plan_;
};

Planner::Planner(const Schedule& schedule, TransferLowering lowering)
    : schedule_(schedule),
      lowering_(lowering),
      n_(schedule.ranks()),
      sends_(static_cast<std::size_t>(n_) * n_),
      recvs_(static_cast<std::size_t>(n_) * n_),
      completion_(n_),
      remote_(n_),
      local_(n_, 0),
      fenced_(n_, std::vector<std::uint32_t>(n_, 0)),
      pending_(n_),
      pos_(n_, 0),
      known_(n_, std::vector<std::uint32_t>(n_, 0)),
      snapshots_(n_) {
  runners_.reserve(n_);
  for (int r = 0; r < n_; ++r) runners_.emplace_back(schedule.program(r));
  plan_.streams = n_;
  plan_.staging_count.assign(n_, 0);
  plan_.steps.resize(n_);
}

StreamPlan Planner::build() {
  for (;;) {
    bool progress = false, finished = true;
    for (int r = 0; r < n_; ++r) {
      progress |= runners_[r].issue_ready(
                      [&](std::int64_t id, const Step& s) { return issue(r, id, s); }) > 0;
      finished &= runners_[r].finished();
    }
    if (finished) break;
    if (!progress) fail_deadlock();
  }
  // An implicit fence ends every rank's stream: once it is done, so is every
  // step of the rank, sends read on other streams included.
  for (int r = 0; r < n_; ++r) {
    for (Point p : remote_[r]) wait_for(r, p);
    flush(r);
  }
  add_records();
  return std::move(plan_);
}

std::int64_t Planner::append(const PlanOp& op) {
  flush(op.stream);
  plan_.ops.push_back(op);
  op_pos_.push_back(++pos_[op.stream]);
  return static_cast<std::int64_t>(plan_.ops.size()) - 1;
}

// The clock of stream p.stream as it was at point p: its last snapshot taken
// at or before p (snapshots are in increasing pos).
const std::vector<std::uint32_t>* Planner::clock_at(Point p) const {
  const auto& snaps = snapshots_[p.stream];
  auto it = std::upper_bound(snaps.begin(), snaps.end(), p.pos,
                             [](std::uint32_t pos, const Snapshot& s) { return pos < s.pos; });
  return it == snaps.begin() ? nullptr : &std::prev(it)->clock;
}

// Waits are lazy: collected per stream and emitted just before the stream's
// next op, dropping those that another pending or earlier wait implies.
void Planner::wait_for(int stream, Point p) {
  if (p.stream == stream || p.pos == 0) return;  // stream order, or nothing to wait for
  pending_[stream].push_back(p);
}

bool Planner::implies(Point q, Point p) const {
  if (q.stream == p.stream) return q.pos >= p.pos;
  const auto* clock = clock_at(q);
  return clock && (*clock)[p.stream] >= p.pos;
}

void Planner::flush(int stream) {
  auto pending = std::move(pending_[stream]);
  pending_[stream].clear();
  std::sort(pending.begin(), pending.end());
  pending.erase(std::unique(pending.begin(), pending.end()), pending.end());
  // Distinct points imply each other in one direction at most (host order is
  // acyclic), so keeping the ones no other implies keeps exactly what is needed.
  std::vector<Point> kept;
  for (Point p : pending) {
    bool implied = known_[stream][p.stream] >= p.pos;
    for (Point q : pending) implied = implied || (!(q == p) && implies(q, p));
    if (implied)
      ++plan_.waits_dropped;
    else
      kept.push_back(p);
  }
  for (Point p : kept) emit_wait(stream, p);
}

void Planner::emit_wait(int stream, Point p) {
  PlanOp op;
  op.kind = PlanOpKind::kWait;
  op.stream = stream;
  op.event = events_.try_emplace(p, static_cast<int>(events_.size())).first->second;
  plan_.ops.push_back(op);
  op_pos_.push_back(++pos_[stream]);
  auto& mine = known_[stream];
  if (const auto* theirs = clock_at(p))
    for (int s = 0; s < n_; ++s) mine[s] = std::max(mine[s], (*theirs)[s]);
  mine[p.stream] = p.pos;
  snapshots_[stream].push_back({pos_[stream], mine});
}

void Planner::wait_deps(int rank, const Step& s) {
  for (int k = 0; k < s.num_deps; ++k) wait_for(rank, completion_[rank][s.deps[k]]);
}

// What a send's data waits for. With kSendRecv the send op runs on the
// sender's stream, so its deps become waits there now. With kPull the
// receiver's stream reads the data: it waits for the deps, the last fence and
// the last local step (those complete when issued, so later steps may rely on
// them without a dep), not for whatever else the sender's stream has queued.
std::vector<Point> Planner::ready_points(int rank, const Step& s) {
  if (lowering_ == TransferLowering::kSendRecv) {
    wait_deps(rank, s);
    return {};
  }
  std::vector<Point> ready = {{rank, local_[rank]}};
  for (int k = 0; k < s.num_deps; ++k) ready.push_back(completion_[rank][s.deps[k]]);
  for (int stream = 0; stream < n_; ++stream)
    if (fenced_[rank][stream] > 0) ready.push_back({stream, fenced_[rank][stream]});
  return ready;
}

bool Planner::issue(int rank, std::int64_t id, const Step& s) {
  completion_[rank].resize(id + 1);
  plan_.steps[rank].resize(id + 1);
  current_ = {rank, id};
  current_done_ = false;
  switch (s.kind) {
    case StepKind::kFence:
      // Later steps on this stream need the remote completions; a later
      // pulled send needs all of them on the receiver's stream (fenced_).
      fenced_[rank][rank] = pos_[rank];
      for (Point p : remote_[rank]) {
        wait_for(rank, p);
        fenced_[rank][p.stream] = std::max(fenced_[rank][p.stream], p.pos);
      }
      remote_[rank].clear();
      completion_[rank][id] = here(rank);
      return true;
    case StepKind::kCopy:
    case StepKind::kReduce: {
      wait_deps(rank, s);
      PlanOp op;
      op.kind = s.kind == StepKind::kCopy ? PlanOpKind::kCopy : PlanOpKind::kReduce;
      op.stream = rank;
      op.dst = ref(rank, s.dst);
      op.a = ref(rank, s.kind == StepKind::kCopy ? s.src : s.dst);
      op.b = ref(rank, s.src);
      op.count = s.dst.count;
      const auto i = append(op);
      complete(rank, id, i, i);
      local_[rank] = pos_[rank];
      return true;
    }
    case StepKind::kSend:
      sends_[static_cast<std::size_t>(rank) * n_ + s.peer].push_back(
          {id, s, ready_points(rank, s)});
      match(rank, s.peer);
      return current_done_;
    default:  // kRecv, kRecvReduce
      wait_deps(rank, s);
      recvs_[static_cast<std::size_t>(s.peer) * n_ + rank].push_back({id, s});
      match(s.peer, rank);
      return current_done_;
  }
}

void Planner::match(int from, int to) {
  auto& sends = sends_[static_cast<std::size_t>(from) * n_ + to];
  auto& recvs = recvs_[static_cast<std::size_t>(from) * n_ + to];
  while (!sends.empty() && !recvs.empty()) {
    const PendingSend s = sends.front();
    const PendingRecv r = recvs.front();
    sends.pop_front();
    recvs.pop_front();
    if (s.step.src.count != r.step.dst.count)
      throw InternalError(fmt::format("{}: rank {} sends {} elements but rank {} expects {} ({})",
                                      schedule_.name(), from, s.step.src.count, to,
                                      r.step.dst.count, describe(r.step)));
    ++plan_.transfers;
    if (lowering_ == TransferLowering::kPull)
      lower_pull(from, to, s, r);
    else
      lower_send_recv(from, to, s, r);
  }
}

// One op on the receiver's stream, after the sender's data is ready; both
// steps complete with it.
void Planner::lower_pull(int from, int to, const PendingSend& s, const PendingRecv& r) {
  for (Point p : s.ready) wait_for(to, p);
  PlanOp op;
  op.stream = to;
  op.dst = ref(to, r.step.dst);
  op.count = r.step.dst.count;
  if (r.step.kind == StepKind::kRecv) {
    op.kind = PlanOpKind::kCopy;
    op.a = ref(from, s.step.src);
  } else {
    op.kind = PlanOpKind::kReduce;
    op.a = ref(to, r.step.src);
    op.b = ref(from, s.step.src);
  }
  const auto i = append(op);
  complete(from, s.id, i, i);
  complete(to, r.id, i, i);
}

// A send and a recv in one group (stream order on each side covers the deps
// waited for at issue); a recv-reduce lands in staging and is reduced after.
void Planner::lower_send_recv(int from, int to, const PendingSend& s, const PendingRecv& r) {
  const int group = static_cast<int>(plan_.transfers) - 1;
  const std::uint64_t count = r.step.dst.count;
  PlanOp send;
  send.kind = PlanOpKind::kSend;
  send.stream = from;
  send.peer = to;
  send.a = ref(from, s.step.src);
  send.count = count;
  send.group = group;
  const auto si = append(send);
  PlanOp recv;
  recv.kind = PlanOpKind::kRecv;
  recv.stream = to;
  recv.peer = from;
  recv.count = count;
  recv.group = group;
  const bool reduce = r.step.kind == StepKind::kRecvReduce;
  recv.dst = reduce ? BufferRef{to, PlanBuffer::kStaging, 0} : ref(to, r.step.dst);
  const auto ri = append(recv);
  auto done = ri;
  if (reduce) {
    plan_.staging_count[to] = std::max(plan_.staging_count[to], count);
    PlanOp op;
    op.kind = PlanOpKind::kReduce;
    op.stream = to;
    op.dst = ref(to, r.step.dst);
    op.a = ref(to, r.step.src);
    op.b = recv.dst;
    op.count = count;
    done = append(op);
  }
  complete(from, s.id, si, si);
  complete(to, r.id, ri, done);
}

void Planner::complete(int rank, std::int64_t id, std::int64_t first, std::int64_t done) {
  const Point p{plan_.ops[done].stream, op_pos_[done]};
  completion_[rank][id] = p;
  plan_.steps[rank][id] = {first, done};
  if (p.stream != rank) remote_[rank].push_back(p);
  if (current_ == std::make_pair(rank, id))
    current_done_ = true;  // issue() returns true instead
  else
    runners_[rank].complete(id);
}

void Planner::fail_deadlock() const {
  std::string stuck;
  for (int r = 0; r < n_ && stuck.size() < 400; ++r)
    if (auto next = runners_[r].next_unissued(); next && !runners_[r].finished())
      stuck += fmt::format("; rank {} at step {} ({})", r, next->first, describe(next->second));
  throw InternalError(fmt::format("{}: the schedule deadlocks{}", schedule_.name(), stuck));
}

// Records an event right after each op whose point some stream waits for.
// That op precedes the wait in host order, so every record precedes its waits.
void Planner::add_records() {
  std::vector<PlanOp> ops;
  ops.reserve(plan_.ops.size() + events_.size());
  std::vector<std::int64_t> new_index(plan_.ops.size());
  for (std::size_t i = 0; i < plan_.ops.size(); ++i) {
    new_index[i] = static_cast<std::int64_t>(ops.size());
    ops.push_back(plan_.ops[i]);
    if (auto it = events_.find({plan_.ops[i].stream, op_pos_[i]}); it != events_.end()) {
      PlanOp rec;
      rec.kind = PlanOpKind::kRecord;
      rec.stream = plan_.ops[i].stream;
      rec.event = it->second;
      ops.push_back(rec);
    }
  }
  for (auto& rank_steps : plan_.steps)
    for (auto& s : rank_steps)
      if (s.first >= 0) s = {new_index[s.first], new_index[s.done]};
  plan_.ops = std::move(ops);
  plan_.events = static_cast<int>(events_.size());
}

}  // namespace

StreamPlan plan_streams(const Schedule& schedule, TransferLowering lowering) {
  return Planner(schedule, lowering).build();
}

std::string_view plan_op_name(PlanOpKind k) {
  switch (k) {
    case PlanOpKind::kCopy:
      return "copy";
    case PlanOpKind::kReduce:
      return "reduce";
    case PlanOpKind::kSend:
      return "send";
    case PlanOpKind::kRecv:
      return "recv";
    case PlanOpKind::kRecord:
      return "record";
    case PlanOpKind::kWait:
      return "wait";
  }
  return "?";
}

namespace {
std::string describe(const BufferRef& b, std::uint64_t count, int stream) {
  static constexpr std::string_view kNames[] = {"input", "output", "scratch", "staging"};
  return fmt::format("{}{}[{},{})", b.rank == stream ? "" : fmt::format("rank {} ", b.rank),
                     kNames[static_cast<int>(b.buffer)], b.offset, b.offset + count);
}
}  // namespace

std::string describe(const PlanOp& op) {
  const auto head = fmt::format("rank {}: {}", op.stream, plan_op_name(op.kind));
  const int s = op.stream;
  switch (op.kind) {
    case PlanOpKind::kCopy:
      return fmt::format("{} {} = {}", head, describe(op.dst, op.count, s),
                         describe(op.a, op.count, s));
    case PlanOpKind::kReduce:
      return fmt::format("{} {} = {} op {}", head, describe(op.dst, op.count, s),
                         describe(op.a, op.count, s), describe(op.b, op.count, s));
    case PlanOpKind::kSend:
      return fmt::format("{} {} to {}", head, describe(op.a, op.count, s), op.peer);
    case PlanOpKind::kRecv:
      return fmt::format("{} {} from {}", head, describe(op.dst, op.count, s), op.peer);
    default:
      return fmt::format("{} event {}", head, op.event);
  }
}

}  // namespace cclab::coll
