// Built-in topology generators, spelled "name:key=value,key=value":
//
//   switch:n=8,bw=100Gbps,lat=1us      n endpoints on one switch; a route is
//                                      2 links (up, down): latency 2*lat
//   switch:...,fabric=200GBps          the switch moves at most `fabric` in
//                                      all (a backplane, or the cores of one
//                                      host that copy every byte): every route
//                                      crosses one shared link of that rate
//   ring:n=8,bw=..,lat=..              endpoints in a bidirectional ring of
//                                      direct links; endpoints forward
//   torus2d:x=4,y=4,bw=..,lat=..       x*y endpoints, wrap-around links in
//                                      both dimensions; endpoints forward
//   torus3d:x=4,y=4,z=4,bw=..,lat=..   the same in three dimensions (TPU
//                                      pods, Blue Gene)
//   fat-tree:hosts=16,leaves=4,spines=2,bw=..,uplink=..,lat=..
//                                      hosts/leaves hosts per leaf switch, every
//                                      leaf linked to every spine at `uplink`
//                                      (default bw); oversubscription is
//                                      (hosts/leaves*bw) / (spines*uplink)
//   fat-tree:tiers=3,pods=4,hosts=64,leaves=8,spines=2,cores=4,core=..
//                                      3 tiers: the leaves split evenly into
//                                      pods; each pod has its own `spines`
//                                      (aggregation) switches, each linked to
//                                      every leaf of its pod at `uplink` and to
//                                      every one of `cores` core switches at
//                                      `core` (default uplink). Routes: 2 links
//                                      in a leaf, 4 in a pod, 6 across pods.
//                                      tiers=2 (default) is the leaf-spine above
//   nodes:nodes=4,gpus=8,nvlink=450GBps,nic=400Gbps,lat=2us,nvlat=500ns
//                                      per node an NVSwitch joining its GPUs at
//                                      `nvlink`; each GPU has its own NIC (rail)
//                                      on one network switch at `nic`; routes
//                                      inside a node are gpu-nvsw-gpu (2*nvlat),
//                                      across nodes gpu-nic-sw-nic-gpu (2*lat)
//
// Every link has a tier, named for the level of the network it is on, for
// `cclab sim --links`: host->switch, switch->host (and fabric); ring+, ring-;
// x+, x-, y+, y-, z+, z- (a torus dimension, one direction); host->leaf,
// leaf->spine, spine->core and back; gpu->nvsw, gpu->nic, nic->net and back.
//
// Every generator also takes reduce=<bandwidth>: the endpoints' reduction rate
// (default: free), and latf=, bwf= size-dependent latency and bandwidth
// factors as from:factor bands, e.g. bwf=0:0.5/64K:0.9 (see Corrections in
// topology.h; default: none), and eager=<bytes>: messages up to that size go
// without waiting for their receive (default 0: none; see simulator.h), and
// overhead=<time>: the host time a message costs at each end, one message at
// a time per rank (LogGP's o; default 0), and cpus=<n>: the CPUs all ranks'
// hosts share for that time (default: one per rank), and pairs=fifo|shared:
// whether one pair's messages in flight together go one after another or
// share the links (default fifo; see Topology::pair_fifo).
// Defaults: bw=100Gbps, lat=1us.
#include <charconv>
#include <map>
#include <string>

#include <fmt/format.h>

#include "cclab/collectives/error.h"
#include "cclab/sim/topology.h"

namespace cclab::sim {
namespace {

constexpr long kMaxEndpoints = 1 << 22;

// The key=value list of one spec; every read marks the key as known, and
// finish() rejects the rest, so a typo is an error naming the key.
class SpecArgs {
 public:
  SpecArgs(std::string name, std::string_view list) : name_(std::move(name)) {
    for (std::size_t pos = 0; pos < list.size();) {
      const auto comma = std::min(list.find(',', pos), list.size());
      const auto item = list.substr(pos, comma - pos);
      const auto eq = item.find('=');
      if (eq == std::string_view::npos || eq == 0)
        throw InvalidArgument(fmt::format("topology {}: '{}' is not key=value", name_, item));
      const auto [at, added] =
          values_.emplace(std::string(item.substr(0, eq)), std::string(item.substr(eq + 1)));
      if (!added)  // which one was meant is not ours to guess
        throw InvalidArgument(fmt::format("topology {}: {} given twice ('{}' and '{}')", name_,
                                          at->first, at->second, item.substr(eq + 1)));
      pos = comma + 1;
    }
  }

