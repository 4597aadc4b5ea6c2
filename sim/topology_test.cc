// Units, generators, the JSON format, routing, and the errors of each: every
// bad input must be an InvalidArgument whose message names the field.
#include "cclab/sim/topology.h"

#include <map>
#include <set>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cclab/collectives/error.h"
#include "cclab/sim/routing.h"
#include "cclab/sim/units.h"
#include "cclab/test/errors.h"

namespace cclab::sim {
namespace {

using cclab::test::expect_invalid;

TEST(Units, BandwidthAndLatency) {
  EXPECT_DOUBLE_EQ(parse_bandwidth("100Gbps", "bw"), 100e9 / 8);  // bits -> bytes
  EXPECT_DOUBLE_EQ(parse_bandwidth("450GBps", "bw"), 450e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("12.5MBps", "bw"), 12.5e6);
  EXPECT_EQ(parse_latency("1us", "lat"), 1'000'000);  // picoseconds
  EXPECT_EQ(parse_latency("200ns", "lat"), 200'000);
  EXPECT_EQ(parse_latency("2ms", "lat"), 2'000'000'000);
  EXPECT_EQ(parse_latency("0", "lat"), 0);
  expect_invalid([] { parse_bandwidth("-5Gbps", "links[0].bw"); },
                 "links[0].bw: bandwidth must be positive");
  expect_invalid([] { parse_bandwidth("100Gb", "bw"); }, "bw: malformed bandwidth '100Gb'");
  expect_invalid([] { parse_latency("-1us", "lat"); }, "lat: latency must not be negative");
  expect_invalid([] { parse_latency("fast", "lat"); }, "lat: malformed latency");
}

TEST(Generators, Shapes) {
  // switch: n endpoints + 1 switch, 2 directed links per endpoint.
  const Topology sw = generate_topology("switch:n=8,bw=100Gbps,lat=1us");
  EXPECT_EQ(sw.num_endpoints(), 8u);
  EXPECT_EQ(sw.num_nodes(), 9u);
  EXPECT_EQ(sw.num_links(), 16u);
  // ring of 5: 5 duplex pairs; ring of 2: one pair.
  EXPECT_EQ(generate_topology("ring:n=5").num_links(), 10u);
  EXPECT_EQ(generate_topology("ring:n=2").num_links(), 2u);
  // torus 4x3: every node links +x and +y once, duplex: 12 * 2 * 2.
  EXPECT_EQ(generate_topology("torus2d:x=4,y=3").num_links(), 48u);
  // 2x2 torus: a dimension of 2 is one pair per row/column: (2 + 2) pairs.
  EXPECT_EQ(generate_topology("torus2d:x=2,y=2").num_links(), 8u);
  // torus 4x3x2: +x and +y from all 24 nodes, +z once (from the 12 at z = 0),
  // duplex: (24 + 24 + 12) * 2; 2x2x2: 4 pairs in each dimension, * 2.
  EXPECT_EQ(generate_topology("torus3d:x=4,y=3,z=2").num_links(), 120u);
  EXPECT_EQ(generate_topology("torus3d:x=2,y=2,z=2").num_links(), 24u);
  EXPECT_EQ(generate_topology("torus3d:x=4,y=3,z=2").num_endpoints(), 24u);
  // fat tree: 8 host links + 2 leaves * 2 spines, duplex.
  const Topology ft =
      generate_topology("fat-tree:hosts=8,leaves=2,spines=2,bw=100Gbps,uplink=50Gbps");
  EXPECT_EQ(ft.num_links(), 2u * (8 + 4));
  // 3 tiers: 16 host links, 2 pods * (2 leaves * 2 spines + 2 spines * 3 cores).
  const Topology ft3 =
      generate_topology("fat-tree:tiers=3,pods=2,hosts=16,leaves=4,spines=2,cores=3");
  EXPECT_EQ(ft3.num_endpoints(), 16u);
  EXPECT_EQ(ft3.num_links(), 2u * (16 + 2 * (2 * 2 + 2 * 3)));
  // nodes: per GPU nvlink + pcie + nic uplink, duplex; group hint = gpus.
  const Topology nodes = generate_topology("nodes:nodes=2,gpus=4");
  EXPECT_EQ(nodes.num_endpoints(), 8u);
  EXPECT_EQ(nodes.num_links(), 8u * 3 * 2);
  EXPECT_EQ(nodes.group_size_hint, 4);
}

std::map<std::string, int> links_per_tier(const Topology& t) {
  std::map<std::string, int> count;
  for (LinkId l = 0; l < static_cast<LinkId>(t.num_links()); ++l)
    ++count[std::string(t.link_tier(l))];
  return count;
}

// Every generated link is in a named tier; the counts are the shapes' above.
TEST(Generators, TierNames) {
  using Counts = std::map<std::string, int>;
  // 4x3x2: 24 links each way in x and in y, 12 in z (a dimension of 2).
  EXPECT_EQ(links_per_tier(generate_topology("torus3d:x=4,y=3,z=2")),
            (Counts{{"x+", 24}, {"x-", 24}, {"y+", 24}, {"y-", 24}, {"z+", 12}, {"z-", 12}}));
  EXPECT_EQ(links_per_tier(generate_topology("ring:n=5")), (Counts{{"ring+", 5}, {"ring-", 5}}));
  EXPECT_EQ(links_per_tier(generate_topology("switch:n=3,fabric=1GBps")),
            (Counts{{"host->switch", 3}, {"switch->host", 3}, {"fabric", 1}}));
  EXPECT_EQ(links_per_tier(
                generate_topology("fat-tree:tiers=3,pods=2,hosts=16,leaves=4,spines=2,cores=3")),
            (Counts{{"host->leaf", 16},
                    {"leaf->host", 16},
                    {"leaf->spine", 8},
                    {"spine->leaf", 8},
                    {"spine->core", 12},
                    {"core->spine", 12}}));
  EXPECT_EQ(links_per_tier(generate_topology("nodes:nodes=2,gpus=4")), (Counts{{"gpu->nvsw", 8},
                                                                               {"nvsw->gpu", 8},
                                                                               {"gpu->nic", 8},
                                                                               {"nic->gpu", 8},
                                                                               {"nic->net", 8},
                                                                               {"net->nic", 8}}));
}

// A torus with two or more in every dimension offers hier all-reduce its
// dimensions as rotated levels (rows, then planes); other shapes offer none.
TEST(Generators, TorusLevelHints) {
  const Topology flat = generate_topology("torus2d:x=4,y=3");
  EXPECT_EQ(flat.group_size_hint, 4);
  EXPECT_TRUE(flat.upper_groups_hint.empty());
  EXPECT_TRUE(flat.rotate_levels_hint);
  const Topology cube = generate_topology("torus3d:x=4,y=3,z=2");
  EXPECT_EQ(cube.group_size_hint, 4);
  EXPECT_EQ(cube.upper_groups_hint, std::vector<int>{3});
  EXPECT_TRUE(cube.rotate_levels_hint);
  for (const char* none :
       {"torus2d:x=8,y=1", "torus3d:x=4,y=4,z=1", "torus3d:x=1,y=4,z=4", "ring:n=8", "switch:n=8",
        "nodes:nodes=2,gpus=4", "fat-tree:hosts=8,leaves=2,spines=1"}) {
    const Topology t = generate_topology(none);
    EXPECT_TRUE(t.upper_groups_hint.empty()) << none;
    EXPECT_FALSE(t.rotate_levels_hint) << none;
  }
}

TEST(Generators, Errors) {
  expect_invalid([] { generate_topology("mesh:n=4"); }, "unknown generator 'mesh'");
  expect_invalid([] { generate_topology("switch:bw=1Gbps"); }, "topology switch: n: missing field");
  expect_invalid([] { generate_topology("switch:n=4,bw=-1Gbps"); },
                 "topology switch: bw: bandwidth must be positive");
  expect_invalid([] { generate_topology("switch:n=4,speed=1Gbps"); }, "unknown key 'speed'");
  expect_invalid([] { generate_topology("switch:n=4,bw=100Gbps,bw=1Gbps"); },
                 "topology switch: bw given twice ('100Gbps' and '1Gbps')");
  expect_invalid([] { generate_topology("ring:n=zero"); },
                 "topology ring: n: 'zero' is not an integer");
  expect_invalid([] { generate_topology("fat-tree:hosts=7,leaves=2,spines=1"); }, "leaves");
  expect_invalid(
      [] { generate_topology("fat-tree:tiers=3,pods=3,hosts=8,leaves=4,spines=1,cores=1"); },
      "topology fat-tree: pods: 4 leaves do not divide evenly over 3 pods");
  expect_invalid([] { generate_topology("fat-tree:tiers=4,hosts=8,leaves=4,spines=1"); },
                 "topology fat-tree: tiers: must be 2 or 3");
  expect_invalid([] { generate_topology("fat-tree:pods=2,hosts=8,leaves=4,spines=1"); },
                 "unknown key 'pods'");
}

TEST(Json, ParsesAndNamesFields) {
  const std::string good = R"({"nodes": [{"name": "a", "kind": "endpoint"},
      {"name": "b", "kind": "endpoint"}, {"name": "s", "kind": "switch"}],
      "links": [{"from": "a", "to": "s", "bw": "10GBps", "lat": "1us"},
                {"from": "b", "to": "s", "bw": "10GBps", "lat": "1us"}], "group_size": 2})";
  const Topology t = parse_topology_json(good, "t.json");
  EXPECT_EQ(t.num_endpoints(), 2u);
  EXPECT_EQ(t.num_links(), 4u);
  EXPECT_EQ(t.group_size_hint, 2);
  EXPECT_TRUE(t.upper_groups_hint.empty());
  EXPECT_FALSE(t.rotate_levels_hint);
  // hier all-reduce's levels above the groups, named where they are wrong.
  const auto with = [&](const std::string& levels) {
    std::string text = good;
    return parse_topology_json(text.insert(text.rfind('}'), levels), "t.json");
  };
  const Topology levels = with(R"(, "upper_groups": [3, 2], "rotate_levels": true)");
  EXPECT_EQ(levels.upper_groups_hint, (std::vector<int>{3, 2}));
  EXPECT_TRUE(levels.rotate_levels_hint);
  expect_invalid([&] { with(R"(, "upper_groups": [1])"); },
                 "t.json.upper_groups[0]: expected an integer from 2 to 1048576 (got 1)");
  expect_invalid([&] { with(R"(, "upper_groups": 4)"); },
                 "t.json.upper_groups: expected an array of integers (got 4)");
  expect_invalid([&] { with(R"(, "rotate_levels": "yes")"); },
                 "t.json.rotate_levels: expected true or false (got \"yes\")");
  expect_invalid(
      [] {
        parse_topology_json(
            R"({"nodes": [{"name": "a", "kind": "endpoint"}], "links": [], "upper_groups": [2]})",
            "t.json");
      },
      "t.json.upper_groups: levels above groups need a group_size of at least 2 (got 0)");
  expect_invalid([] { parse_topology_json(R"({"nodes": []})", "t.json"); },
                 "t.json.links: missing field");
  // Which of two values was meant is not ours to guess (nlohmann keeps the last).
  expect_invalid(
      [] {
        parse_topology_json(
            R"({"nodes": [{"name": "a", "kind": "endpoint"}, {"name": "b", "kind": "endpoint"}],
          "links": [{"from": "a", "to": "b", "bw": "100Gbps", "lat": "1us", "bw": "1Gbps"}]})",
            "t.json");
      },
      "t.json: key 'bw' given twice in one object");
  expect_invalid(
      [] {
        parse_topology_json(
            R"({"nodes": [{"name": "a", "kind": "endpoint"}, {"name": "s", "kind": "switch"}],
          "links": [{"from": "a", "to": "s", "bw": "-3GBps", "lat": "1us"}]})",
            "t.json");
      },
      "t.json.links[0].bw: bandwidth must be positive");
  expect_invalid(
      [] {
        parse_topology_json(
            R"({"nodes": [{"name": "a", "kind": "endpoint"}], "links": [{"from": "a", "to": "x", "bw": "1GBps", "lat": "1us"}]})",
            "t.json");
      },
      "t.json.links[0].to: unknown node 'x'");
  expect_invalid(
      [] {
        parse_topology_json(R"({"nodes": [{"name": "a", "kind": "router"}], "links": []})",
                            "t.json");
      },
      "t.json.nodes[0].kind: unknown kind 'router'");
  // Tier names: "tier" the way from->to, "tier_back" the way back (default
  // the same), none without either.
  const Topology named = parse_topology_json(
      R"({"nodes": [{"name": "a", "kind": "endpoint"}, {"name": "b", "kind": "endpoint"},
          {"name": "s", "kind": "switch"}],
          "links": [{"from": "a", "to": "s", "bw": "1GBps", "lat": "1us", "tier": "up",
                     "tier_back": "down"},
                    {"from": "b", "to": "s", "bw": "1GBps", "lat": "1us", "tier": "b"},
                    {"from": "a", "to": "b", "bw": "1GBps", "lat": "1us", "duplex": false}]})",
      "t.json");
  std::vector<std::string_view> tiers;
  for (LinkId l = 0; l < static_cast<LinkId>(named.num_links()); ++l)
    tiers.push_back(named.link_tier(l));
  EXPECT_EQ(tiers, (std::vector<std::string_view>{"up", "down", "b", "b", ""}));
  expect_invalid(
      [] {
        parse_topology_json(
            R"({"nodes": [{"name": "a", "kind": "endpoint"}, {"name": "b", "kind": "endpoint"}],
          "links": [{"from": "a", "to": "b", "bw": "1GBps", "lat": "1us", "tier": 3}]})",
            "t.json");
      },
      "t.json.links[0].tier: expected a string (got 3)");
  expect_invalid(
      [] {
        parse_topology_json(
            R"({"nodes": [{"name": "a", "kind": "endpoint"}, {"name": "b", "kind": "endpoint"}],
          "links": [{"from": "a", "to": "b", "bw": "1GBps", "lat": "1us", "duplex": false,
                     "tier_back": "x"}, {"from": "b", "to": "a", "bw": "1GBps", "lat": "1us",
                     "duplex": false}]})",
            "t.json");
      },
      "t.json.links[0].tier_back: a link with \"duplex\": false has no way back");
  // Two endpoints with no link between them.
  expect_invalid(
      [] {
        parse_topology_json(
            R"({"nodes": [{"name": "a", "kind": "endpoint"}, {"name": "b", "kind": "endpoint"}], "links": []})",
            "t.json");
      },
      "t.json: disconnected: endpoint 'b'");
}

