// The flow-level network model.
//
// A message is a flow along its route. It first pays the route's latency
// (the sum of its links' latencies) once, then becomes active and shares
// bandwidth with every other active flow: rates are max-min fair, computed by
// progressive filling (raise all rates together; when a link saturates, the
// flows crossing it freeze at their current rate; repeat with the rest). A
// flow of S bytes alone on a path therefore takes latency + S / min(bw).
//
// Rates change only when a flow activates or finishes. The rates are
// recomputed once per instant, after every flow that activates or finishes
// then (a kReshare event queued behind them): an all-to-all's n(n-1) flows
// start at one instant, and recomputing at each of them cost n^4. Each
// affected flow's remaining bytes are settled at the old rate before its new
// completion time is scheduled; stale completion events are recognised by a
// per-flow version number and ignored. A flow that activates alone on its
// links takes their bandwidth at once (a later flow joining it at that
// instant defers a refill of both). A flow with no latency activates as it
// starts, inside the instant that starts it.
//
// A refill is local (refill_locally). It starts from the seeds, the flows
// that arrived and those that shared a link with one that left, and refills
// only a region of flows, every other flow keeping its rate (the region's
// links offer their capacity less the others' rates). Then it checks the
// max-min conditions (every flow has a full link on which none is faster)
// where they could have broken: on the links where a region flow's rate
// changed or where one froze, a flow outside that is faster than a region
// flow frozen there, or whose bottleneck the link was and is no longer (not
// full, or a region flow now faster), joins the region, and the region is
// refilled. After kLocalRounds rounds of growth it takes, at once, every flow
// at or above the kept level that it reaches. The kept level: no rate below
// the level at which progressive filling first runs differently can change:
// below the least rate r of a flow that left (no link it crossed saturated
// below r), and below the least c/n over the links of the flows that
// arrived, c a link's capacity and n its flows now (before, with fewer
// flows, it saturated at c/n or above, unless a flow left it, and now it
// cannot fill below c/n). Seeds below it are not refilled.
//
// Before 2026-12-08 every refill took the whole reach of the seeds above the
// kept level (what the growth falls back to): on a leaf-spine of 1,024 hosts
// and 16 spines a 16 MiB all-reduce refilled about 1,650 flows an instant to
// change 60 of them.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "cclab/sim/event_queue.h"
#include "cclab/sim/routing.h"
#include "cclab/sim/topology.h"

namespace cclab::sim {

enum class EventKind : std::uint8_t { kFlowActive, kFlowDone, kStepDone, kReshare, kSendReady };
// The events that name a flow (SimEvent::a).
inline bool names_flow(EventKind k) {
  return k == EventKind::kFlowActive || k == EventKind::kFlowDone;
}

// One event of a simulation; `a` and `b` are interpreted by kind (a flow id
// and its version; a rank and a step id).
struct SimEvent {
  EventKind kind = EventKind::kFlowDone;
  std::uint32_t a = 0;
  std::uint64_t b = 0;
};
using SimQueue = EventQueue<SimEvent>;

using FlowId = std::uint32_t;
class TraceWriter;

// The active flows on one link: up to four stored in place (a link usually
// carries one or two flows), more in a heap array. Order is not kept. 24 bytes,
// so that a link's whole state fits one cache line.
class FlowList {
 public:
  FlowList() = default;
  FlowList(const FlowList&) = delete;
  FlowList& operator=(const FlowList&) = delete;
  FlowList(FlowList&& other) noexcept;
  FlowList& operator=(FlowList&&) = delete;
  ~FlowList() {
    if (cap_ > kInline) delete[] heap_;
  }

  const FlowId* begin() const { return cap_ > kInline ? heap_ : inline_; }
  const FlowId* end() const { return begin() + size_; }
  std::uint32_t size() const { return size_; }
  void push(FlowId id);
  void erase(FlowId id);

 private:
  static constexpr std::uint32_t kInline = 4;
  FlowId* data() { return cap_ > kInline ? heap_ : inline_; }
  std::uint32_t size_ = 0;
  std::uint32_t cap_ = kInline;  // above kInline: heap_ holds the flows
  union {
    FlowId inline_[kInline] = {};
    FlowId* heap_;
  };
};

class Network {
 public:
  static constexpr std::uint32_t kInlineLinks = 16;  // route links a Flow holds in place