  long integer(const std::string& key, long min) {
    const std::string& text = required(key);
    long v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size())
      throw InvalidArgument(fmt::format("{}: '{}' is not an integer", field(key), text));
    if (v < min || v > kMaxEndpoints)
      throw InvalidArgument(
          fmt::format("{}: must be between {} and {} (got {})", field(key), min, kMaxEndpoints, v));
    return v;
  }
  double bandwidth(const std::string& key, std::string_view fallback) {
    return parse_bandwidth(optional(key, fallback), field(key));
  }
  Time latency(const std::string& key, std::string_view fallback) {
    return parse_latency(optional(key, fallback), field(key));
  }
  bool has(const std::string& key) {
    used_[key] = true;
    return values_.contains(key);
  }
  double reduce() { return has("reduce") ? bandwidth("reduce", "") : 0.0; }

  void finish(std::string_view allowed) const {
    for (const auto& [key, value] : values_)
      if (!used_.contains(key))
        throw InvalidArgument(fmt::format(
            "topology {}: unknown key '{}' (allowed: {}, latf, bwf, eager, overhead, cpus, pairs)",
            name_, key, allowed));
  }
  // The size-dependent correction factors every generator takes.
  Corrections corrections() {
    Corrections c;
    if (has("latf")) c.latency = parse_factor_bands(required("latf"), field("latf"));
    if (has("bwf")) c.bandwidth = parse_factor_bands(required("bwf"), field("bwf"));
    return c;
  }
  std::uint64_t eager_bytes() {
    return has("eager") ? parse_bytes(required("eager"), field("eager")) : 0;
  }
  Time overhead() { return latency("overhead", "0"); }
  int host_cpus() { return has("cpus") ? static_cast<int>(integer("cpus", 1)) : 0; }
  bool pair_fifo() { return !has("pairs") || parse_pair_order(required("pairs"), field("pairs")); }
  std::string field(const std::string& key) const {
    return fmt::format("topology {}: {}", name_, key);
  }

 private:
  const std::string& required(const std::string& key) {
    used_[key] = true;
    const auto it = values_.find(key);
    if (it == values_.end()) throw InvalidArgument(fmt::format("{}: missing field", field(key)));
    return it->second;
  }
  std::string optional(const std::string& key, std::string_view fallback) {
    used_[key] = true;
    const auto it = values_.find(key);
    return it == values_.end() ? std::string(fallback) : it->second;
  }

