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
  bool labeled(NodeId n) const { return stamp_[n] == generation_; }

  const Topology& topo_;
  // The search's view of the topology, compact: node n's in-neighbours are
  // in_from_[in_start_[n] .. in_start_[n+1]) (in the order of Node::in), and
  // transit_[n] says whether routes may pass through n. A switch joining
  // thousands of NICs is scanned for every route that crosses it, so this
  // costs 5 bytes a neighbour instead of a Link and a Node.
  std::vector<std::uint32_t> in_start_;
  std::vector<NodeId> in_from_;
  std::vector<std::uint8_t> transit_;
  std::unordered_map<std::uint64_t, Route> cache_;
  // BFS scratch, reused across searches: a node's label is valid when its
  // stamp equals the current generation (no clearing per search).
  std::vector<std::uint32_t> stamp_;
  std::vector<std::int32_t> dist_;
  std::vector<NodeId> queue_;
  std::uint32_t generation_ = 0;
};

}  // namespace cclab::sim