TEST(Corrections, BandsParseLookUpAndNameTheirErrors) {
  const Topology t = generate_topology("switch:n=2,latf=0:3/64K:1,bwf=1K:0.5/1M:0.9");
  const Corrections& c = t.corrections;
  EXPECT_DOUBLE_EQ(c.latency_factor(0), 3);
  EXPECT_DOUBLE_EQ(c.latency_factor(65535), 3);
  EXPECT_DOUBLE_EQ(c.latency_factor(65536), 1);
  EXPECT_DOUBLE_EQ(c.bandwidth_factor(1023), 1) << "below the first band: no correction";
  EXPECT_DOUBLE_EQ(c.bandwidth_factor(1024), 0.5);
  EXPECT_DOUBLE_EQ(c.bandwidth_factor(1 << 20), 0.9);
  EXPECT_TRUE(generate_topology("switch:n=2").corrections.empty()) << "off by default";
  expect_invalid([] { generate_topology("switch:n=2,bwf=0:0"); },
                 "topology switch: bwf: band 0 factor must be positive");
  expect_invalid([] { generate_topology("switch:n=2,latf=1K:2/1K:3"); },
                 "latf: band 1 starts at 1024 B, not after band 0");
  expect_invalid([] { generate_topology("switch:n=2,latf=2"); }, "latf: '2' is not from:factor");
  expect_invalid([] { generate_topology("switch:n=2,bwf=1X:2"); }, "bwf: '1X' is not a byte count");
  const std::string links =
      R"("nodes": [{"name": "a", "kind": "endpoint"}, {"name": "b", "kind": "endpoint"}],
         "links": [{"from": "a", "to": "b", "bw": "1GBps", "lat": "1us"}])";
  const Topology j = parse_topology_json(
      "{" + links + R"(, "latency_factor": [[0, 2], [4096, 1]], "bandwidth_factor": "0:0.8"})",
      "t.json");
  EXPECT_DOUBLE_EQ(j.corrections.latency_factor(100), 2);
  EXPECT_DOUBLE_EQ(j.corrections.latency_factor(5000), 1);
  EXPECT_DOUBLE_EQ(j.corrections.bandwidth_factor(5000), 0.8);
  expect_invalid(
      [&] { parse_topology_json("{" + links + R"(, "latency_factor": [[0]]})", "t.json"); },
      "t.json.latency_factor[0]: expected [from_bytes, factor]");
  expect_invalid(
      [&] { parse_topology_json("{" + links + R"(, "bandwidth_factor": [[0, -1]]})", "t.json"); },
      "t.json.bandwidth_factor: band 0 factor must be positive");
}

