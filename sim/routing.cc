// Route computation (see routing.h). A bidirectional search labels nodes with
// their hop distance from the source (forward side) or to the destination
// (backward side) until the sides meet; the nodes of shortest paths are then
// marked by position, and the route walks them from the source, each hop
// picked by hash among the equally short ones (ECMP). Every step that could
// scan a node's neighbours or a set of marked nodes scans the smaller.
#include "cclab/sim/routing.h"

#include <algorithm>

#include <fmt/format.h>

#include "cclab/collectives/algorithms.h"
#include "cclab/collectives/error.h"

namespace cclab::sim {
namespace {

// splitmix64: a cheap, well-mixed deterministic hash.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

Router::Router(const Topology& topology) : topo_(topology) {
  const std::size_t nodes = topology.num_nodes();
  for (std::size_t n = 0; n < nodes; ++n)
    transit_.push_back(topology.node(static_cast<NodeId>(n)).transit ? 1 : 0);
  const auto by_node = [](const Hop& a, const Hop& b) {
    return a.node != b.node ? a.node < b.node : a.index < b.index;
  };
  for (Adjacency* adj : {&out_, &in_}) {
    const bool out = adj == &out_;
    for (std::size_t n = 0; n < nodes; ++n) {
      const Node& node = topology.node(static_cast<NodeId>(n));
      adj->transit_start.push_back(static_cast<std::uint32_t>(adj->transit.size()));
      adj->leaf_start.push_back(static_cast<std::uint32_t>(adj->leaf.size()));
      const auto& links = out ? node.out : node.in;
      for (std::uint32_t i = 0; i < links.size(); ++i) {
        const Link& l = topology.link(links[i]);
        const Hop h{out ? l.to : l.from, out ? i : 0, links[i]};
        (transit_[h.node] ? adj->transit : adj->leaf).push_back(h);
      }
      std::sort(adj->transit.begin() + adj->transit_start.back(), adj->transit.end(), by_node);
      std::sort(adj->leaf.begin() + adj->leaf_start.back(), adj->leaf.end(), by_node);
    }
    adj->transit_start.push_back(static_cast<std::uint32_t>(adj->transit.size()));
    adj->leaf_start.push_back(static_cast<std::uint32_t>(adj->leaf.size()));
  }
  for (Side* s : {&fwd_, &back_}) {
    s->stamp.assign(nodes, 0);
    s->dist.assign(nodes, 0);
  }
  pos_stamp_.assign(nodes, 0);
  pos_.assign(nodes, 0);
}

const Route& Router::route(NodeId src, NodeId dst) {
  const std::uint64_t key = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(src)) << 32) |
                            static_cast<std::uint32_t>(dst);
  const auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  return cache_.emplace(key, compute(src, dst)).first->second;
}

void Router::hops_to(const Adjacency& adj, NodeId n, NodeId to, std::vector<Hop>& out) const {
  const bool t = transit_[to] != 0;
  const auto& list = t ? adj.transit : adj.leaf;
  const auto& start = t ? adj.transit_start : adj.leaf_start;
  auto it = std::lower_bound(list.begin() + start[n], list.begin() + start[n + 1], to,
                             [](const Hop& h, NodeId id) { return h.node < id; });
  for (; it != list.begin() + start[n + 1] && it->node == to; ++it) out.push_back(*it);
}

template <class Keep>
void Router::hops_from(const Adjacency& adj, NodeId n, NodeId end, Keep&& keep,
                       std::vector<Hop>& out) const {
  for (std::uint32_t i = adj.transit_start[n]; i < adj.transit_start[n + 1]; ++i)
    if (keep(adj.transit[i].node)) out.push_back(adj.transit[i]);
  if (!transit_[end] && keep(end)) hops_to(adj, n, end, out);
}

// A side's frontier: its last level. Growing it costs the transit degrees
// of the nodes a route may leave (its own start, or transit), plus a lookup.
std::int32_t Router::search(NodeId src, NodeId dst) {
  ++generation_;
  best_ = -1;
  for (auto [s, start] : {std::pair{&fwd_, src}, std::pair{&back_, dst}}) {
    s->queue.assign(1, start);
    s->level.assign({0, 1});
    s->stamp[start] = generation_;
    s->dist[start] = 0;
  }
  const auto cost = [&](const Side& s, const Adjacency& adj, NodeId start) {
    std::size_t c = 0;
    for (std::size_t i = s.level[s.level.size() - 2]; i < s.queue.size(); ++i)
      if (s.queue[i] == start || transit_[s.queue[i]]) c += adj.transit_degree(s.queue[i]) + 1;
    return c;
  };
  while (best_ < 0) {
    const std::size_t f = cost(fwd_, out_, src), b = cost(back_, in_, dst);
    if (f == 0 || b == 0) return -1;  // a side has nowhere left to go
    if (f <= b)
      grow(true, src, dst);
    else
      grow(false, dst, src);
  }
  return best_;
}

