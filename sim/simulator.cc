// The schedule runner: one event loop, a StepRunner per rank, FIFO matching
// per ordered pair, transfers as flows (see simulator.h).
//
// Matching: the k-th send from a to b meets the k-th receive b posts from a.
// Whichever side is issued first waits in the pair's queue; when the other
// side is issued the transfer starts at that moment (rendezvous). An eager
// send (up to the topology's eager_bytes) starts its transfer when issued and
// waits in the queue with it; the receive that meets it completes when the
// data has landed, at once if it already has.
#include "cclab/sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <span>
#include <utility>

#include <fmt/format.h>

#include "cclab/collectives/error.h"
#include "cclab/collectives/step_runner.h"
#include "cclab/sim/network.h"
#include "cclab/sim/routing.h"
#include "cclab/sim/trace.h"

namespace cclab::sim {
namespace {

using coll::Step;
using coll::StepKind;
using coll::detail::StepRunner;

constexpr std::uint32_t kNoTransfer = ~0u;

struct Posted {
  std::int64_t step = 0;
  std::uint64_t count = 0;                // elements
  std::uint32_t eager_tag = kNoTransfer;  // an eager send's transfer, under way or landed
  bool reduce = false;                    // receives only: kRecvReduce
};

// The FIFO of one ordered pair's unmatched posts. Only one side can wait at a
// time (a post that finds the other side waiting matches it at once), so one
// queue and a flag stand for both. Usually one or two wait: they live in
// place; more spill to a vector that keeps its storage once drained.
struct PairQueue {
  NodeId src_rank = 0;           // the sender; the queue lives with the receiver
  bool holds_sends = false;      // what waits: sends or receives
  std::uint32_t size = 0;        // posts waiting
  std::uint32_t head = 0;        // spill: the next to pop
  const Route* route = nullptr;  // src -> receiver, cached on first use
  // A copy of a short route (up to kNearLinks), so that starting a transfer
  // reads no Router memory; longer routes are read through `route`.
  static constexpr std::uint32_t kNearLinks = 6;
  std::uint32_t num_links = 0;
  Time latency = 0;
  LinkId links[kNearLinks] = {};
  std::span<const LinkId> route_links() const {
    return num_links <= kNearLinks ? std::span<const LinkId>(links, num_links)
                                   : std::span<const LinkId>(route->links);
  }
  Posted inline_[2];
  std::vector<Posted> spill;  // all waiting posts, once more than 2 waited
  // With Topology::pair_fifo, the pair's messages go on the wire one after
  // another: a matched transfer waits while an earlier one of the pair is
  // under way, in a list threaded through the transfers (Transfer::wire_next).
  bool wire_busy = false;
  std::uint32_t wire_head = kNoTransfer, wire_tail = kNoTransfer;