TEST(Eager, LimitParsesFromSpecAndJsonAndNamesItsErrors) {
  EXPECT_EQ(generate_topology("switch:n=2").eager_bytes, 0u) << "off by default";
  EXPECT_EQ(generate_topology("switch:n=2,eager=64K").eager_bytes, 65536u);
  EXPECT_EQ(generate_topology("torus2d:x=2,y=2,eager=100").eager_bytes, 100u);
  expect_invalid([] { generate_topology("switch:n=2,eager=lots"); },
                 "topology switch: eager: 'lots' is not a byte count");
  expect_invalid([] { generate_topology("switch:n=2,eagre=1K"); },
                 "unknown key 'eagre' (allowed: n, bw, lat, reduce, fabric, latf, bwf, eager, "
                 "overhead, cpus, pairs)");
  const std::string links =
      R"("nodes": [{"name": "a", "kind": "endpoint"}, {"name": "b", "kind": "endpoint"}],
         "links": [{"from": "a", "to": "b", "bw": "1GBps", "lat": "1us"}])";
  EXPECT_EQ(parse_topology_json("{" + links + R"(, "eager": "4K"})", "t.json").eager_bytes, 4096u);
  EXPECT_EQ(parse_topology_json("{" + links + R"(, "eager": 300})", "t.json").eager_bytes, 300u);
  EXPECT_EQ(parse_topology_json("{" + links + "}", "t.json").eager_bytes, 0u);
  expect_invalid([&] { parse_topology_json("{" + links + R"(, "eager": -1})", "t.json"); },
                 "t.json.eager: expected a byte count >= 0 or a string such as \"64K\" (got -1)");
  expect_invalid([&] { parse_topology_json("{" + links + R"(, "eager": "1X"})", "t.json"); },
                 "t.json.eager: '1X' is not a byte count");
}