void Router::grow(bool forward, NodeId start, NodeId end) {
  Side& s = forward ? fwd_ : back_;
  const Side& other = forward ? back_ : fwd_;
  const Adjacency& adj = forward ? out_ : in_;
  const std::size_t first = s.level[s.level.size() - 2], last = s.queue.size();
  const std::int32_t d = static_cast<std::int32_t>(s.level.size()) - 1;  // the new level
  const auto unlabeled = [&](NodeId m) { return !labeled(s, m); };
  hops_.clear();
  for (std::size_t i = first; i < last; ++i) {
    const NodeId n = s.queue[i];
    if (n != start && !transit_[n]) continue;  // a route ends there
    hops_from(adj, n, end, unlabeled, hops_);
    for (const Hop& h : hops_) {
      if (labeled(s, h.node)) continue;  // reached twice within this level
      s.stamp[h.node] = generation_;
      s.dist[h.node] = d;
      s.queue.push_back(h.node);
      if (labeled(other, h.node) && (best_ < 0 || d + other.dist[h.node] < best_))
        best_ = d + other.dist[h.node];
    }
    hops_.clear();
  }
  s.level.push_back(s.queue.size());
}

void Router::set_position(NodeId n, std::int32_t pos) {
  pos_stamp_[n] = generation_;
  pos_[n] = pos;
  at_pos_[static_cast<std::size_t>(pos)].push_back(n);
}

// Both sides are complete up to their last levels, and those add up to at
// least `hops`: the forward side's last level (or `hops`, if nearer) holds a
// position whose nodes carry both labels, summing to hops.
void Router::mark_positions(NodeId src, NodeId dst, std::int32_t hops) {
  if (at_pos_.size() < static_cast<std::size_t>(hops) + 1) at_pos_.resize(hops + 1);
  for (std::int32_t p = 0; p <= hops; ++p) at_pos_[p].clear();
  const std::int32_t meet = std::min(static_cast<std::int32_t>(fwd_.level.size()) - 2, hops);
  for (std::size_t i = fwd_.level[meet]; i < fwd_.level[meet + 1]; ++i) {
    const NodeId n = fwd_.queue[i];
    if (labeled(back_, n) && back_.dist[n] == hops - meet) set_position(n, meet);
  }
  for (std::int32_t p = meet - 1; p >= 0; --p)
    mark_position(p, p + 1, fwd_, p, out_, in_, src, dst);
  for (std::int32_t p = meet + 1; p <= hops; ++p)
    mark_position(p, p - 1, back_, hops - p, in_, out_, dst, src);
}

// Position p: the nodes of `side`'s level `level` joined by a link to
// position q, the one marked before it (p + 1 towards the source, p - 1
// towards the destination). `to_q` leads from a level node towards q and
// `from_q` back; `start` is the side's own start, which a route may leave
// though it is not transit, `end` the other side's. Scans whichever is
// smaller: the level's links or position q's.
void Router::mark_position(std::int32_t p, std::int32_t q, const Side& side, std::int32_t level,
                           const Adjacency& to_q, const Adjacency& from_q, NodeId start,
                           NodeId end) {
  std::size_t scan_level = 0, scan_q = 0;
  for (std::size_t i = side.level[level]; i < side.level[level + 1]; ++i)
    scan_level += to_q.transit_degree(side.queue[i]) + 1;
  for (NodeId n : at_pos_[q]) scan_q += from_q.transit_degree(n) + 1;
  if (scan_q < scan_level) {
    const auto in_level = [&](NodeId n) {
      return labeled(side, n) && side.dist[n] == level && !at_position(n, p);
    };
    for (NodeId m : at_pos_[q]) {
      hops_.clear();
      hops_from(from_q, m, start, in_level, hops_);
      for (const Hop& h : hops_)
        if (!at_position(h.node, p)) set_position(h.node, p);
    }
    return;
  }
  const auto on_q = [&](NodeId m) { return at_position(m, q); };
  for (std::size_t i = side.level[level]; i < side.level[level + 1]; ++i) {
    const NodeId n = side.queue[i];
    if (n != start && !transit_[n]) continue;
    hops_.clear();
    hops_from(to_q, n, end, on_q, hops_);
    if (!hops_.empty()) set_position(n, p);
  }
}