  bool empty() const { return size == 0; }
  void push(const Posted& p) {
    if (spill.empty() && size < 2) {
      inline_[size++] = p;
      return;
    }
    if (spill.empty()) spill.assign(inline_, inline_ + size), head = 0;
    spill.push_back(p);
    ++size;
  }
  Posted pop() {
    --size;
    if (spill.empty()) {
      const Posted p = inline_[0];
      inline_[0] = inline_[1];
      return p;
    }
    const Posted p = spill[head++];
    if (size == 0) spill.clear(), head = 0;
    return p;
  }
};

// A rank's program frames: enough for the deepest composition (hier over a
// flat algorithm: about 3 KiB); more spills to the heap.
constexpr std::size_t kFrameBytes = 4096;

// A send whose host overhead is under way: it is posted when that ends.
struct DeferredSend {
  int dst = 0;
  Posted post;
};

struct Transfer {
  int src = 0, dst = 0;
  Posted send, recv;
  bool eager = false;   // the send completed when it was issued
  bool matched = true;  // false while an eager send's receive is not posted
  bool landed = false;  // an unmatched eager transfer's data has arrived
  // Waiting behind its pair's message on the wire (pair_fifo): the next to
  // wait after it, and when it was ready to go.
  std::uint32_t wire_next = kNoTransfer;
  Time ready = 0;
};

// Everything the runner keeps per rank, in one place (large runs are bound by
// memory latency): its program, finish time, reduce rate, and the queues of
// the pairs it receives on (a rank has a handful of peers: a linear scan).
struct RankState {
  RankState(const coll::Schedule& sched, int rank) : runner(start(sched, rank, frames)) {}
  static StepRunner start(const coll::Schedule& sched, int rank, const coll::FrameArena& frames) {
    coll::ScopedFrameArena scope(frames);
    return StepRunner(sched.program(rank));
  }
  // The program's coroutine frames, together (declared first: freed last).
  coll::FrameArena frames{kFrameBytes};
  std::size_t frames_used = 0;  // frames.used(), kept here for prefetching
  StepRunner runner;
  Time finish = -1;
  Time host_free = 0;  // when its host is done with the messages it handles
  double reduce_bps = 0;
  std::vector<PairQueue> from;  // by sender
};

class Simulation {
 public:
  Simulation(const Topology& topo, const coll::Schedule& sched, const SimOptions& opts)
      : topo_(topo),
        opts_(opts),
        ranks_(sched.ranks()),
        eager_bytes_(topo.eager_bytes),
        overhead_(topo.overhead),
        pair_fifo_(topo.pair_fifo),
        router_(topo),
        network_(topo, queue_) {
    ranks_state_.reserve(ranks_);
    for (int r = 0; r < ranks_; ++r) {
      RankState& rs = ranks_state_.emplace_back(sched, r);
      rs.reduce_bps = topo_.node(topo_.endpoint(r)).reduce_bps;
      rs.from.reserve(4);  // allocated in rank order, as the rank states are
    }
    network_.set_trace(opts.trace);
    if (overhead_ > 0) host_busy_.assign(ranks_, 0);
    if (overhead_ > 0) cpus_.assign(topo.host_cpus, 0);
  }

  SimResult run() {
    for (int r = 0; r < ranks_; ++r) progress(r);
    while (!queue_.empty()) {
      prefetch();
      dispatch(queue_.pop());
    }
    for (int r = 0; r < ranks_; ++r)
      if (ranks_state_[r].finish < 0) throw InternalError(stuck_message(r));
    return result();
  }

 private:
  void dispatch(const SimQueue::Event& e) {
    if (e.payload.kind == EventKind::kStepDone) {
      complete(static_cast<int>(e.payload.a), static_cast<std::int64_t>(e.payload.b));
      return;
    }
    if (e.payload.kind == EventKind::kSendReady) {
      send_ready(static_cast<int>(e.payload.a), static_cast<std::uint32_t>(e.payload.b));
      return;
    }
    if (auto tag = network_.handle(e.payload)) transfer_done(*tag);
  }