  Network(const Topology& topology, SimQueue& queue);

  // Starts a flow of `bytes` along `route` now; `tag` comes back from handle()
  // when it finishes. `route` must outlive the flow (Router's routes do). A
  // flow without latency is active at once (its rate comes with the refill at
  // the end of this instant).
  FlowId start(const Route& route, double bytes, std::uint64_t tag);
  // The same with the route's links and latency given apart; `links` must
  // outlive the flow when it has more than kInlineLinks links (a copy of a
  // shorter route may be temporary: the flow keeps its own).
  FlowId start(std::span<const LinkId> links, Time latency, double bytes, std::uint64_t tag);

  // Handles a kFlowActive, kFlowDone or kReshare event; returns the tag of the
  // flow that finished, if one did.
  std::optional<std::uint64_t> handle(const SimEvent& event);

  // Prefetch hints for an event that comes soon: first its flow, later (once
  // the flow is cached) the flow's links; returns the flow's tag.
  void prefetch_flow(const SimEvent& event) const {
    const Flow* f = &flows_[event.a];
    prefetch_line(f);
    prefetch_line(f->near);  // the second line
  }
  std::uint64_t tag(const SimEvent& event) const { return flows_[event.a].tag; }
  std::uint64_t prefetch_links(const SimEvent& event) const {
    const Flow& f = flows_[event.a];
    for (LinkId l : f.links()) prefetch_line(&links_[l]);
    return f.tag;
  }

  // Reports every change of a link's total rate to `trace` (may be null).
  void set_trace(TraceWriter* trace) { trace_ = trace; }

  // The current rate of a flow in bytes/s (0 until it is active; between
  // instants, when every rate is refilled).
  double rate(FlowId id) const { return flows_[id].rate; }
  std::size_t active_flows() const { return active_; }
  std::uint64_t flows_started() const { return started_; }
  // Instants at which rates were refilled (kReshare events handled).
  std::uint64_t refills() const { return refills_; }
  // Refills whose region grew (at least once), and those that took the
  // whole reach above the kept level after kLocalRounds rounds.
  std::uint64_t refills_grown() const { return grown_; }
  std::uint64_t refills_widened() const { return widened_; }
  // Bytes each link has carried (finished flows only).
  std::vector<double> link_bytes() const;

 private:
  // One flow in two cache lines: the first holds what every event touches,
  // the second a copy of the route's links (up to kInlineLinks; longer routes
  // point at the Router's copy), so a flow's links cost no pointer chase.
  struct alignas(64) Flow {
    double bytes = 0;
    double remaining = 0;
    double rate = 0;
    Time updated = 0;
    std::uint64_t version = 0;
    std::uint64_t tag = 0;
    std::uint32_t stamp = 0;  // == region_: in the region being refilled
    std::uint16_t num_links = 0;
    bool active = false;
    bool live = false;
    const LinkId* far = nullptr;  // the route's links when they do not fit inline
    LinkId near[kInlineLinks] = {};
    std::span<const LinkId> links() const {
      return {num_links <= kInlineLinks ? near : far, num_links};
    }
  };

  void activate(FlowId id);
  std::uint64_t finish(FlowId id);
  // Marks `seed` for the refill at the end of this instant.
  void defer_reshare(FlowId seed);
  // Refills the rates around the deferred seeds (refill_locally) and
  // reschedules the flows whose rate changed.
  void reshare_deferred();
  // The local refill (see the top of this file): the region starts from the
  // seeds at or above kept_below and grows until the max-min conditions hold.
  void refill_locally(double kept_below);
  // Adds a flow to the region (comp_flows_), its bytes settled and its rate
  // kept in prev_rate_.
  void join_region(FlowId id);
  // Adds every flow at or above kept_below that shares a link with the region,
  // transitively: the fallback, which needs no check.
  void join_reach(double kept_below);
  // Max-min rates for the region's flows on its links (comp_links_), each
  // offering its capacity less the rates of the flows outside the region.
  void fill_region();
  // Checks the max-min conditions where the refill changed something, adding
  // the flows that fail them; false when none did.
  bool grow_region();
  void check_link(LinkId l);
  // Progressive filling of comp_flows_ on comp_links_' residual capacities;
  // records the link at which each flow froze (freeze_link_).
  void fill_progressively();
  void schedule_done(FlowId id);
  void trace_links(std::span<const LinkId> links) const;