  std::string name_;
  std::map<std::string, std::string> values_;
  std::map<std::string, bool> used_;
};

constexpr const char* kDefaultBw = "100Gbps";
constexpr const char* kDefaultLat = "1us";

Topology make_switch(SpecArgs& a) {
  const long n = a.integer("n", 1);
  const double bw = a.bandwidth("bw", kDefaultBw), reduce = a.reduce();
  const Time lat = a.latency("lat", kDefaultLat);
  const bool shared = a.has("fabric");
  const double fabric = shared ? a.bandwidth("fabric", "") : 0;
  a.finish("n, bw, lat, reduce, fabric");
  Topology t;
  for (long i = 0; i < n; ++i) t.add_endpoint(fmt::format("e{}", i), false, reduce);
  if (!shared) {
    const NodeId sw = t.add_node(NodeKind::kSwitch, "sw", true);
    for (long i = 0; i < n; ++i)
      t.add_duplex(t.endpoint(static_cast<int>(i)), sw, bw, lat, "host->switch", "switch->host");
    return t;
  }
  // Into the switch at one side, out at the other, through the fabric link.
  const NodeId in = t.add_node(NodeKind::kSwitch, "sw.in", true);
  const NodeId out = t.add_node(NodeKind::kSwitch, "sw.out", true);
  t.add_link(in, out, fabric, 0, "fabric");
  for (long i = 0; i < n; ++i) {
    t.add_link(t.endpoint(static_cast<int>(i)), in, bw, lat, "host->switch");
    t.add_link(out, t.endpoint(static_cast<int>(i)), bw, lat, "switch->host");
  }
  return t;
}

Topology make_ring(SpecArgs& a) {
  const long n = a.integer("n", 1);
  const double bw = a.bandwidth("bw", kDefaultBw), reduce = a.reduce();
  const Time lat = a.latency("lat", kDefaultLat);
  a.finish("n, bw, lat, reduce");
  Topology t;
  for (long i = 0; i < n; ++i) t.add_endpoint(fmt::format("e{}", i), true, reduce);
  // n == 2: one duplex pair, not two parallel ones.
  const long pairs = n == 1 ? 0 : n == 2 ? 1 : n;
  for (long i = 0; i < pairs; ++i)
    t.add_duplex(t.endpoint(static_cast<int>(i)), t.endpoint(static_cast<int>((i + 1) % n)), bw,
                 lat, "ring+", "ring-");
  return t;
}

// A torus of 2 or 3 dimensions: endpoint (i, j, k) is number (k*y + j)*x + i
// and links to its successor in every dimension (once where a dimension is 2,
// which has one neighbour each way). Each dimension and direction is a tier:
// x+ from (i, j, k) to (i+1, j, k), x- back, and so on.
Topology make_torus(SpecArgs& a, int dims) {
  const long x = a.integer("x", 1), y = a.integer("y", 1);
  const long z = dims == 3 ? a.integer("z", 1) : 1;
  const double bw = a.bandwidth("bw", kDefaultBw), reduce = a.reduce();
  const Time lat = a.latency("lat", kDefaultLat);
  a.finish(dims == 3 ? "x, y, z, bw, lat, reduce" : "x, y, bw, lat, reduce");
  if (x * y > kMaxEndpoints || x * y * z > kMaxEndpoints)
    throw InvalidArgument(fmt::format("{}: {} is above {}", a.field("x"),
                                      dims == 3 ? "x*y*z" : "x*y", kMaxEndpoints));
  Topology t;
  for (long k = 0; k < z; ++k)
    for (long j = 0; j < y; ++j)
      for (long i = 0; i < x; ++i)
        t.add_endpoint(dims == 3 ? fmt::format("e{}.{}.{}", i, j, k) : fmt::format("e{}.{}", i, j),
                       true, reduce);
  auto id = [&](long i, long j, long k) {
    return t.endpoint(static_cast<int>((k * y + j) * x + i));
  };
  const auto links = [](long size, long at) { return size > 2 || (size == 2 && at == 0); };
  for (long k = 0; k < z; ++k)
    for (long j = 0; j < y; ++j)
      for (long i = 0; i < x; ++i) {
        if (links(x, i)) t.add_duplex(id(i, j, k), id((i + 1) % x, j, k), bw, lat, "x+", "x-");
        if (links(y, j)) t.add_duplex(id(i, j, k), id(i, (j + 1) % y, k), bw, lat, "y+", "y-");
        if (links(z, k)) t.add_duplex(id(i, j, k), id(i, j, (k + 1) % z), bw, lat, "z+", "z-");
      }
  // A row: its x endpoints are consecutive ranks joined by a ring of direct
  // links, so hier's groups run their rings there and the inner all-reduce
  // along the other dimensions (the 2-D torus all-reduce). Where every
  // dimension has two or more, hier all-reduce takes them as levels (a
  // plane of a 3-D torus above its rows) and rotates them: each dimension's
  // links work in every phase (4x4x4, 64 MiB: 0.90 ms against 3.34 in rows).
  t.group_size_hint = static_cast<int>(x);
  if (x > 1 && y > 1 && (dims == 2 || z > 1)) {
    if (dims == 3) t.upper_groups_hint = {static_cast<int>(y)};
    t.rotate_levels_hint = true;
  }
  return t;
}

Topology make_fat_tree(SpecArgs& a) {
  const long hosts = a.integer("hosts", 1), leaves = a.integer("leaves", 1);
  const long spines = a.integer("spines", 1);
  const long tiers = a.has("tiers") ? a.integer("tiers", 2) : 2;
  const double bw = a.bandwidth("bw", kDefaultBw), reduce = a.reduce();
  const double uplink = a.has("uplink") ? a.bandwidth("uplink", "") : bw;
  const Time lat = a.latency("lat", kDefaultLat);
  long pods = 1, cores = 0;
  double core_bw = uplink;
  if (tiers == 3) {
    pods = a.integer("pods", 1);
    cores = a.integer("cores", 1);
    if (a.has("core")) core_bw = a.bandwidth("core", "");
  }
  a.finish(tiers == 3 ? "hosts, leaves, spines, tiers, pods, cores, bw, uplink, core, lat, reduce"
                      : "hosts, leaves, spines, tiers, bw, uplink, lat, reduce (tiers=3: pods, "
                        "cores, core)");
  if (tiers != 2 && tiers != 3)
    throw InvalidArgument(fmt::format("{}: must be 2 or 3 (got {})", a.field("tiers"), tiers));
  if (hosts % leaves != 0)
    throw InvalidArgument(fmt::format("{}: {} hosts do not divide evenly over {} leaves",
                                      a.field("leaves"), hosts, leaves));
  if (leaves % pods != 0)
    throw InvalidArgument(fmt::format("{}: {} leaves do not divide evenly over {} pods",
                                      a.field("pods"), leaves, pods));
  Topology t;
  for (long h = 0; h < hosts; ++h) t.add_endpoint(fmt::format("h{}", h), false, reduce);
  std::vector<NodeId> core_ids;
  for (long c = 0; c < cores; ++c)
    core_ids.push_back(t.add_node(NodeKind::kSwitch, fmt::format("core{}", c), true));
  const long per_leaf = hosts / leaves, per_pod = leaves / pods;
  for (long p = 0; p < pods; ++p) {
    std::vector<NodeId> spine_ids;
    for (long s = 0; s < spines; ++s) {
      const std::string name =
          tiers == 3 ? fmt::format("pod{}.spine{}", p, s) : fmt::format("spine{}", s);
      spine_ids.push_back(t.add_node(NodeKind::kSwitch, name, true));
      for (NodeId c : core_ids)
        t.add_duplex(spine_ids.back(), c, core_bw, lat, "spine->core", "core->spine");
    }
    for (long l = p * per_pod; l < (p + 1) * per_pod; ++l) {
      const NodeId leaf = t.add_node(NodeKind::kSwitch, fmt::format("leaf{}", l), true);
      for (long h = l * per_leaf; h < (l + 1) * per_leaf; ++h)
        t.add_duplex(t.endpoint(static_cast<int>(h)), leaf, bw, lat, "host->leaf", "leaf->host");
      for (NodeId s : spine_ids) t.add_duplex(leaf, s, uplink, lat, "leaf->spine", "spine->leaf");
    }
  }
  t.group_size_hint = static_cast<int>(per_leaf);  // a leaf's hosts: consecutive ranks
  return t;
}

Topology make_nodes(SpecArgs& a) {
  const long nodes = a.integer("nodes", 1), gpus = a.integer("gpus", 1);
  const double nvlink = a.bandwidth("nvlink", "450GBps"), nic = a.bandwidth("nic", "400Gbps");
  const Time lat = a.latency("lat", "2us"), nvlat = a.latency("nvlat", "500ns");
  const double reduce = a.reduce();
  a.finish("nodes, gpus, nvlink, nic, lat, nvlat, reduce");
  if (nodes * gpus > kMaxEndpoints)
    throw InvalidArgument(
        fmt::format("{}: nodes*gpus is above {}", a.field("gpus"), kMaxEndpoints));
  Topology t;
  for (long n = 0; n < nodes; ++n)
    for (long g = 0; g < gpus; ++g) t.add_endpoint(fmt::format("n{}.gpu{}", n, g), false, reduce);
  const NodeId net = t.add_node(NodeKind::kSwitch, "net", true);
  for (long n = 0; n < nodes; ++n) {
    const NodeId nvsw = t.add_node(NodeKind::kSwitch, fmt::format("n{}.nvsw", n), true);
    for (long g = 0; g < gpus; ++g) {
      const NodeId gpu = t.endpoint(static_cast<int>(n * gpus + g));
      const NodeId card = t.add_node(NodeKind::kNic, fmt::format("n{}.nic{}", n, g), true);
      t.add_duplex(gpu, nvsw, nvlink, nvlat, "gpu->nvsw", "nvsw->gpu");
      t.add_duplex(gpu, card, nic, 0, "gpu->nic", "nic->gpu");  // PCIe: the NIC is the limit
      t.add_duplex(card, net, nic, lat, "nic->net", "net->nic");
    }
  }
  t.group_size_hint = static_cast<int>(gpus);
  return t;
}

}  // namespace

