// The network the simulator runs on: nodes (endpoints that host ranks,
// switches, NICs) joined by directed links, each with a bandwidth (bytes/s)
// and a latency (ps). Rank r runs on the r-th endpoint, in creation order.
//
// Routing may pass through switches and NICs; through an endpoint only when
// it is marked `transit` (direct networks such as ring and torus, where hosts
// forward). Topologies come from generator specs ("switch:n=8,bw=100Gbps")
// or JSON files, see make_topology().
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "cclab/sim/units.h"

namespace cclab::sim {

using NodeId = std::int32_t;
using LinkId = std::int32_t;

enum class NodeKind : std::uint8_t { kEndpoint, kSwitch, kNic };
std::string_view node_kind_name(NodeKind k);

struct Node {
  NodeKind kind = NodeKind::kSwitch;
  std::string name;
  bool transit = true;      // routes may pass through it
  double reduce_bps = 0;    // endpoints: reduction rate in bytes/s; 0 = free
  std::vector<LinkId> out;  // links leaving this node
  std::vector<LinkId> in;   // links entering it
};

struct Link {
  NodeId from = 0;
  NodeId to = 0;
  double bw_bps = 0;  // bytes per second
  Time latency = 0;
};

// Size-dependent corrections, as SimGrid's LV08 and SMPI network models have
// them (off unless the topology gives them, so calibrations can): a message of
// S bytes pays its route latency times latency_factor(S), and moves at
// bandwidth_factor(S) times the rate it is given, that is, it occupies its
// links as S / bandwidth_factor(S) bytes would (protocol overhead counts as
// link use). Each factor is piecewise constant in S: the factor of the band
// with the largest `from_bytes` <= S, and 1 below the first band.
struct FactorBand {
  std::uint64_t from_bytes = 0;
  double factor = 1;
};
struct Corrections {
  std::vector<FactorBand> latency, bandwidth;  // ascending from_bytes
  double latency_factor(std::uint64_t bytes) const { return lookup(latency, bytes); }
  double bandwidth_factor(std::uint64_t bytes) const { return lookup(bandwidth, bytes); }
  bool empty() const { return latency.empty() && bandwidth.empty(); }
  static double lookup(const std::vector<FactorBand>& bands, std::uint64_t bytes);
};
// Parses "0:1.5/64K:1.0" (from:factor bands, from ascending, factor > 0);
// throws InvalidArgument naming `field`.
std::vector<FactorBand> parse_factor_bands(std::string_view text, std::string_view field);
// Checks bands built another way (from JSON arrays), with the same rules.
void check_factor_bands(const std::vector<FactorBand>& bands, std::string_view field);

class Topology {
 public:
  NodeId add_node(NodeKind kind, std::string name, bool transit);
  NodeId add_endpoint(std::string name, bool transit = false, double reduce_bps = 0);
  // `tier` names the level of the network the link belongs to, for reports
  // (`cclab sim --links`): "x+" for a torus's links towards +x, "leaf->spine"
  // on a fat tree. Empty: none given (reports then group by node kinds).
  LinkId add_link(NodeId from, NodeId to, double bw_bps, Time latency, std::string_view tier = {});
  // Two links, one each way: a->b in tier `ab`, b->a in tier `ba`.
  void add_duplex(NodeId a, NodeId b, double bw_bps, Time latency, std::string_view ab = {},
                  std::string_view ba = {});

  // Checks every link's values and that every endpoint reaches, and is reached
  // from, endpoint 0; throws InvalidArgument naming `what` and the node.
  void validate(std::string_view what) const;

  const Node& node(NodeId id) const { return nodes_[id]; }
  const Link& link(LinkId id) const { return links_[id]; }
  std::size_t num_nodes() const { return nodes_.size(); }
  std::size_t num_links() const { return links_.size(); }
  std::size_t num_endpoints() const { return endpoints_.size(); }
  NodeId endpoint(int index) const { return endpoints_[index]; }
  // "gpu3->nvsw0" for reports.
  std::string link_name(LinkId id) const;
  // The tier add_link was given ("" when none).
  std::string_view link_tier(LinkId id) const { return tier_names_[link_tiers_[id]]; }

  // Ranks per group for the algorithms that take one (hier, rings): a fast or
  // natural domain of consecutive ranks (the GPUs of a node, the hosts of a
  // leaf switch, a torus's row); 0 when the topology has none.
  int group_size_hint = 0;
  // hier all-reduce's levels above those groups and whether to rotate them
  // (AlgoConfig::upper_groups, rotate_levels), where the topology has them:
  // a torus's dimensions, each its own links of one kind (torus2d: rows,
  // rotated; torus3d: rows, then planes, rotated).
  std::vector<int> upper_groups_hint;
  bool rotate_levels_hint = false;
  Corrections corrections;  // none by default
  // Messages of up to this many bytes go eagerly: the transfer starts when the
  // send is issued, without waiting for its receive, and the send is done at
  // once (simulator.h). 0 (the default): every transfer is a rendezvous.
  std::uint64_t eager_bytes = 0;
  // The host time a message costs each end (LogGP's o): a rank's host handles
  // one message at a time, so a sender pays it before its data leaves and a
  // receiver after it lands (simulator.h). 0 (the default): none.
  Time overhead = 0;
  // The CPUs the ranks' hosts share for that overhead: a message end needs
  // one, so with more ranks than CPUs they wait for each other (ranks as
  // processes on a few cores). 0 (the default): a CPU per rank.
  int host_cpus = 0;
  // Messages of one ordered pair that are in flight together: true (the
  // default) puts them on the wire one after another, in the order they
  // matched, as over one TCP connection (a Gloo pair) or one NCCL channel,
  // the next one's bytes following the last one's without a second latency;
  // false shares the pair's links among them like any other flows, so two
  // sent back to back both land when the second would.
  bool pair_fifo = true;
  std::string description;  // the spec or file it came from

 private:
  std::vector<NodeId> reachable(NodeId from, bool forward) const;

  std::vector<Node> nodes_;
  std::vector<Link> links_;
  std::vector<NodeId> endpoints_;
  // Tier names are kept once each (a topology has a handful, and many links):
  // link_tiers_[l] indexes tier_names_, whose entry 0 is "" (none).
  std::vector<std::uint32_t> link_tiers_;
  std::vector<std::string> tier_names_{""};
  std::map<std::string, std::uint32_t, std::less<>> tier_ids_{{"", 0}};
};

// A generator spec ("switch:n=8,bw=100Gbps,lat=1us"; see generators.cc for the
// list) or the path of a JSON file (see topology_json.cc). Throws
// InvalidArgument naming the generator, key or JSON field that is wrong.
Topology make_topology(std::string_view spec_or_path);
Topology generate_topology(std::string_view spec);
Topology load_topology_json(const std::string& path);
Topology parse_topology_json(std::string_view text, std::string_view what);

}  // namespace cclab::sim
