// Route computation (see routing.h). The backward search labels each node
// with its hop distance to the destination; the route then walks forward from
// the source, each hop going to a neighbour one hop closer, picked by hash
// among the equally close ones (ECMP).
#include "cclab/sim/routing.h"

#include <algorithm>

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
  transit_.reserve(nodes);
  for (std::size_t n = 0; n < nodes; ++n)
    transit_.push_back(topology.node(static_cast<NodeId>(n)).transit ? 1 : 0);
  const auto by_target = [](const OutLink& a, const OutLink& b) {
    return a.to != b.to ? a.to < b.to : a.index < b.index;
  };
  for (std::size_t n = 0; n < nodes; ++n) {
    const Node& node = topology.node(static_cast<NodeId>(n));
    in_transit_start_.push_back(static_cast<std::uint32_t>(in_transit_.size()));
    in_leaf_start_.push_back(static_cast<std::uint32_t>(in_leaf_.size()));
    for (LinkId l : node.in) {
      const NodeId from = topology.link(l).from;
      (transit_[from] ? in_transit_ : in_leaf_).push_back(from);
    }
    std::sort(in_leaf_.begin() + in_leaf_start_.back(), in_leaf_.end());
    out_start_.push_back(static_cast<std::uint32_t>(out_transit_.size()));
    out_leaf_start_.push_back(static_cast<std::uint32_t>(out_leaf_.size()));
    for (std::uint32_t i = 0; i < node.out.size(); ++i) {
      const OutLink o{topology.link(node.out[i]).to, i, node.out[i]};
      (transit_[o.to] ? out_transit_ : out_leaf_).push_back(o);
    }
    std::sort(out_leaf_.begin() + out_leaf_start_.back(), out_leaf_.end(), by_target);
  }
  in_transit_start_.push_back(static_cast<std::uint32_t>(in_transit_.size()));
  in_leaf_start_.push_back(static_cast<std::uint32_t>(in_leaf_.size()));
  out_start_.push_back(static_cast<std::uint32_t>(out_transit_.size()));
  out_leaf_start_.push_back(static_cast<std::uint32_t>(out_leaf_.size()));
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
  const auto label = [&](NodeId prev, NodeId n) {
    stamp_[prev] = generation_;
    dist_[prev] = dist_[n] + 1;
  };
  for (std::size_t head = 0; head < queue_.size(); ++head) {
    const NodeId n = queue_[head];
    if (!transit_[src] && !labeled(src) &&
        std::binary_search(in_leaf_.begin() + in_leaf_start_[n],
                           in_leaf_.begin() + in_leaf_start_[n + 1], src)) {
      label(src, n);  // every closer node is labeled by now
      return dist_[src];
    }
    for (std::uint32_t i = in_transit_start_[n]; i < in_transit_start_[n + 1]; ++i) {
      const NodeId prev = in_transit_[i];
      if (labeled(prev)) continue;
      label(prev, n);
      if (prev == src) return dist_[prev];
      queue_.push_back(prev);
    }
  }
  return -1;
}

void Router::closer_hops(NodeId at, NodeId dst) {
  next_.clear();
  const std::int32_t want = dist_[at] - 1;
  if (want == 0 && !transit_[dst]) {  // the only labeled non-transit node that close
    const auto first = out_leaf_.begin() + out_leaf_start_[at];
    const auto last = out_leaf_.begin() + out_leaf_start_[at + 1];
    for (auto it = std::lower_bound(first, last, OutLink{dst, 0, 0},
                                    [](const OutLink&a, const OutLink&b) { return a.to < b.to; });
         it != last && it->to == dst; ++it)
      next_.push_back(*it);
  }
  for (std::uint32_t i = out_start_[at]; i < out_start_[at + 1]; ++i) {
    const OutLink& o = out_transit_[i];
    if (labeled(o.to) && dist_[o.to] == want) next_.push_back(o);
  }
  std::sort(next_.begin(), next_.end(),
            [](const OutLink& a, const OutLink& b) { return a.index < b.index; });
}

Route Router::compute(NodeId src, NodeId dst) {
  Route r;
  if (src == dst) return r;
  const std::int32_t hops = search_back(src, dst);
  if (hops < 0)
    throw InvalidArgument(fmt::format("topology: no route from '{}' to '{}'", topo_.node(src).name,
                                      topo_.node(dst).name));
  const std::uint64_t pair_hash = mix((static_cast<std::uint64_t>(src) << 32) ^ dst);
  for (NodeId at = src; at != dst;) {
    closer_hops(at, dst);
    CCLAB_CHECK(!next_.empty(), "route search lost its way");
    const LinkId pick = next_[mix(pair_hash ^ static_cast<std::uint64_t>(at)) % next_.size()].link;
    r.links.push_back(pick);
    r.latency += topo_.link(pick).latency;
    at = topo_.link(pick).to;
  }
  return r;
}

}  // namespace cclab::sim
