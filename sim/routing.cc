// Route computation (see routing.h). The backward search labels each node
// with its hop distance to the destination; the route then walks forward from
// the source, each hop going to a neighbour one hop closer, picked by hash
// among the equally close ones (ECMP).
#include "cclab/sim/routing.h"

#include <fmt/format.h>

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

Router::Router(const Topology& topology)
    : topo_(topology), stamp_(topology.num_nodes(), 0), dist_(topology.num_nodes(), 0) {
  const std::size_t nodes = topology.num_nodes();
  in_start_.reserve(nodes + 1);
  in_from_.reserve(topology.num_links());
  transit_.reserve(nodes);
  for (std::size_t n = 0; n < nodes; ++n) {
    const Node& node = topology.node(static_cast<NodeId>(n));
    in_start_.push_back(static_cast<std::uint32_t>(in_from_.size()));
    for (LinkId l : node.in) in_from_.push_back(topology.link(l).from);
    transit_.push_back(node.transit ? 1 : 0);
  }
  in_start_.push_back(static_cast<std::uint32_t>(in_from_.size()));
}

const Route& Router::route(NodeId src, NodeId dst) {
  const std::uint64_t key = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(src)) << 32) |
                            static_cast<std::uint32_t>(dst);
  const auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  return cache_.emplace(key, compute(src, dst)).first->second;
}

std::int32_t Router::search_back(NodeId src, NodeId dst) {
  ++generation_;
  queue_.clear();
  queue_.push_back(dst);
  stamp_[dst] = generation_;
  dist_[dst] = 0;
  for (std::size_t head = 0; head < queue_.size(); ++head) {
    const NodeId n = queue_[head];
    for (std::uint32_t i = in_start_[n]; i < in_start_[n + 1]; ++i) {
      const NodeId prev = in_from_[i];
      if (labeled(prev)) continue;
      if (prev != src && !transit_[prev]) continue;  // cannot pass through it
      stamp_[prev] = generation_;
      dist_[prev] = dist_[n] + 1;
      if (prev == src) return dist_[prev];  // every closer node is labeled by now
      queue_.push_back(prev);
    }
  }
  return -1;
}

Route Router::compute(NodeId src, NodeId dst) {
  Route r;
  if (src == dst) return r;
  const std::int32_t hops = search_back(src, dst);
  if (hops < 0)
    throw InvalidArgument(fmt::format("topology: no route from '{}' to '{}'", topo_.node(src).name,
                                      topo_.node(dst).name));
  const std::uint64_t pair_hash = mix((static_cast<std::uint64_t>(src) << 32) ^ dst);
  std::vector<LinkId> next;
  for (NodeId at = src; at != dst;) {
    next.clear();
    for (LinkId l : topo_.node(at).out) {
      const NodeId to = topo_.link(l).to;
      if (labeled(to) && dist_[to] == dist_[at] - 1) next.push_back(l);
    }
    CCLAB_CHECK(!next.empty(), "route search lost its way");
    const LinkId pick = next[mix(pair_hash ^ static_cast<std::uint64_t>(at)) % next.size()];
    r.links.push_back(pick);
    r.latency += topo_.link(pick).latency;
    at = topo_.link(pick).to;
  }
  return r;
}

}  // namespace cclab::sim