TEST(PairFifo, ParsesFromSpecAndJsonAndNamesItsErrors) {
  EXPECT_TRUE(generate_topology("switch:n=2").pair_fifo) << "fifo by default";
  EXPECT_FALSE(generate_topology("switch:n=2,pairs=shared").pair_fifo);
  EXPECT_TRUE(generate_topology("nodes:nodes=2,gpus=2,pairs=fifo").pair_fifo);
  EXPECT_FALSE(generate_topology("nodes:nodes=2,gpus=2,pairs=shared").pair_fifo);
  expect_invalid([] { generate_topology("switch:n=2,pairs=lifo"); },
                 "topology switch: pairs: expected fifo or shared (got 'lifo')");
  const std::string links =
      R"("nodes": [{"name": "a", "kind": "endpoint"}, {"name": "b", "kind": "endpoint"}],
         "links": [{"from": "a", "to": "b", "bw": "1GBps", "lat": "1us"}])";
  EXPECT_TRUE(parse_topology_json("{" + links + R"(, "pairs": "fifo"})", "t.json").pair_fifo);
  EXPECT_TRUE(parse_topology_json("{" + links + "}", "t.json").pair_fifo) << "fifo by default";
  EXPECT_FALSE(parse_topology_json("{" + links + R"(, "pairs": "shared"})", "t.json").pair_fifo);
  expect_invalid([&] { parse_topology_json("{" + links + R"(, "pairs": "queue"})", "t.json"); },
                 "t.json.pairs: expected fifo or shared (got 'queue')");
}

