// Max-min fair sharing by progressive filling (see network.h).
//
// Within the region being refilled, let c_l be link l's residual capacity
// and n_l the number of its flows not yet frozen. The next link to saturate
// is the one with the smallest fair share c_l / n_l; its unfrozen flows get
// exactly that rate and freeze, and the share is subtracted from every link
// they cross. Each round freezes at least one flow, so a region of F flows
// and L links takes at most min(F, L) rounds. The shares sit in a dense
// array in the region's link order (ties go to the earlier link), kept up
// to date as flows freeze (each link knows its place), with the minimum of
// each block of kShareBlock beside them: a round refreshes the blocks whose
// shares changed, passes over the block minima, then over one block
// (contiguous doubles, not a gather from 64-byte link states). Links whose
// flows have all frozen hold infinity until they are half the array, which
// is then compacted in order.
#include "cclab/sim/network.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "cclab/collectives/error.h"
#include "cclab/sim/trace.h"

namespace cclab::sim {

FlowList::FlowList(FlowList&& other) noexcept : size_(other.size_), cap_(other.cap_) {
  if (cap_ > kInline)
    heap_ = std::exchange(other.heap_, nullptr);
  else
    std::copy(other.inline_, other.inline_ + kInline, inline_);
  other.size_ = 0;
  other.cap_ = kInline;
}

void FlowList::push(FlowId id) {
  if (size_ == cap_) {
    const std::uint32_t cap = cap_ * 2;
    FlowId* grown = new FlowId[cap];
    std::copy(data(), data() + size_, grown);
    if (cap_ > kInline) delete[] heap_;
    heap_ = grown;
    cap_ = cap;
  }
  data()[size_++] = id;
}

void FlowList::erase(FlowId id) {
  FlowId* d = data();
  FlowId* it = std::find(d, d + size_, id);
  CCLAB_CHECK(it != d + size_, "flow not on its link");
  *it = d[--size_];
}

Network::Network(const Topology& topology, SimQueue& queue)
    : topo_(topology), queue_(queue), links_(topology.num_links()) {
  for (std::size_t l = 0; l < links_.size(); ++l)
    links_[l].bw_bps = topology.link(static_cast<LinkId>(l)).bw_bps;
}

std::vector<double> Network::link_bytes() const {
  std::vector<double> out;
  out.reserve(links_.size());
  for (const LinkState& l : links_) out.push_back(l.bytes);
  return out;
}

FlowId Network::start(const Route& route, double bytes, std::uint64_t tag) {
  return start(route.links, route.latency, bytes, tag);
}

FlowId Network::start(std::span<const LinkId> links, Time latency, double bytes,
                      std::uint64_t tag) {
  FlowId id;
  if (free_.empty()) {
    id = static_cast<FlowId>(flows_.size());
    flows_.emplace_back();
  } else {
    id = free_.back();
    free_.pop_back();
  }
  Flow& f = flows_[id];
  CCLAB_CHECK(links.size() <= 0xffff, "route too long");
  f.num_links = static_cast<std::uint16_t>(links.size());
  if (f.num_links <= kInlineLinks)
    std::copy(links.begin(), links.end(), f.near);
  else
    f.far = links.data();
  f.bytes = f.remaining = bytes;
  f.rate = 0;
  f.updated = queue_.now();
  f.tag = tag;
  f.active = false;
  f.live = true;
  ++f.version;
  ++started_;
  // No latency left (a pair's next message put on the wire as the last one
  // lands, whose latency ran while it waited): it joins now, before the
  // kReshare that the landing queued, so that the instant is refilled once.
  // Queued behind it, it would have taken a second refill of the component.
  if (latency > 0)
    queue_.push(queue_.now() + latency, SimEvent{EventKind::kFlowActive, id, f.version});
  else
    activate(id);
  return id;
}

std::optional<std::uint64_t> Network::handle(const SimEvent& event) {
  if (event.kind == EventKind::kReshare) {
    reshare_deferred();
    return std::nullopt;
  }
  const Flow& f = flows_[event.a];
  if (!f.live || f.version != event.b) return std::nullopt;  // stale
  if (event.kind == EventKind::kFlowActive) {
    activate(event.a);
    return std::nullopt;
  }
  return finish(event.a);
}

void Network::activate(FlowId id) {
  Flow& f = flows_[id];
  f.updated = queue_.now();
  if (f.remaining <= 0 || f.num_links == 0) {
    // Nothing to send (or nowhere to send it): done once the latency is paid.
    queue_.push(queue_.now(), SimEvent{EventKind::kFlowDone, id, f.version});
    return;
  }
  f.active = true;
  ++active_;
  double alone_rate = std::numeric_limits<double>::infinity();
  for (LinkId l : f.links()) {
    links_[l].flows.push(id);
    alone_rate = links_[l].flows.size() == 1 ? std::min(alone_rate, links_[l].bw_bps) : -1;
  }
  if (alone_rate <= 0) {
    // Sharing its links: no link of its can fill below its capacity over its
    // flows, nor could one before, so the rates below the least such level
    // stand (network.h); f is above every level until refilled.
    double fill = std::numeric_limits<double>::infinity();
    for (LinkId l : f.links())
      fill = std::min(fill, links_[l].bw_bps / static_cast<double>(links_[l].flows.size()));
    kept_below_ = std::min(kept_below_, fill * kBelowTies);
    f.rate = kArriving;
    return defer_reshare(id);
  }
  // Alone on its links (the common case in large runs): its rate is theirs
  // now, while its state is in cache; a flow joining it at this instant
  // defers a reshare of both.
  f.rate = alone_rate;
  schedule_done(id);
  if (trace_) trace_links(f.links());
}

std::uint64_t Network::finish(FlowId id) {
  Flow& f = flows_[id];
  const bool was_active = f.active;
  for (LinkId l : f.links()) {
    LinkState& link = links_[l];
    link.bytes += f.bytes;
    if (!f.active) continue;
    link.flows.erase(id);
    for (FlowId other : link.flows) defer_reshare(other);
  }
  if (f.active) {
    --active_;
    // The rates below f's stand (network.h).
    kept_below_ = std::min(kept_below_, f.rate * kBelowTies);
  }
  f.active = f.live = false;
  f.rate = 0;
  free_.push_back(id);
  if (trace_ && was_active) trace_links(f.links());
  return f.tag;
}

void Network::defer_reshare(FlowId seed) {
  deferred_.push_back(seed);
  if (reshare_queued_) return;
  reshare_queued_ = true;
  queue_.push(queue_.now(), SimEvent{EventKind::kReshare, 0, 0});
}

void Network::reshare_deferred() {
  reshare_queued_ = false;
  ++refills_;
  seeds_.swap(deferred_);
  deferred_.clear();
  // Stamps only grow; an instant takes at most kStampsPerInstant. Before
  // they could wrap, every stamp starts again from 0.
  if (stamp_ > std::numeric_limits<std::uint32_t>::max() - kStampsPerInstant) {
    for (Flow& f : flows_) f.stamp = 0;
    for (LinkState& l : links_) l.stamp = 0;
    stamp_ = 0;
  }
  refill_locally(std::exchange(kept_below_, kNoShare));
}

void Network::refill_locally(double kept_below) {
  if (prev_rate_.size() < flows_.size()) {
    prev_rate_.resize(flows_.size());
    freeze_link_.resize(flows_.size());
  }
  region_ = ++stamp_;
  comp_flows_.clear();
  // A seed may have finished since it was deferred (or its id been reused by
  // a flow not yet active).
  for (FlowId s : seeds_)
    if (flows_[s].active && flows_[s].stamp != region_ && flows_[s].rate >= kept_below)
      join_region(s);
  if (comp_flows_.empty()) return;
  for (int round = 1;; ++round) {
    fill_region();
    if (!grow_region()) break;
    grown_ += round == 1;
    if (round == kLocalRounds) {
      // Still growing: take every flow at or above the kept level that the
      // region reaches, which needs no check (see network.h).
      ++widened_;
      join_reach(kept_below);
      fill_region();
      break;
    }
  }
  for (FlowId id : comp_flows_) {
    Flow& f = flows_[id];
    if (f.rate == prev_rate_[id]) continue;
    if (std::abs(f.rate - prev_rate_[id]) <= kIsTies * prev_rate_[id]) {
      f.rate = prev_rate_[id];
      continue;
    }
    schedule_done(id);
  }
  if (trace_) trace_links(comp_links_);
}

void Network::join_region(FlowId id) {
  Flow& f = flows_[id];
  f.stamp = region_;
  // Settle the bytes sent at the old rate since the last change.
  const Time now = queue_.now();
  f.remaining = std::max(0.0, f.remaining - f.rate * time_to_seconds(now - f.updated));
  f.updated = now;
  prev_rate_[id] = f.rate;
  comp_flows_.push_back(id);
}

void Network::join_reach(double kept_below) {
  const std::uint32_t seen = ++stamp_;
  for (std::size_t i = 0; i < comp_flows_.size(); ++i)
    for (LinkId l : flows_[comp_flows_[i]].links()) {
      LinkState& link = links_[l];
      if (link.stamp == seen) continue;
      link.stamp = seen;
      for (FlowId other : link.flows)
        if (flows_[other].stamp != region_ && flows_[other].rate >= kept_below) join_region(other);
    }
}

void Network::fill_region() {
  const std::uint32_t seen = ++stamp_;
  comp_links_.clear();
  for (FlowId id : comp_flows_)
    for (LinkId l : flows_[id].links()) {
      LinkState& link = links_[l];
      if (link.stamp == seen) continue;
      link.stamp = seen;
      comp_links_.push_back(l);
      // The flows outside the region take their rates off its capacity.
      link.residual = link.bw_bps;
      link.unfrozen = 0;
      for (FlowId other : link.flows) {
        if (flows_[other].stamp == region_)
          ++link.unfrozen;
        else
          link.residual = std::max(0.0, link.residual - flows_[other].rate);
      }
      link.outside = link.flows.size() - link.unfrozen;
    }
  fill_progressively();
}

bool Network::grow_region() {
  // Only where a region flow's rate changed, or where one froze, can a
  // bottleneck be lost or a region flow's be false; elsewhere every flow's
  // bottleneck stands as it was.
  const std::uint32_t seen = ++stamp_;
  const std::size_t before = comp_flows_.size();
  const auto check_once = [&](LinkId l) {
    if (links_[l].stamp == seen) return;
    links_[l].stamp = seen;
    check_link(l);
  };
  for (std::size_t i = 0; i < before; ++i) {
    const FlowId id = comp_flows_[i];
    check_once(freeze_link_[id]);
    if (flows_[id].rate == prev_rate_[id]) continue;
    for (LinkId l : flows_[id].links()) check_once(l);
  }
  return comp_flows_.size() > before;
}

void Network::check_link(LinkId l) {
  const LinkState& link = links_[l];
  // Every flow on it in the region when it was filled (and flows only join):
  // nothing to check.
  if (link.outside == 0) return;
  // The link as it was (but for the flows that left it at this instant:
  // theirs were its other flows, all seeds) and as it is after the refill.
  double old_sum = 0, old_max = 0, new_sum = 0, new_max = 0, level = -1, outside_max = -1;
  for (FlowId id : link.flows) {
    const Flow& g = flows_[id];
    const bool inside = g.stamp == region_;
    const double before = inside ? prev_rate_[id] : g.rate;
    if (before != kArriving) {
      old_sum += before;
      old_max = std::max(old_max, before);
    }
    new_sum += g.rate;
    new_max = std::max(new_max, g.rate);
    if (inside && freeze_link_[id] == l) level = std::max(level, g.rate);
    if (!inside) outside_max = std::max(outside_max, g.rate);
  }
  // Was: generously (more bottlenecks to keep); is: strictly (fewer kept).
  const bool was_full = old_sum >= link.bw_bps * (1 - kWasTies);
  const bool is_full = new_sum >= link.bw_bps * (1 - kIsTies);
  const double fastest_was = old_max * (1 - kWasTies), fastest_is = new_max * (1 - kIsTies);
  // A region flow froze here at `level`: nothing on the link may be faster.
  // A flow whose bottleneck this was (full, and it the fastest on it) needs
  // it full still and itself still the fastest.
  const auto above_level = [&](double rate) { return level >= 0 && rate > level * (1 + kIsTies); };
  const auto lost_bottleneck = [&](double rate) {
    return was_full && rate >= fastest_was && (!is_full || rate < fastest_is);
  };
  // Neither for the fastest flow outside: none fails (a link of many flows
  // is read once).
  if (!above_level(outside_max) &&
      !(was_full && outside_max >= fastest_was && (!is_full || fastest_was < fastest_is)))
    return;
  for (FlowId id : link.flows) {
    const Flow& h = flows_[id];
    if (h.stamp != region_ && (above_level(h.rate) || lost_bottleneck(h.rate))) join_region(id);
  }
}

void Network::fill_progressively() {
  if (comp_flows_.empty()) return;
  if (comp_flows_.size() == 1) {
    // A lone flow (the common case): the first round of the loop below gives
    // it the least room on its links (bandwidth less the kept flows' rates)
    // over 1, and ends.
    double share = std::numeric_limits<double>::infinity();
    for (LinkId l : comp_links_) share = std::min(share, links_[l].residual);
    CCLAB_CHECK(share < std::numeric_limits<double>::infinity(),
                "progressive filling found no link to saturate");
    flows_[comp_flows_[0]].rate = share;
    for (LinkId l : comp_links_)
      if (links_[l].residual == share) freeze_link_[comp_flows_[0]] = l;
    return;
  }
  for (FlowId id : comp_flows_) flows_[id].rate = -1;  // -1: not frozen yet
  const std::size_t refill = comp_flows_.size();
  shares_.clear();
  share_links_.clear();
  for (LinkId l : comp_links_) {
    LinkState& link = links_[l];
    if (link.unfrozen == 0) continue;
    link.pos = static_cast<std::uint32_t>(shares_.size());
    shares_.push_back(link.residual / link.unfrozen);
    share_links_.push_back(l);
  }
  std::size_t live = shares_.size();  // links with unfrozen flows
  rebuild_blocks();
  for (std::size_t frozen = 0; frozen < refill;) {
    const std::uint32_t first = min_share_pos();
    const double share = shares_[first];
    CCLAB_CHECK(share < kNoShare, "progressive filling found no link to saturate");
    for (FlowId id : links_[share_links_[first]].flows) {
      Flow& f = flows_[id];
      if (f.rate >= 0) continue;
      f.rate = share;
      freeze_link_[id] = share_links_[first];
      ++frozen;
      for (LinkId l : f.links()) {
        LinkState& link = links_[l];
        link.residual = std::max(0.0, link.residual - share);
        const bool last = --link.unfrozen == 0;
        set_share(link.pos, last ? kNoShare : link.residual / link.unfrozen);
        live -= last;
      }
    }
    if (live * 2 < share_links_.size()) compact_shares();
  }
}

namespace {

// The smallest of n doubles (n a multiple of 4, none NaN or -0): four running
// minima keep several compares in flight.
double min_of(const double* v, std::size_t n) {
  double m[4] = {v[0], v[1], v[2], v[3]};
  for (std::size_t i = 4; i < n; i += 4)
    for (std::size_t k = 0; k < 4; ++k) m[k] = v[i + k] < m[k] ? v[i + k] : m[k];
  return std::min(std::min(m[0], m[1]), std::min(m[2], m[3]));
}

}  // namespace

double Network::block_min(std::size_t b) const {
  const std::size_t first = b * kShareBlock;
  return min_of(&shares_[first], std::min<std::size_t>(kShareBlock, shares_.size() - first));
}

std::uint32_t Network::min_share_pos() {
  if (block_min_.empty()) {  // one block: a pass over the shares
    const double share = min_of(shares_.data(), shares_.size());
    std::size_t pos = 0;
    while (shares_[pos] != share) ++pos;
    return static_cast<std::uint32_t>(pos);
  }
  for (std::uint32_t b : dirty_blocks_) {
    block_min_[b] = block_min(b);
    block_dirty_[b] = 0;
  }
  dirty_blocks_.clear();
  // The earliest block holding the minimum, then its earliest place holding it.
  const double share = min_of(block_min_.data(), block_min_.size());
  std::size_t b = 0;
  while (block_min_[b] != share) ++b;
  std::size_t pos = b * kShareBlock;
  while (shares_[pos] != share) ++pos;
  return static_cast<std::uint32_t>(pos);
}

void Network::rebuild_blocks() {
  // The shares padded with kNoShare to a multiple of 4 (the last block may be
  // short: a small component pays for its own links only), the block minima
  // likewise; none for a single block, which min_share_pos() scans whole.
  shares_.resize(std::max<std::size_t>(4, (share_links_.size() + 3) / 4 * 4), kNoShare);
  const std::size_t blocks = (shares_.size() + kShareBlock - 1) / kShareBlock;
  block_min_.assign(blocks == 1 ? 0 : (blocks + 3) / 4 * 4, kNoShare);
  if (!block_min_.empty())
    for (std::size_t b = 0; b < blocks; ++b) block_min_[b] = block_min(b);
  block_dirty_.assign(block_min_.size(), 0);
  dirty_blocks_.clear();
}

void Network::compact_shares() {
  std::size_t kept = 0;
  for (std::size_t i = 0; i < share_links_.size(); ++i) {
    if (shares_[i] == kNoShare) continue;
    shares_[kept] = shares_[i];
    share_links_[kept] = share_links_[i];
    links_[share_links_[kept]].pos = static_cast<std::uint32_t>(kept);
    ++kept;
  }
  shares_.resize(kept);
  share_links_.resize(kept);
  rebuild_blocks();
}

void Network::trace_links(std::span<const LinkId> links) const {
  for (LinkId l : links) {
    double sum = 0;
    for (FlowId id : links_[l].flows)  // an arrival's rate comes with its refill
      if (flows_[id].rate != kArriving) sum += flows_[id].rate;
    trace_->link_rate(l, sum, queue_.now());
  }
}

void Network::schedule_done(FlowId id) {
  Flow& f = flows_[id];
  ++f.version;
  queue_.push(queue_.now() + seconds_to_time(f.remaining / f.rate),
              SimEvent{EventKind::kFlowDone, id, f.version});
}

}  // namespace cclab::sim
