// Link use by tier against the bytes each algorithm must move, worked out by
// hand from its steps.
#include "cclab/sim/link_use.h"

#include <map>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cclab/collectives/algorithms.h"

namespace cclab::sim {
namespace {

using coll::Algorithm;
using coll::CollectiveKind;

constexpr std::uint64_t kCount = 1 << 18;  // f32 elements: S = 1 MiB
constexpr double kS = 4.0 * kCount;

SimResult run(const Topology& t, Algorithm algo) {
  const auto sched = coll::make_schedule(
      {CollectiveKind::kAllReduce, static_cast<int>(t.num_endpoints()), kCount, 0},
      {algo, 1, t.group_size_hint});
  return simulate(t, *sched);
}

std::map<std::string, LinkTier> by_name(const std::vector<LinkTier>& tiers) {
  std::map<std::string, LinkTier> out;
  for (const LinkTier& tier : tiers) out[tier.name] = tier;
  return out;
}

// A ring of 4 on a switch: every rank sends 2(n-1) pieces of S/n, 1.5 S, up
// its link, and receives as much down its link.
TEST(LinkUse, RingOnASwitchLoadsEveryLinkAlike) {
  const Topology t = generate_topology("switch:n=4,bw=10GBps,lat=1us");
  const SimResult r = run(t, Algorithm::kRing);
  const auto tiers = link_tiers(t, r);
  ASSERT_EQ(tiers.size(), 2u);
  EXPECT_EQ(tiers[0].name, "host->switch 10 GB/s");
  EXPECT_EQ(tiers[1].name, "switch->host 10 GB/s");
  const double u = 1.5 * kS / (10e9 * time_to_seconds(r.total));
  for (const LinkTier& tier : tiers) {
    EXPECT_EQ(tier.links, 4);
    EXPECT_EQ(tier.used, 4);
    EXPECT_DOUBLE_EQ(tier.bytes, 4 * 1.5 * kS);
    EXPECT_NEAR(tier.mean_utilisation, u, 1e-12);
    EXPECT_NEAR(tier.max_utilisation, u, 1e-12);
  }
}

// 2 nodes of 2 GPUs (ranks n0.gpu0, n0.gpu1, n1.gpu0, n1.gpu1). The flat
// ring's 1.5 S a rank crosses the NICs for the two neighbours on different
// nodes and the NVSwitch for the other two: each tier carries 3 S on 2 of
// its 4 links. hier reduce-scatters in each node (S/2 a GPU), all-reduces
// its half with the other node's same GPU (a ring of 2 on S/2: S/2 each),
// and all-gathers in the node (S/2): S a GPU on NVLink, S/2 on its rail.
TEST(LinkUse, NodesTiersShowWhereTheRingAndHierMoveTheirBytes) {
  const Topology t = generate_topology("nodes:nodes=2,gpus=2,nvlink=450GBps,nic=400Gbps");
  const auto ring = by_name(link_tiers(t, run(t, Algorithm::kRing)));
  const auto hier = by_name(link_tiers(t, run(t, Algorithm::kHierarchical)));
  ASSERT_EQ(ring.size(), 6u);
  for (const char* name : {"gpu->nvsw 450 GB/s", "nvsw->gpu 450 GB/s"}) {
    EXPECT_EQ(ring.at(name).links, 4) << name;
    EXPECT_EQ(ring.at(name).used, 2) << name;
    EXPECT_DOUBLE_EQ(ring.at(name).bytes, 3 * kS) << name;
    EXPECT_EQ(hier.at(name).used, 4) << name;
    EXPECT_DOUBLE_EQ(hier.at(name).bytes, 4 * kS) << name;
  }
  for (const char* name :
       {"gpu->nic 50 GB/s", "nic->net 50 GB/s", "net->nic 50 GB/s", "nic->gpu 50 GB/s"}) {
    EXPECT_EQ(ring.at(name).links, 4) << name;
    EXPECT_EQ(ring.at(name).used, 2) << name;
    EXPECT_DOUBLE_EQ(ring.at(name).bytes, 3 * kS) << name;
    EXPECT_EQ(hier.at(name).used, 4) << name;
    EXPECT_DOUBLE_EQ(hier.at(name).bytes, 4 * kS / 2) << name;
  }
}

// A 4x4 torus, hier in groups of a row: each row reduce-scatters and
// all-gathers in a ring towards +x (1.5 S a rank, on its x+ link), and
// between the rows each rank all-reduces its S/4 shard in a ring towards +y
// (2 x 3/4 x S/4 = 3/8 S on its y+ link). Nothing goes -x or -y: a tier per
// dimension and direction shows what one tier for the whole torus hid.
TEST(LinkUse, TorusTiersAreADimensionAndADirection) {
  const Topology t = generate_topology("torus2d:x=4,y=4,bw=10GBps");
  const auto hier = by_name(link_tiers(t, run(t, Algorithm::kHierarchical)));
  ASSERT_EQ(hier.size(), 4u);
  const std::map<std::string, double> per_link = {
      {"x+ 10 GB/s", 1.5 * kS}, {"x- 10 GB/s", 0}, {"y+ 10 GB/s", 0.375 * kS}, {"y- 10 GB/s", 0}};
  for (const auto& [name, bytes] : per_link) {
    EXPECT_EQ(hier.at(name).links, 16) << name;
    EXPECT_EQ(hier.at(name).used, bytes > 0 ? 16 : 0) << name;
    EXPECT_DOUBLE_EQ(hier.at(name).bytes, 16 * bytes) << name;
  }
}

// A leaf-spine of 2 leaves of 2 hosts: the ring's 1.5 S a rank goes up and
// down every host's link, and for the two neighbours on other leaves (1 to
// 2, 3 to 0) up one leaf's uplink and down the other's downlink, which the
// kinds of node alone (switch->switch) cannot tell apart.
TEST(LinkUse, FatTreeUplinksAndDownlinksAreTiersOfTheirOwn) {
  const Topology t = generate_topology("fat-tree:hosts=4,leaves=2,spines=1,bw=10GBps");
  const auto ring = by_name(link_tiers(t, run(t, Algorithm::kRing)));
  ASSERT_EQ(ring.size(), 4u);
  for (const char* name : {"host->leaf 10 GB/s", "leaf->host 10 GB/s"})
    EXPECT_DOUBLE_EQ(ring.at(name).bytes, 4 * 1.5 * kS) << name;
  for (const char* name : {"leaf->spine 10 GB/s", "spine->leaf 10 GB/s"}) {
    EXPECT_EQ(ring.at(name).links, 2) << name;
    EXPECT_DOUBLE_EQ(ring.at(name).bytes, 2 * 1.5 * kS) << name;
  }
}

// Links without a tier name fall back to the kinds of node they join.
TEST(LinkUse, UnnamedLinksAreTieredByTheKindsOfNodeTheyJoin) {
  Topology t;
  const NodeId sw = t.add_node(NodeKind::kSwitch, "sw", true);
  for (int i = 0; i < 2; ++i) t.add_duplex(t.add_endpoint(fmt::format("e{}", i)), sw, 1e9, 1000);
  const auto tiers = by_name(link_tiers(t, run(t, Algorithm::kRing)));
  EXPECT_EQ(tiers.at("endpoint->switch 1 GB/s").links, 2);
  EXPECT_EQ(tiers.at("switch->endpoint 1 GB/s").links, 2);
}

// The busiest links: only links that carried bytes, the highest
// utilisation first; the ring's 1.5 S on a 50 GB/s NIC link beats it on
// 450 GB/s NVLink.
TEST(LinkUse, BusiestLinksComeFirstAndIdleOnesNotAtAll) {
  const Topology t = generate_topology("nodes:nodes=2,gpus=2,nvlink=450GBps,nic=400Gbps");
  const SimResult r = run(t, Algorithm::kRing);
  const auto all = busiest_links(t, r, 100);
  ASSERT_EQ(all.size(), 12u);  // 2 used links in each of 6 tiers
  for (std::size_t i = 1; i < all.size(); ++i)
    EXPECT_GE(link_utilisation(t, r, all[i - 1]), link_utilisation(t, r, all[i]));
  for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(t.link(all[i]).bw_bps, 50e9) << i;
  EXPECT_EQ(all.front(), r.bottleneck);
  EXPECT_EQ(busiest_links(t, r, 3), std::vector<LinkId>(all.begin(), all.begin() + 3));
  EXPECT_TRUE(busiest_links(t, r, 0).empty());
}

}  // namespace
}  // namespace cclab::sim