TEST(Overhead, ParsesFromSpecAndJsonAndNamesItsErrors) {
  EXPECT_EQ(generate_topology("switch:n=2").overhead, 0) << "off by default";
  EXPECT_EQ(generate_topology("switch:n=2,overhead=2us").overhead, 2'000'000);
  EXPECT_EQ(generate_topology("nodes:nodes=2,gpus=2,overhead=500ns").overhead, 500'000);
  expect_invalid([] { generate_topology("switch:n=2,overhead=-1us"); },
                 "topology switch: overhead: latency must not be negative");
  expect_invalid([] { generate_topology("switch:n=2,overhead=fast"); },
                 "topology switch: overhead: malformed latency 'fast'");
  EXPECT_EQ(generate_topology("switch:n=4,overhead=1us").host_cpus, 0) << "a CPU per rank";
  EXPECT_EQ(generate_topology("switch:n=4,overhead=1us,cpus=2").host_cpus, 2);
  expect_invalid([] { generate_topology("switch:n=4,cpus=0"); },
                 "topology switch: cpus: must be between 1 and");
  expect_invalid([] { generate_topology("switch:n=4,cpus=two"); },
                 "topology switch: cpus: 'two' is not an integer");
  const std::string links =
      R"("nodes": [{"name": "a", "kind": "endpoint"}, {"name": "b", "kind": "endpoint"}],
         "links": [{"from": "a", "to": "b", "bw": "1GBps", "lat": "1us"}])";
  EXPECT_EQ(parse_topology_json("{" + links + R"(, "overhead": "3us"})", "t.json").overhead,
            3'000'000);
  EXPECT_EQ(parse_topology_json("{" + links + "}", "t.json").overhead, 0);
  expect_invalid([&] { parse_topology_json("{" + links + R"(, "overhead": 3})", "t.json"); },
                 "t.json.overhead: expected a string (got 3)");
  EXPECT_EQ(parse_topology_json("{" + links + R"(, "cpus": 2})", "t.json").host_cpus, 2);
  expect_invalid([&] { parse_topology_json("{" + links + R"(, "cpus": 0})", "t.json"); },
                 "t.json.cpus: expected an integer from 1 to 4194304 (got 0)");
  expect_invalid(
      [&] { parse_topology_json("{" + links + R"(, "overhead": "3 parsecs"})", "t.json"); },
      "t.json.overhead: malformed latency '3 parsecs'");
}