  // Large runs wait on memory: thousands of events share a time, so the state
  // of the events a few places ahead is requested now, in two stages (a flow,
  // then what it points at). Hints only: results do not depend on them.
  void prefetch() {
    // Four stages, each reading only what the one before brought in: the
    // flow; its links and transfer; the transfer's two ranks; their frames.
    constexpr std::size_t kFar = 15, kMid = 10, kNear = 5, kFrames = 2;
    if (const SimQueue::Event* e = queue_.peek(kFar); e && names_flow(e->payload.kind))
      network_.prefetch_flow(e->payload);
    if (const SimQueue::Event* e = queue_.peek(kMid); e && names_flow(e->payload.kind)) {
      const std::uint64_t tag = network_.prefetch_links(e->payload);
      if (e->payload.kind == EventKind::kFlowDone && tag < transfers_.size())
        prefetch_line(&transfers_[tag]);
    }
    for_ranks(queue_.peek(kNear), [&](int rank) { prefetch_rank(rank); });
    for_ranks(queue_.peek(kFrames), [&](int rank) {
      prefetch_frames(rank);
      // The transfer it issues next posts to the peer's pair queues.
      if (const Step* s = ranks_state_[rank].runner.peek_next(); s && s->is_transfer())
        prefetch_queues(s->kind == StepKind::kSend ? s->peer : rank);
    });
  }
  // Where a post to `receiver` looks: its rank state and its pair queues.
  void prefetch_queues(int receiver) const {
    const RankState& rs = ranks_state_[receiver];
    prefetch_line(&rs.from);
    if (!rs.from.empty()) prefetch_line(rs.from.data());
  }
  // Calls fn(rank) for the ranks event `e` will resume, if any.
  template <class Fn>
  void for_ranks(const SimQueue::Event* e, Fn&& fn) const {
    if (!e) return;
    if (e->payload.kind == EventKind::kStepDone || e->payload.kind == EventKind::kSendReady)
      return fn(static_cast<int>(e->payload.a));
    if (e->payload.kind != EventKind::kFlowDone) return;
    const std::uint64_t tag = network_.tag(e->payload);
    if (tag >= transfers_.size()) return;
    fn(transfers_[tag].src);
    fn(transfers_[tag].dst);
  }
  void prefetch_rank(int rank) const {
    const RankState& rs = ranks_state_[rank];
    const char* p = reinterpret_cast<const char*>(&rs);
    for (std::size_t off = 0; off < sizeof(RankState); off += 64) prefetch_line(p + off);
  }
  // The rank's program frames (after prefetch_rank brought in where they are).
  void prefetch_frames(int rank) const {
    const RankState& rs = ranks_state_[rank];
    const char* p = static_cast<const char*>(rs.frames.data());
    for (std::size_t off = 0; off < rs.frames_used; off += 64) prefetch_line(p + off);
  }

  void progress(int rank) {
    RankState& rs = ranks_state_[rank];
    coll::ScopedFrameArena scope(rs.frames);
    steps_ +=
        rs.runner.issue_ready([&](std::int64_t id, const Step& s) { return issue(rank, id, s); });
    rs.frames_used = rs.frames.used();
    if (rs.finish < 0 && rs.runner.finished()) rs.finish = queue_.now();
  }

  void complete(int rank, std::int64_t step) {
    ranks_state_[rank].runner.complete(step);
    if (opts_.trace) opts_.trace->step_done(rank, step, queue_.now());
    progress(rank);
  }

  // Returns true when the step completed at once.
  bool issue(int rank, std::int64_t id, const Step& s) {
    if (opts_.trace) opts_.trace->step_issued(rank, id, s, queue_.now());
    switch (s.kind) {
      case StepKind::kSend:
        if (overhead_ > 0) return defer_send(rank, s.peer, Posted{id, s.src.count});
        return send(rank, s.peer, Posted{id, s.src.count}) && done_now(rank, id);
      case StepKind::kRecv:
      case StepKind::kRecvReduce:
        return recv(s.peer, rank,
                    Posted{id, s.dst.count, kNoTransfer, s.kind == StepKind::kRecvReduce});
      case StepKind::kReduce:
        return ends_now(rank, id, reduce_end(rank, s.dst.count, queue_.now()));
      default:  // kCopy, kFence
        return done_now(rank, id);
    }
  }

  // For a step being issued (the runner completes those that return true).
  bool done_now(int rank, std::int64_t id) {
    if (opts_.trace) opts_.trace->step_done(rank, id, queue_.now());
    return true;
  }
  // Returns true (traced) when `end` is now, else schedules the step's end.
  bool ends_now(int rank, std::int64_t id, Time end) {
    if (end <= queue_.now()) return done_now(rank, id);
    push_step_done(rank, id, end);
    return false;
  }
  // Completes the step at `end`: now, or by an event then.
  void end_at(int rank, std::int64_t id, Time end) {
    if (end <= queue_.now()) return complete(rank, id);
    push_step_done(rank, id, end);
  }
  void push_step_done(int rank, std::int64_t id, Time end) {
    queue_.push(end, SimEvent{EventKind::kStepDone, static_cast<std::uint32_t>(rank),
                              static_cast<std::uint64_t>(id)});
  }