  const Topology& topo_;
  SimQueue& queue_;
  std::vector<Flow> flows_;
  std::vector<FlowId> free_;
  // Everything the model keeps per link, together, so that touching a link
  // costs one cache line (large runs are bound by memory latency).
  struct alignas(64) LinkState {
    double bw_bps = 0;
    double bytes = 0;           // carried by finished flows
    double residual = 0;        // progressive filling: capacity not yet shared
    std::int32_t unfrozen = 0;  // progressive filling: flows not yet frozen
    std::uint32_t stamp = 0;    // == stamp_: seen by the refill's current pass
    std::uint32_t pos = 0;      // progressive filling: its place in shares_
    std::uint32_t outside = 0;  // its flows outside the region when it was filled
    FlowList flows;             // active flows
  };
  static_assert(sizeof(LinkState) == 64 && sizeof(Flow) == 128);
  std::vector<LinkState> links_;
  std::size_t active_ = 0;
  std::uint64_t started_ = 0;
  std::uint64_t refills_ = 0;
  std::uint64_t grown_ = 0;
  std::uint64_t widened_ = 0;
  TraceWriter* trace_ = nullptr;

  // Scratch of the refill, reused: the region's flows and links; by flow id,
  // its rate before this instant's refill and the link at which it froze;
  // the region's stamp (a flow's stamp equals it while in the region).
  std::vector<FlowId> comp_flows_;
  std::vector<LinkId> comp_links_;
  std::uint32_t stamp_ = 0;
  std::vector<double> prev_rate_;
  std::vector<LinkId> freeze_link_;
  std::uint32_t region_ = 0;
  static constexpr int kLocalRounds = 8;
  // Stamps an instant takes: the region, two a round, the fallback's two.
  static constexpr std::uint32_t kStampsPerInstant = 2 * kLocalRounds + 4;
  // check_link's tolerances: a link counts as having been full within
  // kWasTies of its capacity, and as full now only within kIsTies; rates
  // are compared likewise. Rates computed at one level along different paths
  // differ in their last bits; the checks must not take that for a change.
  static constexpr double kWasTies = 1e-9, kIsTies = 1e-12;
  // At this instant so far: a millionth below the lowest rate of a flow that
  // left and the lowest c/n of an arrival's links (the kept level; rates
  // frozen at one level may differ in their last bits, so a flow that close
  // below may be tied with it, and is refilled: refilling more than needed
  // changes nothing, keeping a tied one would keep it too low).
  double kept_below_ = kNoShare;
  static constexpr double kBelowTies = 1 - 1e-6;  // a level times this: a millionth below
  // The rate of a flow that arrived, until its refill at the end of the
  // instant: above every kept_below, so it is refilled; settling it costs
  // nothing (its bytes start now).
  static constexpr double kArriving = std::numeric_limits<double>::max();
  // The seeds of this instant's refill, and whether the kReshare
  // event that handles them is queued.
  std::vector<FlowId> deferred_, seeds_;
  bool reshare_queued_ = false;
  // Progressive filling: per link of the component that had flows, in the
  // component's order, its residual / unfrozen (kNoShare once none is left,
  // and as padding to a multiple of 4), and the minimum of each block of
  // kShareBlock of them, refreshed for the blocks whose shares changed since
  // the last round: a round reads the block minima and one block, not every
  // share (a flow's links sit close together in the component's order, so
  // freezing it dirties few blocks).
  static constexpr double kNoShare = std::numeric_limits<double>::infinity();
  static constexpr std::uint32_t kShareBlock = 32;
  std::vector<double> shares_, block_min_;
  std::vector<std::uint8_t> block_dirty_;
  std::vector<std::uint32_t> dirty_blocks_;
  std::vector<LinkId> share_links_;
  void set_share(std::uint32_t pos, double share) {
    shares_[pos] = share;
    if (block_min_.empty()) return;
    const std::uint32_t block = pos / kShareBlock;
    if (block_dirty_[block]) return;
    block_dirty_[block] = 1;
    dirty_blocks_.push_back(block);
  }
  // The place of the smallest share, the earliest on a tie.
  std::uint32_t min_share_pos();
  double block_min(std::size_t block) const;
  void rebuild_blocks();
  void compact_shares();
};

}  // namespace cclab::sim
