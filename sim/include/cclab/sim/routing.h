// Shortest-path routing with deterministic ECMP.
//
// A route is the fewest-hop path from one endpoint to another that passes only
// through transit nodes. Where several next hops are equally short, the hop
// is chosen by a hash of (source, destination, current node), so a pair always
// takes the same path and different pairs spread over the equal paths.
// Routes are computed lazily, per pair, by a breadth-first search backwards
// from the destination that stops once the source is reached, and cached:
// memory grows with the pairs that talk, never with endpoints squared.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "cclab/sim/topology.h"

namespace cclab::sim {

struct Route {
  std::vector<LinkId> links;  // in order from source to destination
  Time latency = 0;           // sum of the links' latencies
};

class Router {
 public:
  explicit Router(const Topology& topology);

  // The route between two nodes (normally endpoints); throws InvalidArgument
  // when there is none. The reference stays valid for the Router's lifetime.
  const Route& route(NodeId src, NodeId dst);
  std::size_t cached_routes() const { return cache_.size(); }

 private:
  Route compute(NodeId src, NodeId dst);
  // Labels dist_ backwards from dst until src is labeled; returns src's distance.
  std::int32_t search_back(NodeId src, NodeId dst);
  // The out-links of `at` one hop closer to dst, in Node::out order, into next_.
  void closer_hops(NodeId at, NodeId dst);
  bool labeled(NodeId n) const { return stamp_[n] == generation_; }

  const Topology& topo_;
  // The search's view of the topology, compact and split by what routes may
  // do there. Only the source and destination of a route may be non-transit
  // (endpoints), so a search scans a node's transit neighbours and looks the
  // one endpoint it cares about up in the sorted rest: a switch joining
  // thousands of endpoints costs a binary search per route, not a scan of
  // them all (that scan made routing quadratic in the endpoints).
  //   in_transit_[in_transit_start_[n] ..]: n's transit in-neighbours.
  //   in_leaf_[in_leaf_start_[n] ..]: n's other in-neighbours, sorted.
  //   out_transit_ / out_leaf_ (same layout): n's out-links to transit nodes,
  //   and to the others sorted by target; each with its index in Node::out,
  //   the order ECMP picks from.
  struct OutLink {
    NodeId to;
    std::uint32_t index;  // position in Node::out
    LinkId link;
  };
  std::vector<std::uint32_t> in_transit_start_, in_leaf_start_, out_start_, out_leaf_start_;
  std::vector<NodeId> in_transit_, in_leaf_;
  std::vector<OutLink> out_transit_, out_leaf_;
  std::vector<std::uint8_t> transit_;
  std::vector<OutLink> next_;  // scratch: a hop's candidates
  std::unordered_map<std::uint64_t, Route> cache_;
  // BFS scratch, reused across searches: a node's label is valid when its
  // stamp equals the current generation (no clearing per search).
  std::vector<std::uint32_t> stamp_;
  std::vector<std::int32_t> dist_;
  std::vector<NodeId> queue_;
  std::uint32_t generation_ = 0;
};

}  // namespace cclab::sim