void Router::next_hops(NodeId at, std::int32_t pos, NodeId dst) {
  hops_.clear();
  const auto& next = at_pos_[pos + 1];
  const auto on_next = [&](NodeId m) { return at_position(m, pos + 1); };
  if (next.size() * 8 < out_.transit_degree(at) + 1) {
    for (NodeId n : next) hops_to(out_, at, n, hops_);
  } else {
    hops_from(out_, at, dst, on_next, hops_);
  }
  std::sort(hops_.begin(), hops_.end(),
            [](const Hop& a, const Hop& b) { return a.index < b.index; });
}

std::span<const LinkId> Router::keep(const std::vector<LinkId>& links) {
  constexpr std::size_t kBlock = std::size_t{1} << 16;
  if (links.size() > pool_left_) {
    pool_left_ = std::max(kBlock, links.size());
    pool_.push_back(std::make_unique_for_overwrite<LinkId[]>(pool_left_));
    pool_next_ = pool_.back().get();
  }
  LinkId* at = pool_next_;
  std::copy(links.begin(), links.end(), at);
  pool_next_ += links.size();
  pool_left_ -= links.size();
  return {at, links.size()};
}

Route Router::compute(NodeId src, NodeId dst) {
  Route r;
  if (src == dst) return r;
  const std::int32_t hops = search(src, dst);
  if (hops < 0)
    throw InvalidArgument(fmt::format("topology: no route from '{}' to '{}'", topo_.node(src).name,
                                      topo_.node(dst).name));
  mark_positions(src, dst, hops);
  const std::uint64_t pair_hash = mix((static_cast<std::uint64_t>(src) << 32) ^ dst);
  NodeId at = src;
  route_links_.clear();
  for (std::int32_t pos = 0; pos < hops; ++pos) {
    next_hops(at, pos, dst);
    CCLAB_CHECK(!hops_.empty(), "route search lost its way");
    const Hop& pick = hops_[mix(pair_hash ^ static_cast<std::uint64_t>(at)) % hops_.size()];
    route_links_.push_back(pick.link);
    r.latency += topo_.link(pick.link).latency;
    at = pick.node;
  }
  CCLAB_CHECK(at == dst, "route search ended off its destination");
  r.links = keep(route_links_);
  return r;
}

namespace {

// Whether, along `d`, the routes to the next ranks and to the previous ones
// share no link; `used` is scratch of one flag per link.
bool directions_apart(const Topology& t, Router& router, int ranks, coll::GridDim d,
                      std::vector<std::uint8_t>& used) {
  std::fill(used.begin(), used.end(), 0);
  const auto peer = [&](int r, int step) {
    const int pos = (r / d.stride) % d.size;
    return r + ((pos + step + d.size) % d.size - pos) * d.stride;
  };
  for (int pass = 0; pass < 2; ++pass)
    for (int r = 0; r < ranks; ++r) {
      const Route& route = router.route(t.endpoint(r), t.endpoint(peer(r, pass == 0 ? 1 : -1)));
      for (const LinkId l : route.links) {
        if (pass == 1 && used[l] == 1) return false;
        if (pass == 0) used[l] = 1;
      }
    }
  return true;
}

}  // namespace

bool rails_disjoint(const Topology& t, int ranks, int group_size) {
  const int g = group_size;
  if (g < 2 || g >= ranks || ranks % g != 0) return false;
  Router router(t);
  std::vector<std::uint8_t> used(t.num_links());
  const auto links = [&](int src, int dst) {
    return router.route(t.endpoint(src), t.endpoint(dst)).links;
  };
  // Rail ring c goes through a group from its member c to c-1 (mod g), so
  // the rings' hops inside the groups are every member's to the next.
  for (int from = 0; from < ranks; from += g)
    for (int i = 0; i < g; ++i)
      for (const LinkId l : links(from + i, from + (i + 1) % g)) used[l] = 1;
  // It leaves group G from its member c-1 for group G+1's member c
  // (collectives' RailRings), the last group's for the first's.
  for (int from = 0; from < ranks; from += g)
    for (int c = 0; c < g; ++c)
      for (const LinkId l : links(from + (c + g - 1) % g, (from + g) % ranks + c))
        if (used[l]++ > 0) return false;
  return true;
}

bool reverse_rings_disjoint(const Topology& t, int ranks, int group_size,
                            const std::vector<int>& upper_groups) {
  Router router(t);
  std::vector<std::uint8_t> used(t.num_links());
  bool any = false;
  for (const coll::GridDim d : coll::rank_grid(ranks, group_size, upper_groups)) {
    if (d.size < 3) continue;
    if (!directions_apart(t, router, ranks, d, used)) return false;
    any = true;
  }
  return any;
}

}  // namespace cclab::sim
