// Shortest-path routing with deterministic ECMP.
//
// A route is the fewest-hop path from one endpoint to another that passes only
// through transit nodes. Where several next hops are equally short, the hop
// is chosen by a hash of (source, destination, current node) among the
// equally short ones in the order of Node::out, so a pair always takes the
// same path and different pairs spread over the equal paths.
// Routes are computed lazily, per pair, and cached: memory grows with the
// pairs that talk, never with endpoints squared. Each is found by a
// bidirectional breadth-first search that grows, level by level, whichever
// side is cheaper to grow, and stops when the two meet: a switch joining
// thousands of NICs is crossed, not expanded. The nodes on shortest paths are
// then marked position by position outward from the meeting level, and the
// route walks them from the source.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "cclab/sim/topology.h"

namespace cclab::sim {

struct Route {
  std::span<const LinkId> links;  // in order from source to destination (the Router's memory)
  Time latency = 0;               // sum of the links' latencies
};

class Router {
 public:
  explicit Router(const Topology& topology);

  // The route between two nodes (normally endpoints); throws InvalidArgument
  // when there is none. The reference stays valid for the Router's lifetime.
  const Route& route(NodeId src, NodeId dst);
  std::size_t cached_routes() const { return cache_.size(); }

 private:
  // A neighbour across one link; `index` is the link's position in
  // Node::out of its source (the order ECMP picks from).
  struct Hop {
    NodeId node;
    std::uint32_t index;
    LinkId link;
  };
  // A node's neighbours one way, split by what a route may do there: only a
  // route's own source and destination may be non-transit (endpoints), so a
  // search scans the transit ones and looks its one endpoint up among the
  // rest, sorted by node (a switch with 65,536 endpoints: a binary search).
  struct Adjacency {
    std::vector<std::uint32_t> transit_start, leaf_start;  // per node, then the end
    std::vector<Hop> transit, leaf;                        // each node's sorted by (node, index)
    std::size_t transit_degree(NodeId n) const { return transit_start[n + 1] - transit_start[n]; }
  };
  // One direction of the search: labels valid while stamp == generation_, and
  // the queue in level order (level k is queue[level[k] .. level[k + 1])).
  struct Side {
    std::vector<std::uint32_t> stamp;
    std::vector<std::int32_t> dist;
    std::vector<NodeId> queue;
    std::vector<std::size_t> level;
  };

  Route compute(NodeId src, NodeId dst);
  // A lasting copy of `links` in the pool (routes' links lie together, in
  // blocks that never move: no allocation per route).
  std::span<const LinkId> keep(const std::vector<LinkId>& links);
  // Grows both sides until they meet; the hop count, -1 when there is no route.
  std::int32_t search(NodeId src, NodeId dst);
  // Labels the next level of one side (forward: along out-links from `start`,
  // the source; else along in-links from `start`, the destination), towards
  // `end`; updates best_ where the sides meet.
  void grow(bool forward, NodeId start, NodeId end);
  // Marks the nodes at each position 0..hops of some shortest path.
  void mark_positions(NodeId src, NodeId dst, std::int32_t hops);
  void mark_position(std::int32_t p, std::int32_t q, const Side& side, std::int32_t level,
                     const Adjacency& to_q, const Adjacency& from_q, NodeId start, NodeId end);
  // The links from `at` (at position pos) to position pos + 1, in Node::out order.
  void next_hops(NodeId at, std::int32_t pos, NodeId dst);
  // Appends n's hops in `adj` to the transit nodes `keep` accepts, and to
  // `end` (non-transit, looked up) if it accepts that.
  template <class Keep>
  void hops_from(const Adjacency& adj, NodeId n, NodeId end, Keep&& keep,
                 std::vector<Hop>& out) const;
  // Appends every hop of n in `adj` to node `to` (parallel links: several).
  void hops_to(const Adjacency& adj, NodeId n, NodeId to, std::vector<Hop>& out) const;
  bool labeled(const Side& s, NodeId n) const { return s.stamp[n] == generation_; }
  bool at_position(NodeId n, std::int32_t pos) const {
    return pos_stamp_[n] == generation_ && pos_[n] == pos;
  }
  void set_position(NodeId n, std::int32_t pos);

  const Topology& topo_;
  Adjacency out_, in_;  // in_: Hop::node is the link's source
  std::vector<std::uint8_t> transit_;
  std::unordered_map<std::uint64_t, Route> cache_;
  // Search scratch, reused across routes (no clearing: generation stamps).
  Side fwd_, back_;
  std::int32_t best_ = -1;
  std::vector<std::uint32_t> pos_stamp_;
  std::vector<std::int32_t> pos_;
  std::vector<std::vector<NodeId>> at_pos_;      // [position] -> its marked nodes
  std::vector<Hop> hops_;                        // scratch
  std::vector<LinkId> route_links_;              // scratch: the route being computed
  std::vector<std::unique_ptr<LinkId[]>> pool_;  // keep()'s blocks
  LinkId* pool_next_ = nullptr;                  // the last block's first free LinkId
  std::size_t pool_left_ = 0;                    // and how many are free after it
  std::uint32_t generation_ = 0;
};

// Whether the ranks' rings have the reverse ring's links to themselves: along
// each dimension of the rank grid with three ranks or more (groups of
// `group_size` consecutive ranks, the levels `upper_groups` above them, then
// the top groups; all the ranks as one where group_size does not split
// them), the routes from every rank to its next and to its previous share no
// link, and at least one dimension has three. A ring then leaves one
// direction of each of its links idle, which the bidirectional ring fills
// (a torus, a ring of direct links; not a switch, whose uplink carries
// both): cclab sim tells the built-in rule so (AlgoConfig::prefer_biring).
bool reverse_rings_disjoint(const Topology& t, int ranks, int group_size,
                            const std::vector<int>& upper_groups);

// Whether the rail rings of groups of `group_size` consecutive ranks (ring c
// goes through each group from its member c, leaving it from member c-1
// for the next group's c: collectives' `rings`) cross between the groups
// on links of their own: no link carries two of their crossings, nor a hop
// inside a group. Then the g rings together have g times one ring's links
// between the groups (a NIC per GPU); not where a host's ranks share one
// NIC or leaves fewer uplinks than hosts, nor on a switch or a torus, whose
// crossings use the links of hops inside the groups. False without several
// groups of several ranks.
// cclab sim tells the built-in rule so (AlgoConfig::prefer_rails).
bool rails_disjoint(const Topology& t, int ranks, int group_size);

}  // namespace cclab::sim
