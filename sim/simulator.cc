// The schedule runner: one event loop, a StepRunner per rank, FIFO matching
// per ordered pair, transfers as flows (see simulator.h).
//
// Matching: the k-th send from a to b meets the k-th receive b posts from a.
// Whichever side is issued first waits in the pair's queue; when the other
// side is issued the transfer starts at that moment (rendezvous).
#include "cclab/sim/simulator.h"

#include <memory>
#include <unordered_map>

#include <fmt/format.h>

#include "cclab/collectives/error.h"
#include "cclab/collectives/step_runner.h"
#include "cclab/sim/network.h"
#include "cclab/sim/trace.h"

namespace cclab::sim {
namespace {

using coll::Step;
using coll::StepKind;
using coll::detail::StepRunner;

struct Posted {
  std::int64_t step = 0;
  std::uint64_t count = 0;  // elements
  bool reduce = false;      // receives only: kRecvReduce
};

// A FIFO that reuses its storage once drained (a deque per pair costs far more).
struct PostedQueue {
  std::vector<Posted> items;
  std::size_t head = 0;
  bool empty() const { return head == items.size(); }
  void push(const Posted& p) { items.push_back(p); }
  Posted pop() {
    Posted p = items[head++];
    if (empty()) items.clear(), head = 0;
    return p;
  }
};

struct PairQueues {
  PostedQueue sends, recvs;
};

struct Transfer {
  int src = 0, dst = 0;
  Posted send, recv;
};

class Simulation {
 public:
  Simulation(const Topology& topo, const coll::Schedule& sched, const SimOptions& opts)
      : topo_(topo), opts_(opts), ranks_(sched.ranks()), router_(topo), network_(topo, queue_) {
    runners_.reserve(ranks_);
    for (int r = 0; r < ranks_; ++r)
      runners_.push_back(std::make_unique<StepRunner>(sched.program(r)));
    finish_.assign(ranks_, -1);
    network_.set_trace(opts.trace);
  }

  SimResult run() {
    for (int r = 0; r < ranks_; ++r) progress(r);
    while (!queue_.empty()) dispatch(queue_.pop());
    for (int r = 0; r < ranks_; ++r)
      if (finish_[r] < 0) throw InternalError(stuck_message(r));
    return result();
  }

 private:
  void dispatch(const SimQueue::Event& e) {
    if (e.payload.kind == EventKind::kStepDone) {
      complete(static_cast<int>(e.payload.a), static_cast<std::int64_t>(e.payload.b));
      return;
    }
    if (auto tag = network_.handle(e.payload)) transfer_done(*tag);
  }

  void progress(int rank) {
    steps_ += runners_[rank]->issue_ready(
        [&](std::int64_t id, const Step& s) { return issue(rank, id, s); });
    if (finish_[rank] < 0 && runners_[rank]->finished()) finish_[rank] = queue_.now();
  }

  void complete(int rank, std::int64_t step) {
    runners_[rank]->complete(step);
    if (opts_.trace) opts_.trace->step_done(rank, step, queue_.now());
    progress(rank);
  }

  // Returns true when the step completed at once.
  bool issue(int rank, std::int64_t id, const Step& s) {
    if (opts_.trace) opts_.trace->step_issued(rank, id, s, queue_.now());
    switch (s.kind) {
      case StepKind::kSend:
        post(rank, s.peer, Posted{id, s.src.count, false}, true);
        return false;
      case StepKind::kRecv:
      case StepKind::kRecvReduce:
        post(s.peer, rank, Posted{id, s.dst.count, s.kind == StepKind::kRecvReduce}, false);
        return false;
      case StepKind::kReduce:
        return !delay_reduce(rank, id, s.dst.count);
      default:  // kCopy, kFence
        if (opts_.trace) opts_.trace->step_done(rank, id, queue_.now());
        return true;
    }
  }

  // Schedules the end of a reduction when the rank's endpoint has a cost.
  bool delay_reduce(int rank, std::int64_t id, std::uint64_t count) {
    const double rate = topo_.node(topo_.endpoint(rank)).reduce_bps;
    if (rate <= 0) {
      if (opts_.trace) opts_.trace->step_done(rank, id, queue_.now());
      return false;
    }
    const double bytes = static_cast<double>(count * opts_.elem_bytes);
    queue_.push(queue_.now() + seconds_to_time(bytes / rate),
                SimEvent{EventKind::kStepDone, static_cast<std::uint32_t>(rank),
                         static_cast<std::uint64_t>(id)});
    return true;
  }

  void post(int src, int dst, const Posted& p, bool is_send) {
    PairQueues& q = pairs_[static_cast<std::uint64_t>(src) * ranks_ + dst];
    PostedQueue& mine = is_send ? q.sends : q.recvs;
    PostedQueue& theirs = is_send ? q.recvs : q.sends;
    if (theirs.empty()) return mine.push(p);
    const Posted other = theirs.pop();
    start_transfer(Transfer{src, dst, is_send ? p : other, is_send ? other : p});
  }

  void start_transfer(const Transfer& t) {
    CCLAB_CHECK(t.send.count == t.recv.count,
                fmt::format("rank {} sends {} elements but rank {} receives {}", t.src,
                            t.send.count, t.dst, t.recv.count));
    std::uint64_t tag;
    if (free_.empty()) {
      tag = transfers_.size();
      transfers_.push_back(t);
    } else {
      tag = free_.back();
      free_.pop_back();
      transfers_[tag] = t;
    }
    const Route& route = router_.route(topo_.endpoint(t.src), topo_.endpoint(t.dst));
    network_.start(route, static_cast<double>(t.send.count * opts_.elem_bytes), tag);
  }

  void transfer_done(std::uint64_t tag) {
    const Transfer t = transfers_[tag];
    free_.push_back(tag);
    complete(t.src, t.send.step);
    if (!t.recv.reduce || !delay_reduce(t.dst, t.recv.step, t.recv.count))
      complete(t.dst, t.recv.step);
  }

  std::string stuck_message(int rank) const {
    const auto next = runners_[rank]->next_unissued();
    return fmt::format(
        "simulation deadlocked: rank {} never finished (oldest unfinished step {}, next "
        "unissued: {})",
        rank, runners_[rank]->oldest_unfinished(),
        next ? fmt::format("step {}: {}", next->first, coll::describe(next->second)) : "none");
  }

  SimResult result() const;

  const Topology& topo_;
  SimOptions opts_;
  int ranks_;
  SimQueue queue_;
  Router router_;
  Network network_;
  std::vector<std::unique_ptr<StepRunner>> runners_;
  std::vector<Time> finish_;
  std::unordered_map<std::uint64_t, PairQueues> pairs_;
  std::vector<Transfer> transfers_;
  std::vector<std::uint64_t> free_;
  std::uint64_t steps_ = 0;
};

SimResult Simulation::result() const {
  SimResult r;
  r.rank_finish = finish_;
  for (Time t : finish_) r.total = std::max(r.total, t);
  r.link_bytes = network_.link_bytes();
  r.events = queue_.popped();
  r.flows = network_.flows_started();
  r.steps = steps_;
  if (r.total <= 0) return r;
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