  // When a reduction of `count` elements started at `from` ends (at once
  // where the rank's endpoint reduces for free).
  Time reduce_end(int rank, std::uint64_t count, Time from) const {
    const double rate = ranks_state_[rank].reduce_bps;
    if (rate <= 0) return from;
    return from + seconds_to_time(static_cast<double>(count * opts_.elem_bytes) / rate);
  }
  // Reserves the rank's host for one message's overhead (the message to or
  // from `peer`), from now or when it is done with the messages before;
  // returns when that ends.
  Time take_host(int rank, int peer, bool sending) {
    RankState& rs = ranks_state_[rank];
    Time start = std::max(rs.host_free, queue_.now());
    if (!cpus_.empty()) start = take_cpu(start);
    rs.host_free = start + overhead_;
    host_busy_[rank] += overhead_;
    if (opts_.trace) opts_.trace->host_busy(rank, peer, sending, start, rs.host_free);
    return rs.host_free;
  }
  // A shared CPU for a message end the host could start at `ready`: of those
  // free by then, the one freed last (so that one freed earlier stays for a
  // rank that is ready earlier), else the first to come free. Returns when
  // the message end starts.
  Time take_cpu(Time ready) {
    auto it = std::upper_bound(cpus_.begin(), cpus_.end(), ready);
    if (it != cpus_.begin()) --it;
    const Time start = std::max(ready, *it);
    *it = start + overhead_;  // later than it was: move it up to stay sorted
    for (auto next = it + 1; next != cpus_.end() && *next < *it; ++it, ++next)
      std::iter_swap(it, next);
    return start;
  }
  // When a receive from `src` whose data is in ends: after the receiver's
  // host overhead and then its reduction, if any.
  Time recv_end(int src, int dst, const Posted& r) {
    const Time in = overhead_ > 0 ? take_host(dst, src, false) : queue_.now();
    return r.reduce ? reduce_end(dst, r.count, in) : in;
  }

  // A send pays the sender's host overhead before it is posted.
  bool defer_send(int src, int dst, const Posted& p) {
    std::uint32_t slot;
    if (deferred_free_.empty()) {
      slot = static_cast<std::uint32_t>(deferred_.size());
      deferred_.push_back({dst, p});
    } else {
      slot = deferred_free_.back();
      deferred_free_.pop_back();
      deferred_[slot] = {dst, p};
    }
    queue_.push(take_host(src, dst, true),
                SimEvent{EventKind::kSendReady, static_cast<std::uint32_t>(src),
                         static_cast<std::uint64_t>(slot)});
    return false;
  }
  void send_ready(int src, std::uint32_t slot) {
    const DeferredSend d = deferred_[slot];
    deferred_free_.push_back(slot);
    if (send(src, d.dst, d.post)) complete(src, d.post.step);
  }

  // The queue of the pair src -> dst, kept with the receiver.
  PairQueue& pair(int src, int dst) {
    std::vector<PairQueue>& from = ranks_state_[dst].from;
    for (PairQueue& q : from)
      if (q.src_rank == src) return q;
    PairQueue& q = from.emplace_back();
    q.src_rank = src;
    q.route = &router_.route(topo_.endpoint(src), topo_.endpoint(dst));
    q.num_links = static_cast<std::uint32_t>(q.route->links.size());
    q.latency = q.route->latency;
    if (q.num_links <= PairQueue::kNearLinks)
      std::copy(q.route->links.begin(), q.route->links.end(), q.links);
    return q;
  }