TEST(Routing, ShortestPathsAndEcmp) {
  // Ring of 6: the route from 0 to 2 is two hops clockwise, to 3 three hops
  // (either way; ECMP picks one, the same one every time).
  const Topology ring = generate_topology("ring:n=6,lat=1us");
  Router router(ring);
  EXPECT_EQ(router.route(ring.endpoint(0), ring.endpoint(2)).links.size(), 2u);
  EXPECT_EQ(router.route(ring.endpoint(0), ring.endpoint(2)).latency, 2'000'000);
  const Route& r03 = router.route(ring.endpoint(0), ring.endpoint(3));
  EXPECT_EQ(r03.links.size(), 3u);
  Router again(ring);
  const auto links = [](const Route& r) {
    return std::vector<LinkId>(r.links.begin(), r.links.end());
  };
  EXPECT_EQ(links(again.route(ring.endpoint(0), ring.endpoint(3))), links(r03));
  // nodes: inside a node through the NVSwitch (2 hops), across through the NICs (4).
  const Topology nodes = generate_topology("nodes:nodes=2,gpus=4");
  Router nr(nodes);
  EXPECT_EQ(nr.route(nodes.endpoint(0), nodes.endpoint(3)).links.size(), 2u);
  EXPECT_EQ(nr.route(nodes.endpoint(0), nodes.endpoint(4)).links.size(), 4u);
  // Fat tree with 4 spines: cross-leaf routes spread over several spines.
  const Topology ft = generate_topology("fat-tree:hosts=32,leaves=2,spines=4");
  Router fr(ft);
  std::set<LinkId> uplinks;
  for (int h = 0; h < 16; ++h)
    uplinks.insert(fr.route(ft.endpoint(h), ft.endpoint(16 + h)).links[1]);
  EXPECT_GT(uplinks.size(), 1u);
  EXPECT_EQ(fr.cached_routes(), 16u);
}