Topology generate_topology(std::string_view spec) {
  const auto colon = spec.find(':');
  const std::string name(spec.substr(0, colon));
  SpecArgs args(name, colon == std::string_view::npos ? "" : spec.substr(colon + 1));
  const Corrections corrections = args.corrections();
  const std::uint64_t eager_bytes = args.eager_bytes();
  const Time overhead = args.overhead();
  const int host_cpus = args.host_cpus();
  const bool pair_fifo = args.pair_fifo();
  Topology t;
  if (name == "switch")
    t = make_switch(args);
  else if (name == "ring")
    t = make_ring(args);
  else if (name == "torus2d")
    t = make_torus(args, 2);
  else if (name == "torus3d")
    t = make_torus(args, 3);
  else if (name == "fat-tree")
    t = make_fat_tree(args);
  else if (name == "nodes")
    t = make_nodes(args);
  else
    throw InvalidArgument(
        fmt::format("topology: unknown generator '{}' (allowed: switch, ring, torus2d, torus3d, "
                    "fat-tree, nodes, or a JSON file path)",
                    name));
  t.description = std::string(spec);
  t.corrections = corrections;
  t.eager_bytes = eager_bytes;
  t.overhead = overhead;
  t.host_cpus = host_cpus;
  t.pair_fifo = pair_fifo;
  t.validate(fmt::format("topology {}", name));
  return t;
}

}  // namespace cclab::sim