  // Returns true when the send completed at once: an eager one.
  bool send(int src, int dst, Posted p) {
    PairQueue& q = pair(src, dst);
    const bool eager = eager_bytes_ > 0 && p.count * opts_.elem_bytes <= eager_bytes_;
    if (!q.empty() && !q.holds_sends) {
      start_transfer(Transfer{src, dst, p, q.pop(), eager}, q);
    } else {
      if (eager) p.eager_tag = start_transfer(Transfer{src, dst, p, {}, true, false}, q);
      q.holds_sends = true;
      q.push(p);
    }
    return eager;
  }

  // Returns true when the receive completed at once: its eager message had
  // landed, and no overhead or reduction is left to pay for.
  bool recv(int src, int dst, const Posted& p) {
    PairQueue& q = pair(src, dst);
    if (q.empty() || !q.holds_sends) {
      q.holds_sends = false;
      q.push(p);
      return false;
    }
    const Posted send = q.pop();
    check_counts(src, dst, send, p);
    if (send.eager_tag == kNoTransfer) {
      start_transfer(Transfer{src, dst, send, p}, q);
      return false;
    }
    Transfer& t = transfers_[send.eager_tag];
    if (!t.landed) {
      t.recv = p, t.matched = true;
      return false;
    }
    free_.push_back(send.eager_tag);
    return ends_now(dst, p.step, recv_end(src, dst, p));
  }

  void check_counts(int src, int dst, const Posted& send, const Posted& recv) const {
    CCLAB_CHECK(send.count == recv.count,
                fmt::format("rank {} sends {} elements but rank {} receives {}", src, send.count,
                            dst, recv.count));
  }

  std::uint32_t start_transfer(const Transfer& t, PairQueue& q) {
    if (t.matched) check_counts(t.src, t.dst, t.send, t.recv);
    std::uint32_t tag;
    if (free_.empty()) {
      CCLAB_CHECK(transfers_.size() < kNoTransfer, "simulation: too many transfers in flight");
      tag = static_cast<std::uint32_t>(transfers_.size());
      transfers_.push_back(t);
    } else {
      tag = free_.back();
      free_.pop_back();
      transfers_[tag] = t;
    }
    if (q.wire_busy) {
      transfers_[tag].ready = queue_.now();
      (q.wire_head == kNoTransfer ? q.wire_head : transfers_[q.wire_tail].wire_next) = tag;
      q.wire_tail = tag;
    } else {
      q.wire_busy = pair_fifo_;
      put_on_wire(tag, q, queue_.now());
    }
    return tag;
  }

  // Starts transfer `tag`'s flow now; it was ready at `ready` (earlier when
  // it waited behind the pair's previous message): its latency runs from
  // then, its bytes from now.
  void put_on_wire(std::uint32_t tag, const PairQueue& q, Time ready) {
    static_assert(PairQueue::kNearLinks <= Network::kInlineLinks);  // the flow copies them
    const std::uint64_t bytes = transfers_[tag].send.count * opts_.elem_bytes;
    Time latency = q.latency;
    double wire_bytes = static_cast<double>(bytes);
    if (!corrections_.empty()) {  // off by default: the pure network model
      latency = static_cast<Time>(
          std::llround(static_cast<double>(latency) * corrections_.latency_factor(bytes)));
      wire_bytes /= corrections_.bandwidth_factor(bytes);
    }
    latency = std::max<Time>(0, ready + latency - queue_.now());
    if (opts_.trace)
      opts_.trace->flow_started(transfers_[tag].src, transfers_[tag].dst, q.route_links(),
                                queue_.now());
    network_.start(q.route_links(), latency, wire_bytes, tag);
  }