TEST(Routing, ThreeTierFatTreeHopCounts) {
  // h0..h3 on leaf0, h4..h7 on leaf1 (pod 0); h8.. on leaf2 (pod 1).
  const Topology t =
      generate_topology("fat-tree:tiers=3,pods=2,hosts=16,leaves=4,spines=2,cores=4,lat=1us");
  Router r(t);
  EXPECT_EQ(r.route(t.endpoint(0), t.endpoint(1)).links.size(), 2u);  // same leaf
  EXPECT_EQ(r.route(t.endpoint(0), t.endpoint(4)).links.size(), 4u);  // same pod
  const Route& across = r.route(t.endpoint(0), t.endpoint(8));        // across pods
  ASSERT_EQ(across.links.size(), 6u);
  EXPECT_EQ(across.latency, parse_latency("6us", "test"));
  EXPECT_EQ(t.node(t.link(across.links[2]).to).kind, NodeKind::kSwitch);
  EXPECT_EQ(t.node(t.link(across.links[2]).to).name.substr(0, 4), "core");
  // ECMP spreads the pairs of pod 0 x pod 1 over the cores.
  std::set<NodeId> cores;
  for (int h = 0; h < 8; ++h)
    cores.insert(t.link(r.route(t.endpoint(h), t.endpoint(8 + h)).links[2]).to);
  EXPECT_GT(cores.size(), 1u);
}

// Hop distance from a to b through transit nodes only, by a plain BFS over
// Topology's own lists: the reference the router's split, sorted view of the
// same graph must agree with. -1: no route.
int reference_hops(const Topology& t, NodeId a, NodeId b) {
  std::vector<int> dist(t.num_nodes(), -1);
  std::vector<NodeId> queue{a};
  dist[a] = 0;
  for (std::size_t i = 0; i < queue.size(); ++i) {
    const NodeId n = queue[i];
    if (n == b) return dist[n];
    if (n != a && !t.node(n).transit) continue;  // may end here, not pass through
    for (LinkId l : t.node(n).out)
      if (dist[t.link(l).to] < 0) {
        dist[t.link(l).to] = dist[n] + 1;
        queue.push_back(t.link(l).to);
      }
  }
  return -1;
}

// Every route between endpoints of t, both ways: a chain of links from source
// to destination, as short as the reference says, entering non-transit nodes
// only at its end. Returns the first hop of each route from endpoint 0.
std::set<LinkId> expect_shortest_chains(const Topology& t) {
  Router router(t);
  std::set<LinkId> first_hops_of_0;
  for (std::size_t i = 0; i < t.num_endpoints(); ++i)
    for (std::size_t j = 0; j < t.num_endpoints(); ++j) {
      const NodeId a = t.endpoint(static_cast<int>(i)), b = t.endpoint(static_cast<int>(j));
      const std::string pair = t.description + ": " + t.node(a).name + " -> " + t.node(b).name;
      const Route& r = router.route(a, b);
      EXPECT_EQ(static_cast<int>(r.links.size()), reference_hops(t, a, b)) << pair;
      NodeId at = a;
      for (std::size_t h = 0; h < r.links.size(); ++h) {
        EXPECT_EQ(t.link(r.links[h]).from, at) << pair;
        at = t.link(r.links[h]).to;
        if (h + 1 < r.links.size()) {
          EXPECT_TRUE(t.node(at).transit) << pair << " passes through " << t.node(at).name;
        }
      }
      EXPECT_EQ(at, b) << pair;
      if (i == 0 && j > 0) first_hops_of_0.insert(r.links[0]);
    }
  return first_hops_of_0;
}

// A mixed graph: endpoints with parallel links to their switch, a switch with
// many endpoints, a transit endpoint (a host that forwards) between two
// switches, a one-way switch-to-switch link, an endpoint of many ports.
TEST(Routing, EveryRouteIsAShortestChainThroughTransitNodes) {
  Topology t;
  t.description = "mixed";
  const double bw = 1e9;
  const NodeId s0 = t.add_node(NodeKind::kSwitch, "s0", true);
  const NodeId s1 = t.add_node(NodeKind::kSwitch, "s1", true);
  const NodeId s2 = t.add_node(NodeKind::kSwitch, "s2", true);
  for (int i = 0; i < 2; ++i) {  // e0, e1: two links each way to s0
    const NodeId e = t.add_endpoint(fmt::format("e{}", i));
    t.add_duplex(e, s0, bw, 1000);
    t.add_duplex(e, s0, bw, 1000);
  }
  for (int i = 2; i < 40; ++i) t.add_duplex(t.add_endpoint(fmt::format("e{}", i)), s1, bw, 1000);
  const NodeId fwd = t.add_endpoint("fwd", /*transit=*/true);
  t.add_duplex(s1, fwd, bw, 1000);
  t.add_duplex(fwd, s2, bw, 1000);
  for (int i = 40; i < 44; ++i) t.add_duplex(t.add_endpoint(fmt::format("e{}", i)), s2, bw, 1000);
  t.add_duplex(s0, s1, bw, 1000);
  t.add_link(s2, s0, bw, 1000);  // one way only: s0 reaches s2 through fwd
  // Endpoints of many ports (20 links each way to each of two switches): as a
  // source the search grows from the destination alone, as a destination from
  // the source, and between the two from both.
  const NodeId fat = t.add_endpoint("fat"), fat2 = t.add_endpoint("fat2");
  for (int i = 0; i < 20; ++i) {
    t.add_duplex(fat, s0, bw, 1000);
    t.add_duplex(fat, s2, bw, 1000);
    t.add_duplex(fat2, s1, bw, 1000);
    t.add_duplex(fat2, s2, bw, 1000);
  }
  t.validate("test");
  // e0's two parallel uplinks both carry some of its 45 routes (ECMP by pair).
  EXPECT_EQ(expect_shortest_chains(t).size(), 2u);
}

// The generators' shapes, where the search meets in the middle of switches
// of many ports (nodes, fat trees) or crosses forwarding hosts (ring, torus).
TEST(Routing, EveryGeneratedRouteIsAShortestChain) {
  for (const char* spec : {"switch:n=9", "ring:n=7", "torus2d:x=4,y=3", "torus3d:x=3,y=4,z=2",
                           "nodes:nodes=3,gpus=4", "fat-tree:hosts=24,leaves=4,spines=3",
                           "fat-tree:tiers=3,pods=2,hosts=16,leaves=4,spines=2,cores=4"})
    expect_shortest_chains(generate_topology(spec));
}

}  // namespace
}  // namespace cclab::sim