  // The pair's next waiting message goes on the wire.
  void next_on_wire(int src, int dst) {
    PairQueue& q = pair(src, dst);
    const std::uint32_t tag = q.wire_head;
    if (tag == kNoTransfer) {
      q.wire_busy = false;
      return;
    }
    Transfer& t = transfers_[tag];
    q.wire_head = std::exchange(t.wire_next, kNoTransfer);
    if (q.wire_head == kNoTransfer) q.wire_tail = kNoTransfer;
    put_on_wire(tag, q, t.ready);
  }

  void transfer_done(std::uint64_t tag) {
    Transfer& landed = transfers_[tag];
    if (pair_fifo_) next_on_wire(landed.src, landed.dst);
    if (!landed.matched) {  // eager, its receive not yet posted: it will find the data
      landed.landed = true;
      return;
    }
    const Transfer t = landed;
    free_.push_back(static_cast<std::uint32_t>(tag));
    if (!t.eager) complete(t.src, t.send.step);
    end_at(t.dst, t.recv.step, recv_end(t.src, t.dst, t.recv));
  }

  std::string stuck_message(int rank) const {
    const StepRunner& runner = ranks_state_[rank].runner;
    const auto next = runner.next_unissued();
    return fmt::format(
        "simulation deadlocked: rank {} never finished (oldest unfinished step {}, next "
        "unissued: {})",
        rank, runner.oldest_unfinished(),
        next ? fmt::format("step {}: {}", next->first, coll::describe(next->second)) : "none");
  }

  SimResult result() const;

  const Topology& topo_;
  const Corrections& corrections_ = topo_.corrections;
  SimOptions opts_;
  int ranks_;
  std::uint64_t eager_bytes_;  // 0: every transfer is a rendezvous
  Time overhead_;              // a message's host time at each end
  bool pair_fifo_;             // one pair's messages go one after another
  SimQueue queue_;
  Router router_;
  Network network_;
  std::vector<RankState> ranks_state_;
  std::vector<Transfer> transfers_;
  std::vector<std::uint32_t> free_;
  std::vector<Time> host_busy_;         // per rank, with an overhead
  std::vector<Time> cpus_;              // shared CPUs: when each is free, ascending
  std::vector<DeferredSend> deferred_;  // by slot
  std::vector<std::uint32_t> deferred_free_;
  std::uint64_t steps_ = 0;
};

SimResult Simulation::result() const {
  SimResult r;
  r.rank_finish.reserve(ranks_state_.size());
  for (const RankState& rs : ranks_state_) {
    r.rank_finish.push_back(rs.finish);
    r.total = std::max(r.total, rs.finish);
  }
  r.link_bytes = network_.link_bytes();
  r.events = queue_.popped();
  r.flows = network_.flows_started();
  r.steps = steps_;
  if (r.total <= 0) return r;
  for (std::size_t rank = 0; rank < host_busy_.size(); ++rank) {
    const double u = static_cast<double>(host_busy_[rank]) / static_cast<double>(r.total);
    if (u > r.host_utilisation) {
      r.host_utilisation = u;
      r.busiest_host = static_cast<int>(rank);
    }
  }
  for (std::size_t l = 0; l < r.link_bytes.size(); ++l) {
    const double u =
        r.link_bytes[l] / (topo_.link(static_cast<LinkId>(l)).bw_bps * time_to_seconds(r.total));
    if (u > r.bottleneck_utilisation) {
      r.bottleneck_utilisation = u;
      r.bottleneck = static_cast<LinkId>(l);
    }
  }
  return r;
}

}  // namespace

SimResult simulate(const Topology& topology, const coll::Schedule& schedule,
                   const SimOptions& options) {
  if (static_cast<std::size_t>(schedule.ranks()) > topology.num_endpoints())
    throw InvalidArgument(fmt::format("--ranks: {} ranks but topology '{}' has {} endpoints",
                                      schedule.ranks(), topology.description,
                                      topology.num_endpoints()));
  return Simulation(topology, schedule, options).run();
}

}  // namespace cclab::sim
