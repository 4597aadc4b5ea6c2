// The schedule runner against closed forms, and every all-reduce algorithm on
// every built-in topology.
#include "cclab/sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cclab/collectives/algorithms.h"
#include "cclab/collectives/error.h"
#include "cclab/collectives/selector.h"
#include "cclab/sim/routing.h"
#include "cclab/sim/topology.h"
#include "cclab/test/errors.h"
#include "test_util.h"

namespace cclab::sim {
namespace {

using coll::AlgoConfig;
using coll::Algorithm;
using coll::CollectiveKind;
using test::rel_err;

// Bytes on each link whose name runs from a node matching `from` to one
// matching `to` ("n0.gpu3->n0.nic3": from ".gpu" to ".nic"), in link order.
std::vector<double> bytes_between(const Topology& t, const SimResult& r, std::string_view from,
                                  std::string_view to) {
  std::vector<double> out;
  for (std::size_t l = 0; l < r.link_bytes.size(); ++l) {
    const std::string name = t.link_name(static_cast<LinkId>(l));
    const auto arrow = name.find("->");
    if (name.substr(0, arrow).find(from) != std::string::npos &&
        name.substr(arrow).find(to) != std::string::npos)
      out.push_back(r.link_bytes[l]);
  }
  return out;
}

double total(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

SimResult run(const std::string& spec, int ranks, std::uint64_t count, Algorithm algo,
              int chunks = 1) {
  const Topology t = generate_topology(spec);
  const auto sched =
      coll::make_schedule({CollectiveKind::kAllReduce, ranks, count, 0}, {algo, chunks, 0});
  return simulate(t, *sched, {4, nullptr});
}

// Ring all-reduce of S bytes over n ranks is 2(n-1) steps; in each, every rank
// sends S/n bytes to its right neighbour over links no other flow uses, so a
// step costs alpha + (S/n)/B, where alpha is the route latency.
double ring_closed_form_us(int n, double bytes, double alpha_us, double bw) {
  return 2.0 * (n - 1) * (alpha_us + bytes / n / bw * 1e6);
}

TEST(Simulator, RingOnSwitchMatchesClosedForm) {
  // switch: a route is up + down, alpha = 2 * 1us; B = 100 Gbps = 12.5e9 B/s.
  for (int n : {2, 3, 4, 8, 16}) {
    const std::uint64_t count = 1000 * n;  // S = 4000 n bytes, divisible by n
    const SimResult r = run("switch:n=16,bw=100Gbps,lat=1us", n, count, Algorithm::kRing);
    EXPECT_LT(rel_err(time_to_us(r.total), ring_closed_form_us(n, 4.0 * count, 2.0, 12.5e9)), 1e-6)
        << "n=" << n;
    // Symmetric: every rank finishes with the last one.
    EXPECT_EQ(*std::min_element(r.rank_finish.begin(), r.rank_finish.end()), r.total);
  }
}

TEST(Simulator, SwitchFabricIsSharedByEveryFlow) {
  // fabric=20GBps under 10 GB/s links: the n flows of a ring step share it,
  // min(bw, fabric/n) each; alpha = 2 * 1us still (the fabric adds none).
  for (int n : {2, 4, 8}) {
    const std::uint64_t count = 1000 * n;
    const SimResult r = run(fmt::format("switch:n={},bw=10GBps,lat=1us,fabric=20GBps", n), n, count,
                            Algorithm::kRing);
    const double per_flow = std::min(10e9, 20e9 / n);
    EXPECT_LT(rel_err(time_to_us(r.total), ring_closed_form_us(n, 4.0 * count, 2.0, per_flow)),
              1e-6)
        << "n=" << n;
  }
}

TEST(Simulator, CorrectionFactorsScaleLatencyAndBandwidthBySize) {
  // 2 ranks, direct all-reduce: one message of S bytes each way at once on
  // separate links, so the time is alpha * latf(S) + S / (B * bwf(S)), with
  // alpha = 2 us (up and down) and B = 12.5e9 B/s; below 64 KiB the bands say
  // latency x3 and half bandwidth, from 64 KiB latency x1 and 0.9.
  const std::string spec = "switch:n=2,bw=100Gbps,lat=1us,latf=0:3/64K:1,bwf=0:0.5/64K:0.9";
  for (std::uint64_t bytes : {std::uint64_t{4096}, std::uint64_t{1} << 20}) {
    const bool small = bytes < 65536;
    const double want = 2.0 * (small ? 3 : 1) + bytes / (12.5e9 * (small ? 0.5 : 0.9)) * 1e6;
    const SimResult r = run(spec, 2, bytes / 4, Algorithm::kDirect);
    EXPECT_LT(rel_err(time_to_us(r.total), want), 1e-6) << bytes << " B";
    // Without the factors, the plain closed form.
    const SimResult plain = run("switch:n=2,bw=100Gbps,lat=1us", 2, bytes / 4, Algorithm::kDirect);
    EXPECT_LT(rel_err(time_to_us(plain.total), 2.0 + bytes / 12.5e9 * 1e6), 1e-6) << bytes << " B";
  }
}

// Direct all-reduce of S bytes over n ranks with eager messages: every rank
// sends S to each of the n-1 others as it starts, so each up- and down-link
// carries n-1 flows at B/(n-1) from t = 0 and every piece has landed at
// alpha + (n-1) S/B. With reductions at R bytes/s a rank then reduces n-1
// pieces in rank order, + (n-1) S/R: the receives issued after their data
// landed complete at once. As a rendezvous, a rank receives its peers' pieces
// one after another (each receive waits for the reduction before it), so
// from 3 ranks the pieces queue behind each other.
TEST(Simulator, EagerDirectAllReduceSendsEveryPieceAtOnce) {
  const std::uint64_t count = 16384;  // S = 64 KiB: at the limit, so eager
  const double s = 4.0 * count;
  for (int n : {2, 3, 4, 8}) {
    const std::string base = fmt::format("switch:n={},bw=100Gbps,lat=1us", n);
    const double land_us = 2.0 + (n - 1) * s / 12.5e9 * 1e6;
    const SimResult eager = run(base + ",eager=64K", n, count, Algorithm::kDirect);
    EXPECT_LT(rel_err(time_to_us(eager.total), land_us), 1e-6) << "n=" << n;
    const SimResult reduced = run(base + ",eager=64K,reduce=10GBps", n, count, Algorithm::kDirect);
    EXPECT_LT(rel_err(time_to_us(reduced.total), land_us + (n - 1) * s / 10e9 * 1e6), 1e-6)
        << "n=" << n;
    // One byte below the message: every transfer a rendezvous, as with no limit.
    const SimResult below = run(base + ",eager=65535", n, count, Algorithm::kDirect);
    const SimResult rendezvous = run(base, n, count, Algorithm::kDirect);
    EXPECT_EQ(below.total, rendezvous.total) << "n=" << n;
    if (n == 2)
      EXPECT_EQ(rendezvous.total, eager.total) << "2 ranks: both receives are issued at once";
    else
      EXPECT_GT(rendezvous.total, eager.total + seconds_to_time(s / 12.5e9)) << "n=" << n;
    EXPECT_EQ(eager.link_bytes, rendezvous.link_bytes) << "the same bytes on the same links";
  }
}

// Ring's receives are issued before the sends that meet them, so eager
// messages change nothing: still the closed form.
TEST(Simulator, EagerRingIsStillTheClosedForm) {
  for (int n : {2, 4, 8}) {
    const std::uint64_t count = 1000 * n;
    const SimResult r = run("switch:n=8,bw=100Gbps,lat=1us,eager=1G", n, count, Algorithm::kRing);
    EXPECT_LT(rel_err(time_to_us(r.total), ring_closed_form_us(n, 4.0 * count, 2.0, 12.5e9)), 1e-6)
        << "n=" << n;
  }
}

// Eager messages change when bytes move, not which: every algorithm, with
// chunks whose sizes straddle the limit (a pair's queue then holds eager and
// rendezvous sends in turn; a match out of order would throw on the counts),
// puts the same bytes on every link as with rendezvous only, and takes at
// least the time the busiest link needs to carry them.
TEST(Simulator, EagerMessagesMoveTheSameBytes) {
  const Topology plain = generate_topology("nodes:nodes=2,gpus=4");
  // 1201 elements in 3 chunks: direct sends 401 and 400 elements (1604 and
  // 1600 bytes) to every peer; ring at 3 ranks 134 and 133 (536, 532 bytes).
  std::vector<Topology> eager;
  for (const char* limit : {"1600", "532", "1G"})
    eager.push_back(generate_topology(fmt::format("nodes:nodes=2,gpus=4,eager={}", limit)));
  for (Algorithm algo : coll::algorithms_for(CollectiveKind::kAllReduce)) {
    for (int n : {3, 8}) {
      const auto sched =
          coll::make_schedule({CollectiveKind::kAllReduce, n, 1201, 0}, {algo, 3, 0});
      SCOPED_TRACE(fmt::format("{} ranks {}", sched->name(), n));
      const SimResult want = simulate(plain, *sched);
      for (const Topology* t : {&eager[0], &eager[1], &eager[2]}) {
        const SimResult got = simulate(*t, *sched);
        EXPECT_EQ(got.link_bytes, want.link_bytes);
        EXPECT_EQ(got.flows, want.flows);
        for (std::size_t l = 0; l < got.link_bytes.size(); ++l)
          EXPECT_GE(
              time_to_seconds(got.total) * t->link(static_cast<LinkId>(l)).bw_bps * (1 + 1e-9),
              got.link_bytes[l])
              << t->link_name(static_cast<LinkId>(l));
      }
    }
  }
}

// A host overhead o adds 2o to every ring step: the sender's o before its
// data leaves, the receiver's once it has landed, and a step's send waits for
// the receive before it. Eager or rendezvous alike (ring's receives are
// issued before the sends that meet them).
TEST(Simulator, OverheadAddsTwiceItsTimeToEveryRingStep) {
  for (int n : {2, 4, 8}) {
    for (const char* eager : {"", ",eager=1G"}) {
      const std::uint64_t count = 1000 * n;
      const SimResult r = run(fmt::format("switch:n=8,bw=100Gbps,lat=1us,overhead=3us{}", eager), n,
                              count, Algorithm::kRing);
      const double want = ring_closed_form_us(n, 4.0 * count, 2.0, 12.5e9) + 2.0 * (n - 1) * 6.0;
      EXPECT_LT(rel_err(time_to_us(r.total), want), 1e-6) << "n=" << n << eager;
    }
  }
}

// Ranks that share CPUs for their message overheads wait for each other:
// eager direct (one-shot) with no latency and bandwidth to spare keeps one
// shared CPU busy from start to end, 2n(n-1) message ends of o in all; two
// CPUs halve that where the work splits evenly (every rank alike); as many
// CPUs as ranks is the same as a CPU per rank, 2(n-1)o.
TEST(Simulator, RanksSharingCpusWaitForEachOthersOverheads) {
  for (int n : {2, 3, 4}) {
    const auto spec = [](int cpus) {
      return fmt::format("switch:n=8,bw=1000000000TBps,lat=0,overhead=2us,eager=1G{}",
                         cpus > 0 ? fmt::format(",cpus={}", cpus) : "");
    };
    const auto us = [&](int cpus) {
      return time_to_us(run(spec(cpus), n, 4096, Algorithm::kDirect).total);
    };
    EXPECT_NEAR(us(1), 2.0 * n * (n - 1) * 2.0, 1e-3) << "n=" << n;
    if (n % 2 == 0) {
      EXPECT_NEAR(us(2), n * (n - 1) * 2.0, 1e-3) << "n=" << n;
    }
    EXPECT_NEAR(us(n), 2.0 * (n - 1) * 2.0, 1e-3) << "n=" << n;
    EXPECT_EQ(us(n), us(0)) << "n=" << n;
  }
}

// Sends and receives in rank `rank`'s program: the message ends its host handles.
int message_ends(const coll::Schedule& sched, int rank) {
  int ends = 0;
  coll::Program p = sched.program(rank);
  while (p.next()) ends += p.value().is_transfer() ? 1 : 0;
  return ends;
}

// A rank's host handles one message end at a time, so no rank finishes before
// o times its sends and receives (counted from the schedule), and the
// overhead moves no bytes: every algorithm, eager or not. Direct (one-shot)
// with no latency and bandwidth to spare meets the bound: n-1 sends and n-1
// receives, the host never idle (every send is issued at once, then the data
// is in when each receive gets the host).
TEST(Simulator, OverheadHandlesEachRanksMessagesOneAtATime) {
  const Time o = 2'000'000;  // 2 us
  for (const char* eager : {"", ",eager=1G"}) {
    const Topology plain = generate_topology(fmt::format("nodes:nodes=2,gpus=4{}", eager));
    const Topology host =
        generate_topology(fmt::format("nodes:nodes=2,gpus=4,overhead=2us{}", eager));
    for (Algorithm algo : coll::algorithms_for(CollectiveKind::kAllReduce)) {
      for (int n : {3, 8}) {
        const auto sched =
            coll::make_schedule({CollectiveKind::kAllReduce, n, 1201, 0}, {algo, 3, 0});
        SCOPED_TRACE(fmt::format("{} ranks {}{}", sched->name(), n, eager));
        const SimResult without = simulate(plain, *sched);
        const SimResult with = simulate(host, *sched);
        EXPECT_EQ(with.link_bytes, without.link_bytes);
        EXPECT_GT(with.total, without.total);
        int most = 0;
        for (int r = 0; r < n; ++r) {
          EXPECT_GE(with.rank_finish[r], message_ends(*sched, r) * o) << "rank " << r;
          most = std::max(most, message_ends(*sched, r));
        }
        // The busiest host: o for each of its message ends.
        EXPECT_NEAR(with.host_utilisation * time_to_us(with.total), most * 2.0, 1e-6);
        EXPECT_EQ(message_ends(*sched, with.busiest_host), most);
        EXPECT_EQ(without.busiest_host, -1);
      }
    }
  }
  for (int n : {3, 4, 8}) {
    for (const char* eager : {"", ",eager=1G"}) {
      const SimResult r =
          run(fmt::format("switch:n=8,bw=1000000000TBps,lat=0,overhead=2us{}", eager), n, 4096,
              Algorithm::kDirect);
      EXPECT_NEAR(time_to_us(r.total), 2.0 * (n - 1) * 2.0, 1e-3) << "n=" << n << eager;
    }
  }
}

TEST(Simulator, RingOnRingTopologyMatchesClosedForm) {
  // ring: neighbours share a direct link, alpha = 1 link = 500ns; B = 10e9 B/s.
  for (int n : {2, 3, 5, 8}) {
    const std::uint64_t count = 4096 * n;
    const SimResult r =
        run(fmt::format("ring:n={},bw=10GBps,lat=500ns", n), n, count, Algorithm::kRing);
    EXPECT_LT(rel_err(time_to_us(r.total), ring_closed_form_us(n, 4.0 * count, 0.5, 10e9)), 1e-6)
        << "n=" << n;
  }
}

// The bidirectional ring on a ring of direct links: each half of the data
// goes its own way round on links the other half does not use, so a step is
// the ring's on S/2: 2(n-1)(alpha + S/(2nB)). With two ranks both ways round
// are the one link (the ring's time); on a switch both halves leave through
// the rank's one link (the ring's time, in twice the messages).
TEST(Simulator, BiringHalvesTheRingsBandwidthTermWhereEachWayHasItsLinks) {
  for (int n : {3, 5, 8}) {
    const std::uint64_t count = 4096 * n;
    const SimResult r =
        run(fmt::format("ring:n={},bw=10GBps,lat=500ns", n), n, count, Algorithm::kBiRing);
    EXPECT_LT(rel_err(time_to_us(r.total), ring_closed_form_us(n, 2.0 * count, 0.5, 10e9)), 1e-6)
        << "n=" << n;
  }
  const SimResult two = run("ring:n=2,bw=10GBps,lat=500ns", 2, 8192, Algorithm::kBiRing);
  EXPECT_LT(rel_err(time_to_us(two.total), ring_closed_form_us(2, 4.0 * 8192, 0.5, 10e9)), 1e-6);
  for (int n : {3, 4, 8}) {
    const std::uint64_t count = 1000 * n;
    const SimResult r = run("switch:n=16,bw=100Gbps,lat=1us", n, count, Algorithm::kBiRing);
    EXPECT_LT(rel_err(time_to_us(r.total), ring_closed_form_us(n, 4.0 * count, 2.0, 12.5e9)), 1e-6)
        << "switch n=" << n;
  }
  // Reduce-scatter and all-gather: n-1 steps of half a block each way,
  // (n-1)(alpha + b/(2B)) for blocks of b bytes.
  for (auto kind : {CollectiveKind::kReduceScatter, CollectiveKind::kAllGather}) {
    const int n = 6;
    const std::uint64_t count = 5000;  // a rank's block: b = 20000 B
    const Topology t = generate_topology("ring:n=6,bw=10GBps,lat=500ns");
    const SimResult r =
        simulate(t, *coll::make_schedule({kind, n, count, 0}, {Algorithm::kBiRing, 1, 0}));
    EXPECT_LT(rel_err(time_to_us(r.total), (n - 1) * (0.5 + 2.0 * count / 10e9 * 1e6)), 1e-6)
        << coll::collective_name(kind);
  }
}

// biring's broadcast: a pipelined chain each way round from the root, each
// carrying half of the vector on links of its own on a ring of direct links:
// the chain's (n-1) alpha + (n-2+C) t with t a chunk of S/2 (S/(2C) bytes),
// where a chunk takes longer than a hop's latency. Where it does not, a
// rank's two pieces of one level (rail_broadcast's order) come from
// different distances and arrive apart, and the program's order makes each chain wait
// for the other: slower than the closed form, still faster than the chain.
TEST(Simulator, BiringBroadcastIsAChainEachWayRound) {
  for (const auto& [n, chunks] : {std::pair{8, 16}, std::pair{5, 4}, std::pair{3, 1}}) {
    const std::uint64_t count = 1 << 20;  // t = 4 MiB / 2C / 10 GB/s >= 13 us, alpha 0.5 us
    const double chunk = 4.0 * count / 2 / chunks / 10e9 * 1e6;
    const Topology t = generate_topology(fmt::format("ring:n={},bw=10GBps,lat=500ns", n));
    const auto sched = coll::make_schedule({CollectiveKind::kBroadcast, n, count, 2},
                                           {Algorithm::kBiRing, chunks, 0});
    EXPECT_LT(
        rel_err(time_to_us(simulate(t, *sched).total), (n - 1) * 0.5 + (n - 2 + chunks) * chunk),
        1e-6)
        << "n=" << n << " chunks=" << chunks;
  }
  const Topology t = generate_topology("ring:n=8,bw=10GBps,lat=500ns");
  const auto time = [&](Algorithm a) {  // t = 0.4 us, below alpha
    return time_to_us(
        simulate(t, *coll::make_schedule({CollectiveKind::kBroadcast, 8, 64000, 2}, {a, 16, 0}))
            .total);
  };
  EXPECT_LT(time(Algorithm::kBiRing), time(Algorithm::kRing));
}

// hier on a torus in groups of a row: rings along x (each rank's shard S/x
// summed over its row), an all-reduce of the shard along y, rings along x
// again, fenced apart. With rings one way round:
//   2(x-1)(a + S/(xB)) + 2(y-1)(a + S/(xyB));
// hier/biring runs each ring both ways round, half the bytes on the links
// back, halving both bandwidth terms: the 2-D bidirectional torus all-reduce.
TEST(Simulator, HierWithBiringOnATorusUsesBothDirectionsOfBothDimensions) {
  const int x = 4, y = 3, n = x * y;
  const std::uint64_t count = 3000 * n;  // S = 4 count bytes, splits evenly
  const double a = 0.5, bw = 10e9, bytes = 4.0 * count;
  const Topology t = generate_topology("torus2d:x=4,y=3,bw=10GBps,lat=500ns");
  for (Algorithm inner : {Algorithm::kRing, Algorithm::kBiRing}) {
    const double ways = inner == Algorithm::kBiRing ? 2.0 : 1.0;
    const double want = 2.0 * (x - 1) * (a + bytes / (x * bw * ways) * 1e6) +
                        2.0 * (y - 1) * (a + bytes / (x * y * bw * ways) * 1e6);
    const auto sched = coll::make_schedule({CollectiveKind::kAllReduce, n, count, 0},
                                           {Algorithm::kHierarchical, 1, x, inner});
    EXPECT_LT(rel_err(time_to_us(simulate(t, *sched).total), want), 1e-6)
        << coll::algorithm_name(inner);
  }
}

// hier's reduce-scatter (groups of a row on a 4x3 torus) runs rings along x
// over a rank's n blocks (S bytes), then along y over the x-th of them that
// it kept: (x-1) S/(xB) + (y-1) S/(xyB) without latency (the y rings of a
// step along x share a pair of ranks, so their latencies overlap and the
// latency term is not a count of steps); all-gather the mirror image. With
// biring inside, each ring also goes the other way round with half of each
// piece, on the links back: the time halves.
TEST(Simulator, HierReduceScatterAndAllGatherWithBiringUseBothDirections) {
  const int x = 4, y = 3, n = x * y;
  const std::uint64_t count = 6000;  // per rank's block; S = 4 n count bytes
  const double bw = 10e9, bytes = 4.0 * count * n;
  const Topology t = generate_topology("torus2d:x=4,y=3,bw=10GBps,lat=0");
  for (CollectiveKind kind : {CollectiveKind::kReduceScatter, CollectiveKind::kAllGather})
    for (Algorithm inner : {Algorithm::kRing, Algorithm::kBiRing}) {
      const double ways = inner == Algorithm::kBiRing ? 2.0 : 1.0;
      const double want =
          ((x - 1) * bytes / (x * bw * ways) + (y - 1) * bytes / (x * y * bw * ways)) * 1e6;
      const auto sched =
          coll::make_schedule({kind, n, count, 0}, {Algorithm::kHierarchical, 1, x, inner});
      EXPECT_LT(rel_err(time_to_us(simulate(t, *sched).total), want), 1e-6)
          << coll::collective_name(kind) << " " << coll::algorithm_name(inner);
    }
}

// hier in levels of a row, then a plane (--group-size 4x3 on a 4x3x3
// torus) runs each dimension in turn on what the one below left: x on S,
// y on S/x, z on S/(xy), each the (bi)ring's closed form, one after the
// other. Two levels (groups of a row) would run z's ring over the y-z plane
// in rank order instead.
TEST(Simulator, MultilevelHierOnA3DTorusRunsEachDimensionInTurn) {
  const int x = 4, y = 3, z = 3, n = x * y * z;
  const std::uint64_t count = 1000 * n;  // S = 4 count bytes, splits evenly
  const double a = 0.5, bw = 10e9, bytes = 4.0 * count;
  const Topology t = generate_topology("torus3d:x=4,y=3,z=3,bw=10GBps,lat=500ns");
  for (Algorithm inner : {Algorithm::kRing, Algorithm::kBiRing}) {
    const double ways = inner == Algorithm::kBiRing ? 2.0 : 1.0;
    double want = 0, share = bytes;
    for (const int d : {x, y, z}) {
      want += 2.0 * (d - 1) * (a + share / (d * bw * ways) * 1e6);
      share /= d;
    }
    coll::AlgoConfig config{Algorithm::kHierarchical, 1, x, inner};
    config.upper_groups = {y};
    const auto sched = coll::make_schedule({CollectiveKind::kAllReduce, n, count, 0}, config);
    EXPECT_LT(rel_err(time_to_us(simulate(t, *sched).total), want), 1e-6)
        << coll::algorithm_name(inner);
  }
}

// Rotated (AlgoConfig::rotate_levels), a cube's D dimensions each carry a
// part of S/D in every phase, all at once on links of their own: the one-way
// time with S/D, sum over k of 2(d-1)(a + S/(D d^(k+1) B)). A 4x4 torus in
// groups of a row (two levels, x-y and y-x) and a 3x3x3 one in levels 3x3.
TEST(Simulator, RotatedLevelsOnATorusRunEveryDimensionAtOnce) {
  struct Case {
    const char* spec;
    int d, dims;
    std::vector<int> upper;
  };
  for (const Case& c : {Case{"torus2d:x=4,y=4,bw=10GBps,lat=500ns", 4, 2, {}},
                        Case{"torus3d:x=3,y=3,z=3,bw=10GBps,lat=500ns", 3, 3, {3}}}) {
    const Topology t = generate_topology(c.spec);
    const int n = static_cast<int>(t.num_endpoints());
    const std::uint64_t count = 1200 * n;  // S = 4 count bytes, splits evenly
    const double a = 0.5, bw = 10e9, bytes = 4.0 * count;
    for (Algorithm inner : {Algorithm::kRing, Algorithm::kBiRing}) {
      const double ways = inner == Algorithm::kBiRing ? 2.0 : 1.0;
      double want = 0, share = bytes / c.dims;
      for (int k = 0; k < c.dims; ++k) {
        want += 2.0 * (c.d - 1) * (a + share / (c.d * bw * ways) * 1e6);
        share /= c.d;
      }
      coll::AlgoConfig config{Algorithm::kHierarchical, 1, c.d, inner};
      config.upper_groups = c.upper;
      config.rotate_levels = true;
      const auto sched = coll::make_schedule({CollectiveKind::kAllReduce, n, count, 0}, config);
      EXPECT_LT(rel_err(time_to_us(simulate(t, *sched).total), want), 1e-6)
          << c.spec << " " << coll::algorithm_name(inner);
    }
  }
}

TEST(Simulator, RingAlongOneDimensionOfATorusIsTheRingClosedForm) {
  // A torus with one dimension above 1 is a ring of direct links: alpha = 1
  // link = 500ns, B = 10e9 B/s, whichever dimension it is.
  for (const char* shape : {"x=8,y=1", "x=1,y=8", "x=8,y=1,z=1", "x=1,y=1,z=8"}) {
    const std::string spec = fmt::format(
        "{}:{},bw=10GBps,lat=500ns",
        std::string(shape).find('z') != std::string::npos ? "torus3d" : "torus2d", shape);
    const std::uint64_t count = 4096 * 8;
    const SimResult r = run(spec, 8, count, Algorithm::kRing);
    EXPECT_LT(rel_err(time_to_us(r.total), ring_closed_form_us(8, 4.0 * count, 0.5, 10e9)), 1e-6)
        << spec;
  }
}

TEST(Simulator, ReduceCostAddsToReduceScatterSteps) {
  // With reduce rate R each of the n-1 reduce-scatter steps also pays
  // (S/n)/R after its data arrives (the next send waits for the sum); the n-1
  // all-gather steps only copy: T = 2(n-1)(alpha + s/B) + (n-1) s/R, s = S/n.
  const int n = 4;
  const std::uint64_t count = 4000;  // S = 16000 B, s = 4000 B
  const Topology t = generate_topology("switch:n=4,bw=10GBps,lat=1us,reduce=2GBps");
  const auto sched =
      coll::make_schedule({CollectiveKind::kAllReduce, n, count, 0}, {Algorithm::kRing, 1, 0});
  const SimResult r = simulate(t, *sched);
  const double s = 4000;
  const double want_us = 2.0 * (n - 1) * (2.0 + s / 10e9 * 1e6) + (n - 1) * s / 2e9 * 1e6;
  EXPECT_LT(rel_err(time_to_us(r.total), want_us), 1e-6);
}

SimResult run_coll(CollectiveKind kind, int ranks, std::uint64_t count, Algorithm algo) {
  const Topology t = generate_topology("switch:n=16,bw=100Gbps,lat=1us");
  return simulate(t, *coll::make_schedule({kind, ranks, count, 0}, {algo, 1, 0}), {4, nullptr});
}

TEST(Simulator, HalvingDoublingReduceScatterAndAllGatherMatchClosedForm) {
  // Power-of-two n on a switch (alpha = 2us, B = 12.5e9 B/s): log2(n)
  // exchanges, the k-th of S/2^k bytes each way, each pair alone on its links:
  // log2(n) alpha + (n-1)/n S/B, with S reduce-scatter's input and all-gather's
  // output (reductions and copies are free here).
  for (int n : {2, 4, 8, 16}) {
    const std::uint64_t count = 1000;  // a rank's block
    const double bytes = 4.0 * count * n;
    const double want = std::log2(n) * 2.0 + (n - 1.0) / n * bytes / 12.5e9 * 1e6;
    for (auto kind : {CollectiveKind::kReduceScatter, CollectiveKind::kAllGather}) {
      const SimResult r = run_coll(kind, n, count, Algorithm::kHalvingDoubling);
      EXPECT_LT(rel_err(time_to_us(r.total), want), 1e-6)
          << coll::collective_name(kind) << " n=" << n;
    }
  }
}

TEST(Simulator, BroadcastsMatchTheirClosedForms) {
  // S bytes from rank 0, alpha = 2us, B = 12.5e9 B/s, t = S/B.
  // n = 2: scatter S/2 to rank 1, then swap halves: 2 alpha + t.
  // n = 3: the same between ranks 0 and 2 (rank 1 sits out), then rank 0 sends
  //   rank 1 all of it: 3 alpha + 2t.
  // n = 4: the root sends S/2 to rank 2 (alpha + t/2), then S/4 to rank 1
  //   (2 alpha + 3t/4) while rank 2 forwards a quarter to rank 3 (the same).
  //   Doubling: 0-1 and 2-3 swap quarters (3 alpha + t), then 0-2 and 1-3
  //   swap halves: 4 alpha + 3t/2, i.e. 2 log2(n) alpha + 2 (n-1)/n t, as
  //   for n = 8.
  const double s = 4.0 * 4000, t = s / 12.5e9 * 1e6;
  const std::pair<int, double> cases[] = {
      {2, 2 * 2.0 + t}, {3, 3 * 2.0 + 2 * t}, {4, 4 * 2.0 + 1.5 * t}, {8, 6 * 2.0 + 1.75 * t}};
  for (const auto& [n, want] : cases) {
    const SimResult r = run_coll(CollectiveKind::kBroadcast, n, 4000, Algorithm::kHalvingDoubling);
    EXPECT_LT(rel_err(time_to_us(r.total), want), 1e-6) << "n=" << n;
  }
  // The binomial tree: ceil(log2 n) rounds of alpha + t, a rank sending to
  // its children one after another, largest subtree first (sent at once they
  // would share its link: 1 + 2 + ... + log2(n) rounds of bytes).
  for (int n : {2, 5, 8, 16}) {
    const SimResult r = run_coll(CollectiveKind::kBroadcast, n, 4000, Algorithm::kTree);
    EXPECT_LT(rel_err(time_to_us(r.total), std::ceil(std::log2(n)) * (2.0 + t)), 1e-6)
        << "tree n=" << n;
  }
  // Where bandwidth dominates, scatter + gather beats the binomial tree
  // (log2(n) t): 16 ranks, 64 MiB.
  const std::uint64_t big = std::uint64_t{16} << 20;
  const double hd =
      time_to_us(run_coll(CollectiveKind::kBroadcast, 16, big, Algorithm::kHalvingDoubling).total);
  const double tree =
      time_to_us(run_coll(CollectiveKind::kBroadcast, 16, big, Algorithm::kTree).total);
  EXPECT_LT(hd, tree / 1.5) << hd << " vs " << tree;
}

// The chained broadcast with C chunks (alpha = 2 us, B = 12.5e9 B/s, a
// chunk's time t = S/(CB)), one pair's chunks on the wire one after another:
// a rank posts chunk c+1's receive before it forwards chunk c, so its
// predecessor's chunks stream to it back to back and hop h has chunk c at
// h alpha + (h + c) t; the last rank the last chunk at (n-1) alpha + (n-2+C) t.
// Posting that receive after the forward made every chunk pay the latency
// again: (n-2+C)(alpha + t).
TEST(Simulator, ChainedBroadcastPaysTheLatencyOnceAHop) {
  const Topology t = generate_topology("switch:n=16,bw=100Gbps,lat=1us");
  for (const auto& [n, chunks] : {std::pair{8, 16}, std::pair{16, 4}, std::pair{3, 1}}) {
    const std::uint64_t count = 64000;
    const double chunk = 4.0 * count / chunks / 12.5e9 * 1e6;
    const auto sched = coll::make_schedule({CollectiveKind::kBroadcast, n, count, 0},
                                           {Algorithm::kRing, chunks, 0});
    const double got = time_to_us(simulate(t, *sched, {4, nullptr}).total);
    EXPECT_LT(rel_err(got, (n - 1) * 2.0 + (n - 2 + chunks) * chunk), 1e-6)
        << "n=" << n << " chunks=" << chunks;
  }
}

// The binomial tree broadcast sends to the farthest child first, so the
// edges that leave a block of 2^k consecutive ranks are the tree's top ones:
// on leaves of 4 hosts each leaf but the root's receives the data once, (L-1)
// S up the spine in all, whatever the root (relative ranks r xor root at a
// power of two). Nearest first, 32 ranks on 8 leaves sent it up 28 times.
TEST(Simulator, BinomialBroadcastEntersEachLeafOnce) {
  const std::uint64_t count = 1 << 16;
  const double bytes = 4.0 * count;
  for (const auto& [n, root] :
       {std::pair{32, 0}, std::pair{32, 5}, std::pair{32, 31}, std::pair{24, 0}, std::pair{8, 6}}) {
    const Topology t =
        generate_topology(fmt::format("fat-tree:hosts={},leaves={},spines=1", n, n / 4));
    const auto sched =
        coll::make_schedule({CollectiveKind::kBroadcast, n, count, root}, {Algorithm::kTree, 1, 0});
    const SimResult r = simulate(t, *sched, {4, nullptr});
    EXPECT_LT(rel_err(total(bytes_between(t, r, "leaf", "spine")), (n / 4 - 1) * bytes), 1e-12)
        << "n=" << n << " root=" << root;
    const auto down = bytes_between(t, r, "spine", "leaf");
    for (std::size_t leaf = 0; leaf < down.size(); ++leaf)
      EXPECT_EQ(down[leaf], static_cast<int>(leaf) == root / 4 ? 0.0 : bytes)
          << "n=" << n << " root=" << root << " leaf " << leaf;
  }
}

// hd's all-reduce exchanges its largest halves with its nearest ranks: the
// step at distance d moves S/(2d) each way, so on leaves of g consecutive
// ranks only the steps with d >= g leave a leaf, S (1/g - 1/n) a rank in the
// halving and as much in the doubling: 2 n S (1/g - 1/n) up the spine in all,
// 14 S at 32 ranks on leaves of 4 (farthest first, as before: 56 S).
TEST(Simulator, HdAllReduceKeepsItsLargestHalvesInsideALeaf) {
  const std::uint64_t count = 1 << 16;
  const double bytes = 4.0 * count;
  for (const auto& [n, g] : {std::pair{32, 4}, std::pair{16, 2}, std::pair{8, 8}}) {
    const Topology t =
        generate_topology(fmt::format("fat-tree:hosts={},leaves={},spines=1", n, n / g));
    const auto sched = coll::make_schedule({CollectiveKind::kAllReduce, n, count, 0},
                                           {Algorithm::kHalvingDoubling, 1, 0});
    const SimResult r = simulate(t, *sched, {4, nullptr});
    const double want = 2.0 * n * bytes * (1.0 / g - 1.0 / n);
    const double got = total(bytes_between(t, r, "leaf", "spine"));
    if (want == 0)
      EXPECT_EQ(got, 0.0) << "n=" << n;
    else
      EXPECT_LT(rel_err(got, want), 1e-12) << "n=" << n << " g=" << g;
  }
}

// hd's broadcast (binomial scatter, doubling all-gather) numbers ranks from
// the root by xor at a power of two too, so what crosses between leaves does
// not depend on the root. 32 ranks on leaves of 4, S bytes: the scatter's
// steps at distance 16, 8 and 4 leave a leaf (S/2, 2 x S/4, 4 x S/8), and
// the doubling's at distance 4, 8 and 16, every rank sending S/8, S/4 and
// S/2: 1.5 S + 32 x 7/8 S = 29.5 S up the spine. With the rotation, root 5
// sent 6% more.
TEST(Simulator, HdBroadcastCrossesLeavesAlikeFromAnyRoot) {
  const Topology t = generate_topology("fat-tree:hosts=32,leaves=8,spines=1");
  const std::uint64_t count = 1 << 16;
  const double bytes = 4.0 * count;
  for (int root : {0, 1, 5, 22, 31}) {
    const auto sched = coll::make_schedule({CollectiveKind::kBroadcast, 32, count, root},
                                           {Algorithm::kHalvingDoubling, 1, 0});
    const double up = total(bytes_between(t, simulate(t, *sched, {4, nullptr}), "leaf", "spine"));
    EXPECT_LT(rel_err(up, 29.5 * bytes), 1e-12) << "root " << root;
  }
}

// The double binary tree all-reduce on n = 2^d ranks of a switch (alpha =
// 2 us, B = 12.5e9 B/s, t = S/B): each tree carries S/2, and the two trees'
// messages of a level take disjoint links. The root has one child, the top
// of a perfect tree of depth d-1. Up, a rank with two children takes them one
// after the other (it posts the second receive once the first is reduced),
// 2 (alpha + t/2) a level; down it sends to both at once through its link,
// alpha + t; the top edge takes alpha + t/2 each way. So (d-1)(3 alpha + 2t)
// + 2 alpha + t, both trees at once: a rank's leaf tree does not wait
// behind its other tree (with tree 0 first at every rank, 4 ranks took
// 17.76 us, not 13.84).
TEST(Simulator, DoubleTreeAllReduceMatchesClosedForm) {
  const std::uint64_t count = 4000;
  const double t = 4.0 * count / 12.5e3;  // S/B in us
  for (const int d : {1, 2, 3}) {
    const int n = 1 << d;
    const SimResult r = run_coll(CollectiveKind::kAllReduce, n, count, Algorithm::kTree);
    EXPECT_LT(rel_err(time_to_us(r.total), (d - 1) * (3 * 2.0 + 2 * t) + 2 * 2.0 + t), 1e-6)
        << "n=" << n;
  }
}

// The chunked double tree pipelines: on a switch (alpha = 2 us, B = 12.5e9
// B/s) it approaches its bandwidth cost, 2S/B (on the way up a rank's link
// carries S out, S/2 up each tree, and S in, its two children's halves in
// the tree where it is inner; the same again down), plus the pipeline's
// fill: two chunk-times, S/(2C)/B each, a level each way, 4 d S/(2CB) for
// depth d = log2 n. With 32 chunks, 16 MiB, it took 1.05x and 1.08x that at
// 16 and 32 ranks; when a leaf send could wait behind the rank's other tree
// (in-order issue coupled the two trees), 2.16x and 2.98x.
TEST(Simulator, ChunkedDoubleTreeApproachesItsBandwidthCost) {
  const std::uint64_t count = 4u << 20;
  const double t = 4.0 * count / 12.5e3;  // S/B in us
  const int chunks = 32;
  for (const int d : {4, 5}) {
    const int n = 1 << d;
    const Topology topo = generate_topology(fmt::format("switch:n={},bw=100Gbps,lat=1us", n));
    const auto sched = coll::make_schedule({CollectiveKind::kAllReduce, n, count, 0},
                                           {Algorithm::kTree, chunks, 0});
    const double took = time_to_us(simulate(topo, *sched, {4, nullptr}).total);
    const double cost = 2 * t + 4 * d * t / (2 * chunks);
    EXPECT_LT(took, 1.15 * cost) << "n=" << n;
    EXPECT_GT(took, 2 * t) << "n=" << n << ": faster than the bytes allow";
  }
}

// The built-in rule's broadcast (no table, chunks 1) against what this model
// says of its three unpipelined candidates on a switch (alpha = 2 us,
// 12.5 GB/s). It never takes longer than the chain, which it once chose for
// everything above 64 KiB (n-1 whole-message hops: at 16 ranks, 16 MiB, 8x
// the fastest), and from 8 ranks, where it follows the model, it is within
// 15% of the fastest (a fixed 64 KiB crossover misses by 12% at 16 ranks,
// 64 KiB). Below 8 ranks it keeps the tree (MPICH's rule, and what the
// 2-core VM measured at 4 ranks), which this model puts up to 1.33x behind
// hd at 4 ranks, 16 MiB.
TEST(Simulator, BuiltInBroadcastRuleIsNearTheFastestUnpipelined) {
  for (int n : {2, 3, 4, 5, 6, 8, 12, 16}) {
    for (std::uint64_t count : {256u, 16u << 10, 256u << 10, 4u << 20}) {
      const coll::CollectiveShape shape{CollectiveKind::kBroadcast, n, count, 0};
      const auto time = [&](Algorithm a) {
        return time_to_us(run_coll(CollectiveKind::kBroadcast, n, count, a).total);
      };
      const double chain = time(Algorithm::kRing);
      const double best =
          std::min({chain, time(Algorithm::kTree), time(Algorithm::kHalvingDoubling)});
      const Algorithm chosen = coll::choose_algorithm(shape, 4);
      const double took = time(chosen);
      const auto what = [&] {
        return fmt::format("n={} {} B: {} {} us, best {}, chain {}", n, 4 * count,
                           coll::algorithm_name(chosen), took, best, chain);
      };
      EXPECT_LE(took, chain * (1 + 1e-9)) << what();
      if (n >= 8) {
        EXPECT_LE(took, best * 1.15) << what();
      }
    }
  }
}

// The built-in rule's all-reduce (no table, chunks 1) against this model's
// direct, ring and hd. On a switch (alpha = 2us, 12.5 GB/s) it is within
// 1.5x of the fastest from 4 to 32 ranks; the rule it replaced (direct up to
// 64 KiB of traffic, else ring) was 5.6x behind hd at 32 ranks, 16 KiB
// (ring's 62 latency-bound steps), and its direct 5x at 1 KiB (a rank takes
// its peers' pieces in rank order, one sender at a time). Direct is simulated
// up to 1 MiB of traffic: beyond, its (n-1) S/B alone exceeds the ring's
// whole time. Where hd's exchanges across the network share links (a 2:1 fat
// tree, a torus), the rule keeps it to blocks of 32 KiB and is at most 1.7x
// behind the ring.
TEST(Simulator, BuiltInAllReduceRuleIsNearTheFastestUnpipelined) {
  const auto time = [](const std::string& spec, int n, std::uint64_t count, Algorithm a) {
    return time_to_us(run(spec, n, count, a).total);
  };
  for (int n : {4, 8, 16, 32}) {
    const std::string spec = fmt::format("switch:n={},bw=100Gbps,lat=1us", n);
    for (std::uint64_t count : {256u, 4u << 10, 64u << 10, 1u << 20}) {
      const Algorithm chosen = coll::choose_algorithm({CollectiveKind::kAllReduce, n, count, 0}, 4);
      double best = std::min(time(spec, n, count, Algorithm::kRing),
                             time(spec, n, count, Algorithm::kHalvingDoubling));
      if (4 * count * (n - 1) <= (1u << 20))
        best = std::min(best, time(spec, n, count, Algorithm::kDirect));
      const double took = time(spec, n, count, chosen);
      EXPECT_LE(took, best * 1.5) << fmt::format("n={} {} B: {} {} us, best {}", n, 4 * count,
                                                 coll::algorithm_name(chosen), took, best);
    }
  }
  for (const char* spec : {"fat-tree:hosts=64,leaves=8,spines=4", "torus2d:x=8,y=8"}) {
    for (std::uint64_t count : {64u << 10, 256u << 10, 512u << 10}) {
      const Algorithm chosen =
          coll::choose_algorithm({CollectiveKind::kAllReduce, 64, count, 0}, 4);
      const double took = time(spec, 64, count, chosen);
      const double ring = time(spec, 64, count, Algorithm::kRing);
      EXPECT_LE(took, ring * 1.7) << fmt::format("{} {} B: {} {} us, ring {}", spec, 4 * count,
                                                 coll::algorithm_name(chosen), took, ring);
    }
  }
}

// Where the ranks sit in groups (GPUs of a node, hosts of a leaf switch),
// the built-in rule for grouped ranks (coll::choose_config with the
// topology's group size) stays within 1.4x of the fastest unchunked
// algorithm of ring, hd, rings, direct and hier with the ring or hd between
// the groups, 1 KiB-256 MiB; the flat rule (choose_algorithm, blind to the
// groups) runs the ring there from 1-4 MiB and falls 4x behind on the nodes.
TEST(Simulator, BuiltInRuleForGroupedRanksIsNearTheFastestUnpipelined) {
  for (const char* spec : {"nodes:nodes=4,gpus=8", "nodes:nodes=2,gpus=4",
                           "fat-tree:hosts=32,leaves=4,spines=2,uplink=50Gbps"}) {
    const Topology t = generate_topology(spec);
    const int n = static_cast<int>(t.num_endpoints()), g = t.group_size_hint;
    double flat_worst = 1;
    for (std::uint64_t count : {256u, 16u << 10, 256u << 10, 4u << 20, 64u << 20}) {
      const coll::CollectiveShape shape{CollectiveKind::kAllReduce, n, count, 0};
      const auto time = [&](const AlgoConfig& c) {
        return time_to_us(simulate(t, *coll::make_schedule(shape, c), {4, nullptr}).total);
      };
      double best = INFINITY;
      for (Algorithm a : {Algorithm::kRing, Algorithm::kHalvingDoubling, Algorithm::kRings})
        best = std::min(best, time({a, 1, g}));
      for (Algorithm inner : {Algorithm::kRing, Algorithm::kHalvingDoubling})
        best = std::min(best, time({Algorithm::kHierarchical, 1, g, inner}));
      if (4 * count * (n - 1) <= (4u << 20))
        best = std::min(best, time({Algorithm::kDirect, 1, g}));
      const AlgoConfig chosen = coll::choose_config(shape, 4, {Algorithm::kAuto, 1, g});
      const double took = time(chosen);
      EXPECT_LE(took, best * 1.4) << fmt::format("{} {} B: {} {} us, best {}", spec, 4 * count,
                                                 coll::candidate_label(chosen), took, best);
      flat_worst = std::max(flat_worst, time({coll::choose_algorithm(shape, 4), 1, g}) / best);
    }
    if (std::string_view(spec).starts_with("nodes")) {
      EXPECT_GT(flat_worst, 4) << spec << ": the flat rule should lose there";
    }
  }
}

// Where reverse_rings_disjoint holds, the bidirectional ring takes about half
// the ring's time (each half on its own direction: rings of direct links, a
// torus's rows); on a switch or a fat tree, whose uplinks carry both ways,
// no less than the ring's; 64 MiB, ranks flat. It is the links' test, not
// the bottleneck's: flat over GPU nodes the NVSwitch uplinks carry both
// ways, so it does not hold, yet biring halves the ring there, whose
// bottleneck is one direction of the NICs between the nodes.
TEST(Simulator, ReverseRingsAreDisjointWhereBiringHalvesTheRing) {
  for (const char* spec : {"ring:n=8", "ring:n=5", "switch:n=8",
                           "fat-tree:hosts=8,leaves=2,spines=2", "torus2d:x=4,y=2"}) {
    const Topology t = generate_topology(spec);
    const int n = static_cast<int>(t.num_endpoints());
    const std::uint64_t count = 16u << 20;
    const double ratio = time_to_us(run(spec, n, count, Algorithm::kBiRing).total) /
                         time_to_us(run(spec, n, count, Algorithm::kRing).total);
    const bool disjoint = reverse_rings_disjoint(t, n, 0, {});
    EXPECT_EQ(disjoint, ratio < 0.6) << spec << ": biring/ring " << ratio;
    if (!disjoint) {
      EXPECT_GT(ratio, 0.95) << spec;
    }
  }
  // Along each dimension of the rank grid: a torus in rows, in levels.
  const Topology cube = generate_topology("torus3d:x=4,y=4,z=4");
  EXPECT_TRUE(reverse_rings_disjoint(cube, 64, 4, {4}));
  EXPECT_TRUE(reverse_rings_disjoint(cube, 64, 4, {}));
  EXPECT_TRUE(reverse_rings_disjoint(generate_topology("torus2d:x=8,y=8"), 64, 8, {}));
  // No dimension of three: nothing to gain.
  EXPECT_FALSE(reverse_rings_disjoint(generate_topology("torus2d:x=2,y=2"), 4, 2, {}));
  // Three ranks of a ring of 8: 2 -> 0 goes back over the links 1 -> 0 uses.
  EXPECT_FALSE(reverse_rings_disjoint(generate_topology("ring:n=8"), 3, 0, {}));
  // GPU nodes in groups: the NVSwitch uplink carries both ways round.
  EXPECT_FALSE(reverse_rings_disjoint(generate_topology("nodes:nodes=4,gpus=8"), 32, 8, {}));
}

// Where rails_disjoint holds (GPU nodes, a NIC per GPU), broadcast's rail
// rings in pieces of 256 KiB take well under the ring's time in pieces of
// the same size, 64 MiB: between the groups they have g links where the
// ring has one (0.28x and 0.24x on 2x4 and 4x8 GPUs). Where a crossing
// shares a link with another or with a hop inside a group they lose (a
// switch, a fat tree's hosts: 1.2x) or gain less (a torus's rows: 0.69x,
// where biring takes half the ring's time).
TEST(Simulator, RailsAreDisjointWhereRingsMultiplyTheCrossings) {
  struct Case {
    const char* spec;
    int group;
  };
  for (const Case& c :
       {Case{"nodes:nodes=2,gpus=4", 4}, Case{"nodes:nodes=4,gpus=8", 8}, Case{"switch:n=8", 4},
        Case{"fat-tree:hosts=8,leaves=2,spines=4", 4}, Case{"torus2d:x=4,y=4", 4}}) {
    const Topology t = generate_topology(c.spec);
    const int n = static_cast<int>(t.num_endpoints());
    const std::uint64_t count = 16u << 20;  // 64 MiB, 256 pieces of 256 KiB
    const coll::CollectiveShape shape{CollectiveKind::kBroadcast, n, count, 0};
    const auto time = [&](Algorithm a, int chunks) {
      return time_to_us(
          simulate(t, *coll::make_schedule(shape, {a, chunks, c.group}), {4, nullptr}).total);
    };
    const double ratio = time(Algorithm::kRings, 256 / c.group) / time(Algorithm::kRing, 256);
    const bool disjoint = rails_disjoint(t, n, c.group);
    EXPECT_EQ(disjoint, ratio < 0.5) << c.spec << ": rings/ring " << ratio;
    if (!disjoint) {
      EXPECT_GT(ratio, 0.6) << c.spec;
    }
  }
  // Several groups of several ranks, or no rails.
  const Topology nodes = generate_topology("nodes:nodes=2,gpus=4");
  EXPECT_FALSE(rails_disjoint(nodes, 8, 8));
  EXPECT_FALSE(rails_disjoint(nodes, 8, 1));
  EXPECT_FALSE(rails_disjoint(nodes, 8, 3));
}

// Told so (prefer_biring, as cclab sim tells it from reverse_rings_disjoint),
// the built-in rule on tori in the levels they hint, and on a ring, is
// within 1.1x of the fastest row of hd, ring, biring, and hier with the
// ring, biring or hd across the groups (where hd runs there) in 1 or 4
// chunks, 1 KiB-64 MiB of the whole buffer, for all-reduce, reduce-scatter
// and all-gather (the last two in groups: where a rank's block is 1 KiB or
// less, hd as the grouped rule); not told, it runs the ring's one direction
// and is 1.5x behind or worse at 64 MiB (reduce-scatter and all-gather on
// tori: hier's rings in levels one way, 1.65-2x).
void check_two_way_rule(const char* spec, CollectiveKind kind) {
  const Topology t = generate_topology(spec);
  const int n = static_cast<int>(t.num_endpoints());
  AlgoConfig told{Algorithm::kAuto, 1, t.group_size_hint};
  told.upper_groups = t.upper_groups_hint;
  told.rotate_levels = t.rotate_levels_hint;
  told.prefer_biring = reverse_rings_disjoint(t, n, t.group_size_hint, t.upper_groups_hint);
  ASSERT_TRUE(told.prefer_biring) << spec;
  const bool levels = !told.upper_groups.empty() || told.rotate_levels;
  for (std::uint64_t whole : {256u, 4u << 10, 256u << 10, 16u << 20}) {
    const std::uint64_t count = kind == CollectiveKind::kAllReduce ? whole : whole / n;
    const coll::CollectiveShape shape{kind, n, count, 0};
    const auto time = [&](AlgoConfig c) {
      if (c.algo == Algorithm::kHierarchical) {
        c.upper_groups = told.upper_groups;
        c.rotate_levels = told.rotate_levels;
      }
      return time_to_us(simulate(t, *coll::make_schedule(shape, c), {4, nullptr}).total);
    };
    double best = INFINITY;
    for (Algorithm a : {Algorithm::kHalvingDoubling, Algorithm::kRing, Algorithm::kBiRing})
      best = std::min(best, time({a, 1, told.group_size}));
    if (told.group_size > 0)
      for (int chunks : {1, 4})
        for (Algorithm inner : {Algorithm::kRing, Algorithm::kBiRing, Algorithm::kHalvingDoubling})
          if (coll::hier_inner_refusal(kind, n, told.group_size, inner, levels).empty())
            best = std::min(best, time({Algorithm::kHierarchical, chunks, told.group_size, inner}));
    const AlgoConfig chosen = coll::select_algorithm(shape, 4, told, {}).config;
    AlgoConfig not_told = told;
    not_told.prefer_biring = false;
    const AlgoConfig other = coll::select_algorithm(shape, 4, not_told, {}).config;
    if (kind != CollectiveKind::kAllReduce && told.group_size > 0 &&
        4 * count <= coll::kGroupedHdBlockLimit) {
      // Blocks of 1 KiB or less in groups: hd, as the grouped rule.
      EXPECT_EQ(coll::candidate_label(chosen), coll::candidate_label(other))
          << spec << " " << count;
      continue;
    }
    const double took =
        time_to_us(simulate(t, *coll::make_schedule(shape, chosen), {4, nullptr}).total);
    EXPECT_LE(took, best * 1.1) << fmt::format("{} {} {} B: {} {:.2f} us, fastest {:.2f}", spec,
                                               coll::collective_name(kind), 4 * whole,
                                               coll::candidate_label(chosen), took, best);
    if (whole == (16u << 20)) {
      EXPECT_GE(time_to_us(simulate(t, *coll::make_schedule(shape, other), {4, nullptr}).total),
                took * 1.5)
          << spec << " " << coll::collective_name(kind) << ": " << coll::candidate_label(other);
    }
  }
}

TEST(Simulator, BuiltInRuleOnLinksBothWaysIsNearTheFastestRow) {
  for (const char* spec :
       {"torus3d:x=4,y=4,z=4", "torus2d:x=8,y=4", "torus3d:x=4,y=4,z=2", "ring:n=16"})
    for (CollectiveKind kind :
         {CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter, CollectiveKind::kAllGather})
      check_two_way_rule(spec, kind);
}

// Broadcast's built-in rule (the pipelined chain where the buffer makes
// ranks/2 pieces of 256 KiB, each way round where the links carry both ways,
// on the rails where they cross between the groups on links of their own;
// else the tree or hd) against the fastest row of tree, hd, ring, biring and
// rings in 1-64 chunks of 16 KiB or more, 4 KiB-64 MiB, on a switch, a fat
// tree, a ring, a torus and GPU nodes: at 64 MiB at least as fast as that
// search (it takes 256 pieces; on the nodes rings:64, 536 us, where
// ring:256 takes 1384), where the unpipelined rule it extends
// (choose_algorithm) takes 1.8-9.4x the time; never more than 5% behind
// the unpipelined rule (a switch at 4 MiB: ring:16 659 us, hd 645); within
// 2.7x of the fastest everywhere, the worst in the middle band on a ring of
// 16 (256 KiB: hd 140 us, ring:16 54).
TEST(Simulator, BuiltInBroadcastRulePipelinesTheChainNearTheFastestRow) {
  for (const char* spec : {"switch:n=16", "fat-tree:hosts=16,leaves=4,spines=2,uplink=50Gbps",
                           "ring:n=16", "torus2d:x=4,y=4", "nodes:nodes=4,gpus=4"}) {
    const Topology t = generate_topology(spec);
    const int n = static_cast<int>(t.num_endpoints()), g = t.group_size_hint;
    AlgoConfig told{Algorithm::kAuto, 1, g};
    told.prefer_biring = reverse_rings_disjoint(t, n, 0, {});
    told.prefer_rails = rails_disjoint(t, n, g);
    for (std::uint64_t count : {1u << 10, 64u << 10, 1u << 20, 16u << 20}) {
      const coll::CollectiveShape shape{CollectiveKind::kBroadcast, n, count, 0};
      const auto time = [&](const AlgoConfig& c) {
        return time_to_us(simulate(t, *coll::make_schedule(shape, c), {4, nullptr}).total);
      };
      double best = INFINITY;
      for (Algorithm a : {Algorithm::kTree, Algorithm::kHalvingDoubling, Algorithm::kRing,
                          Algorithm::kBiRing, Algorithm::kRings}) {
        const bool rails = a == Algorithm::kRings;
        const int ways = a == Algorithm::kBiRing ? 2 : rails ? g : 1;
        for (int chunks : {1, 4, 16, 64})
          if (ways > 1 || !rails)
            if (chunks == 1 || 4 * count / (chunks * ways) >= (16u << 10))
              best = std::min(best, time({a, chunks, rails ? g : 0}));
      }
      const AlgoConfig chosen = coll::select_algorithm(shape, 4, told, {}).config;
      const double took = time(chosen);
      const double unpipelined = time({coll::choose_algorithm(shape, 4), 1});
      const auto what = [&] {
        return fmt::format("{} {} B: {} {:.2f} us, fastest {:.2f}, unpipelined {:.2f}", spec,
                           4 * count, coll::candidate_label(chosen), took, best, unpipelined);
      };
      EXPECT_LE(took, unpipelined * 1.05) << what();
      EXPECT_LE(took, best * 2.7) << what();
      if (count == (16u << 20)) {
        EXPECT_LE(took, best * 1.05) << what();
        EXPECT_LE(took, unpipelined * 0.6) << what();
      }
    }
  }
}

// Past its smallest messages the grouped rule runs hier all-reduce in chunks
// of about 512 KiB, one pipeline, with the ring between 2 groups and hd
// between 4. At 64 and 256 MiB on GPU nodes and a fat tree its choice is
// within 1.1x of the fastest row of a search over ring and rings in 1 and 4
// chunks (more change nothing there), hier with the ring or hd between groups
// in 1-64 chunks and hd, and takes at most 0.8x the unchunked hier's time with
// either between groups.
TEST(Simulator, GroupedRuleRunsHierInChunksNearTheFastestRow) {
  for (const char* spec : {"nodes:nodes=2,gpus=8", "nodes:nodes=4,gpus=8",
                           "fat-tree:hosts=32,leaves=4,spines=2,uplink=50Gbps"}) {
    const Topology t = generate_topology(spec);
    const int n = static_cast<int>(t.num_endpoints()), g = t.group_size_hint;
    for (std::uint64_t count : {16u << 20, 64u << 20}) {
      const coll::CollectiveShape shape{CollectiveKind::kAllReduce, n, count, 0};
      const auto time = [&](const AlgoConfig& c) {
        return time_to_us(simulate(t, *coll::make_schedule(shape, c), {4, nullptr}).total);
      };
      const double unchunked =
          std::min(time({Algorithm::kHierarchical, 1, g}),
                   time({Algorithm::kHierarchical, 1, g, Algorithm::kHalvingDoubling}));
      double best = std::min(unchunked, time({Algorithm::kHalvingDoubling, 1, g}));
      for (int chunks : {1, 4}) {  // the flat ones gain nothing past 4
        best = std::min(best, time({Algorithm::kRing, chunks, g}));
        best = std::min(best, time({Algorithm::kRings, chunks, g}));
      }
      for (int chunks : {4, 16, 64})
        for (Algorithm inner : {Algorithm::kRing, Algorithm::kHalvingDoubling})
          best = std::min(best, time({Algorithm::kHierarchical, chunks, g, inner}));
      const AlgoConfig chosen = coll::choose_config(shape, 4, {Algorithm::kAuto, 1, g});
      const double took = time(chosen);
      const std::string row =
          fmt::format("{} {} MiB: {} {:.1f} us, fastest {:.1f}, unchunked {:.1f}", spec,
                      count >> 18, coll::candidate_label(chosen), took, best, unchunked);
      EXPECT_LE(took, best * 1.1) << row;
      EXPECT_LE(took, unchunked * 0.8) << row;
    }
  }
}

TEST(Simulator, RingsSpreadTheTrafficBetweenNodesOverEveryNic) {
  // nodes:nodes=4,gpus=4, S = 64 MiB (the whole buffer). The ring crosses to
  // the next node from local rank 3 only: its k(n-1) steps of S/n (k = 2 for
  // all-reduce, 1 for reduce-scatter and all-gather) leave on each node's
  // nic3 and on no other NIC. rings runs g = 4 rings on a quarter each; ring
  // c leaves a node from local rank c-1, so every GPU's NIC carries one ring's
  // k(n-1) steps of S/(4n). Broadcast from rank 0: the ring's chain carries S
  // out of nodes 0-2 on nic3 (it ends on node 3); chain c of rings carries
  // S/4 out of every node on local rank c-1, but chain 0, which starts at
  // position 0 and so ends on node 3 without wrapping.
  const Topology t = generate_topology("nodes:nodes=4,gpus=4");
  const int n = 16;
  const double bytes = 64.0 * (1 << 20);
  auto up_to_nic = [&](const SimResult& r) { return bytes_between(t, r, ".gpu", ".nic"); };
  for (auto kind : {CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter,
                    CollectiveKind::kAllGather, CollectiveKind::kBroadcast}) {
    const bool whole = kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kBroadcast;
    const bool broadcast = kind == CollectiveKind::kBroadcast;
    const std::uint64_t count = static_cast<std::uint64_t>(bytes / 4) / (whole ? 1 : n);
    const double k = kind == CollectiveKind::kAllReduce ? 2 : 1;
    const auto sim = [&](Algorithm a) {
      return simulate(t, *coll::make_schedule({kind, n, count, 0}, {a, 1, 4}), {4, nullptr});
    };
    const SimResult ring = sim(Algorithm::kRing), rings = sim(Algorithm::kRings);
    const auto ring_nics = up_to_nic(ring), rings_nics = up_to_nic(rings);
    ASSERT_EQ(ring_nics.size(), 16u);
    for (std::size_t i = 0; i < ring_nics.size(); ++i) {
      const bool last_rank_of_last_node = i == 15;
      const double want_ring = i % 4 != 3               ? 0
                               : !broadcast             ? k * (n - 1) / n * bytes
                               : last_rank_of_last_node ? 0
                                                        : bytes;
      const double want_rings = !broadcast               ? k * (n - 1) / n * bytes / 4
                                : last_rank_of_last_node ? 0
                                                         : bytes / 4;
      EXPECT_LT(std::abs(ring_nics[i] - want_ring), 1.0)
          << coll::collective_name(kind) << " ring, gpu " << i;
      EXPECT_LT(std::abs(rings_nics[i] - want_rings), 1.0)
          << coll::collective_name(kind) << " rings, gpu " << i;
    }
    // Four NICs a node instead of one: well under half the time.
    EXPECT_LT(rings.total, ring.total / 2)
        << coll::collective_name(kind) << ": " << time_to_us(rings.total) << " vs "
        << time_to_us(ring.total);
  }
}

// The generators' group hint puts hier's groups where its phases stay local.
// Torus 4x8: groups are the rows (hint x = 4), whose ring of direct links
// carries the intra-group reduce-scatter and all-gather, while the inner ring
// all-reduce runs down a column: every message crosses one link, so the links
// carry exactly what the ranks send, n S (2(g-1)/g + 2(G-1)/(gG)) with G = n/g
// groups. Groups of two rows (the default, 8 of 32 ranks) send part of the
// row ring's traffic two hops.
TEST(Simulator, HierGroupsFollowTheTopologysHint) {
  const double bytes = 4.0 * 32 * 1024;
  const auto hier = [&](const Topology& t, int n, int g) {
    const std::uint64_t count = static_cast<std::uint64_t>(bytes / 4);
    return simulate(t,
                    *coll::make_schedule({CollectiveKind::kAllReduce, n, count, 0},
                                         {Algorithm::kHierarchical, 1, g}),
                    {4, nullptr});
  };
  const Topology torus = generate_topology("torus2d:x=4,y=8");
  ASSERT_EQ(torus.group_size_hint, 4);
  const double n = 32, g = 4, groups = n / g;
  const double sent = n * bytes * (2 * (g - 1) / g + 2 * (groups - 1) / (g * groups));
  EXPECT_LT(rel_err(total(hier(torus, 32, 4).link_bytes), sent), 1e-9);
  EXPECT_GT(total(hier(torus, 32, 8).link_bytes), 1.1 * sent);

  // Fat tree, 2 leaves of 16 hosts: groups are the leaves (hint 16), so only
  // the inner all-reduce between the two groups leaves a leaf: each rank sends
  // both halves of its shard (S/g) to its peer on the other leaf, n S/g up in
  // all. Groups of 8 (the default) run a 4-group ring, its shard S/8 sent in 6
  // quarters, half of them across the spine: 3/2 that.
  const Topology tree = generate_topology("fat-tree:hosts=32,leaves=2,spines=1");
  ASSERT_EQ(tree.group_size_hint, 16);
  const auto uplink_bytes = [&](const SimResult& r) {
    return total(bytes_between(tree, r, "leaf", "spine"));
  };
  EXPECT_LT(rel_err(uplink_bytes(hier(tree, 32, 16)), n * bytes / 16), 1e-9);
  EXPECT_LT(rel_err(uplink_bytes(hier(tree, 32, 8)), 1.5 * n * bytes / 16), 1e-9);
}

// hier reduce-scatter and all-gather on nodes:nodes=4,gpus=4 (G = 4 groups of
// g = 4, blocks of b bytes): each GPU's NIC carries its rail ring's G-1 blocks,
// (G-1) b, as the rings spread it, and NVLink the G rings inside its node, (g-1)
// G b out of each GPU. The plain ring crosses nodes from local rank 3 alone.
// In steps between nodes: G-1 = 3 against the ring's n-1 = 15, so at 64 KiB
// a block it is ahead of both ring and rings.
TEST(Simulator, HierReduceScatterAndAllGatherCrossNodesOnEveryRail) {
  const Topology t = generate_topology("nodes:nodes=4,gpus=4");
  const int n = 16, g = 4, groups = 4;
  const std::uint64_t count = 16384;  // elements per rank's block
  const double block = 4.0 * count;
  for (auto kind : {CollectiveKind::kReduceScatter, CollectiveKind::kAllGather}) {
    const auto sim = [&](Algorithm a) {
      return simulate(t, *coll::make_schedule({kind, n, count, 0}, {a, 1, g}), {4, nullptr});
    };
    const SimResult hier = sim(Algorithm::kHierarchical);
    const auto nics = bytes_between(t, hier, ".gpu", ".nic");
    const auto nvlinks = bytes_between(t, hier, ".gpu", ".nvsw");
    ASSERT_EQ(nics.size(), 16u);
    ASSERT_EQ(nvlinks.size(), 16u);
    for (double b : nics) EXPECT_LT(rel_err(b, (groups - 1) * block), 1e-12);
    for (double b : nvlinks) EXPECT_LT(rel_err(b, (g - 1) * groups * block), 1e-12);
    EXPECT_LT(hier.total, sim(Algorithm::kRings).total);
    EXPECT_LT(hier.total, sim(Algorithm::kRing).total);
  }
}

// hier in chunks is one pipeline: a wave of chunks crosses between nodes
// while the next works inside them. nodes:nodes=2,gpus=8 (g = 8, G = 2), S =
// 64 MiB: a GPU's NVLink carries 2(g-1)/g S (T_in at 450 GB/s) and its NIC
// 2(G-1)/G S/g (T_out at 50 GB/s), on separate links. The phased hier (one
// chunk) runs them one after the other, so it takes at least T_in + T_out;
// the pipelined one, 64 chunks in 16 waves, no less than the busier link's
// max(T_in, T_out) but well under the sum. Both move the same bytes.
TEST(Simulator, HierInChunksOverlapsWorkInsideAndBetweenNodes) {
  const Topology t = generate_topology("nodes:nodes=2,gpus=8,nvlink=450GBps,nic=400Gbps");
  const int n = 16, g = 8, groups = 2;
  const std::uint64_t count = 16u << 20;
  const double bytes = 4.0 * count;
  const double t_in = 2.0 * (g - 1) / g * bytes / 450e9 * 1e6;
  const double t_out = 2.0 * (groups - 1) / groups * bytes / g / 50e9 * 1e6;
  const auto hier = [&](int chunks) {
    return simulate(t,
                    *coll::make_schedule({CollectiveKind::kAllReduce, n, count, 0},
                                         {Algorithm::kHierarchical, chunks, g, Algorithm::kRing}),
                    {4, nullptr});
  };
  const SimResult phased = hier(1), piped = hier(64);
  EXPECT_GE(time_to_us(phased.total), t_in + t_out);
  EXPECT_GE(time_to_us(piped.total), std::max(t_in, t_out));
  EXPECT_LT(time_to_us(piped.total), 0.75 * (t_in + t_out))
      << "T_in " << t_in << " us, T_out " << t_out << " us";
  const auto nics = bytes_between(t, piped, ".gpu", ".nic");
  ASSERT_EQ(nics.size(), 16u);
  for (double b : nics) EXPECT_LT(rel_err(b, 2.0 * (groups - 1) / groups * bytes / g), 1e-9);
  EXPECT_EQ(bytes_between(t, phased, ".gpu", ".nic"), nics);
}

// So are hier's reduce-scatter and all-gather. Same nodes, S = 64 MiB the
// whole buffer (n blocks): a GPU's NVLink carries (g-1)/g S (g-1 hops of G
// blocks) and its NIC (G-1) S/n, on separate links, so the phased hier takes
// at least T_in + T_out, the pipelined one (64 chunks) no less than the
// busier link's time but well under the sum; both move the same bytes.
TEST(Simulator, HierReduceScatterAndAllGatherInChunksOverlapTheirRings) {
  const Topology t = generate_topology("nodes:nodes=2,gpus=8,nvlink=450GBps,nic=400Gbps");
  const int n = 16, g = 8, groups = 2;
  const std::uint64_t count = (16u << 20) / n;  // a rank's block
  const double bytes = 4.0 * count * n;
  const double t_in = (g - 1.0) / g * bytes / 450e9 * 1e6;
  const double t_out = (groups - 1.0) * bytes / n / 50e9 * 1e6;
  for (auto kind : {CollectiveKind::kReduceScatter, CollectiveKind::kAllGather}) {
    SCOPED_TRACE(coll::collective_name(kind));
    const auto hier = [&](int chunks) {
      return simulate(
          t, *coll::make_schedule({kind, n, count, 0}, {Algorithm::kHierarchical, chunks, g}),
          {4, nullptr});
    };
    const SimResult phased = hier(1), piped = hier(64);
    EXPECT_GE(time_to_us(phased.total), t_in + t_out);
    EXPECT_GE(time_to_us(piped.total), std::max(t_in, t_out));
    EXPECT_LT(time_to_us(piped.total), 0.8 * (t_in + t_out))
        << "T_in " << t_in << " us, T_out " << t_out << " us, phased " << time_to_us(phased.total);
    const auto nics = bytes_between(t, piped, ".gpu", ".nic");
    ASSERT_EQ(nics.size(), 16u);
    for (double b : nics) EXPECT_LT(rel_err(b, (groups - 1.0) * bytes / n), 1e-9);
    EXPECT_EQ(bytes_between(t, phased, ".gpu", ".nic"), nics);
  }
}

// Between many nodes hier's reduce-scatter and all-gather pay the ring's G-1
// NIC latencies in a row; with hd between the groups they pay log2(G) and
// move the same bytes. nodes:nodes=16,gpus=8 (G = 16), 1 MiB in all: the hd
// form, unchunked and in 4 chunks, takes under half the ring form's time,
// and every GPU's NIC carries (G-1) blocks of S/n in both.
TEST(Simulator, HierReduceScatterAndAllGatherWithHdBetweenNodesPayFewerLatencies) {
  const Topology t = generate_topology("nodes:nodes=16,gpus=8");
  const int n = 128, g = 8, groups = 16;
  const std::uint64_t count = (1u << 20) / 4 / n;  // a rank's block
  for (auto kind : {CollectiveKind::kReduceScatter, CollectiveKind::kAllGather})
    for (int chunks : {1, 4}) {
      SCOPED_TRACE(fmt::format("{} chunks {}", coll::collective_name(kind), chunks));
      const auto hier = [&](Algorithm inner) {
        return simulate(
            t,
            *coll::make_schedule({kind, n, count, 0}, {Algorithm::kHierarchical, chunks, g, inner}),
            {4, nullptr});
      };
      const SimResult ring = hier(Algorithm::kRing), hd = hier(Algorithm::kHalvingDoubling);
      EXPECT_LT(time_to_us(hd.total), 0.5 * time_to_us(ring.total))
          << "hd " << time_to_us(hd.total) << " us, ring " << time_to_us(ring.total);
      const auto nics = bytes_between(t, hd, ".gpu", ".nic");
      ASSERT_EQ(nics.size(), std::size_t(n));
      for (double b : nics) EXPECT_LT(rel_err(b, (groups - 1) * 4.0 * count), 1e-9);
      EXPECT_EQ(bytes_between(t, ring, ".gpu", ".nic"), nics);
    }
}

TEST(Simulator, LinkBytesAndBottleneck) {
  // Ring of 4 on a switch, S = 16000 B: each rank's uplink carries 2(n-1)
  // messages of S/n bytes = 6 * 4000 = 24000 B, and so does each downlink.
  const SimResult r = run("switch:n=4,bw=100Gbps,lat=1us", 4, 4000, Algorithm::kRing);
  for (double b : r.link_bytes) EXPECT_DOUBLE_EQ(b, 24000.0);
  ASSERT_GE(r.bottleneck, 0);
  // Utilisation = 24000 / (12.5e9 * T).
  EXPECT_LT(rel_err(r.bottleneck_utilisation, 24000.0 / (12.5e9 * time_to_seconds(r.total))), 1e-9);
}

TEST(Simulator, RingOnOversubscribedFatTreeFollowsTheSlowLinks) {
  // fat-tree:hosts=4,leaves=2: h0,h1 on leaf0, h2,h3 on leaf1, uplinks at half
  // the host bandwidth (B = 10e9 B/s, U = 5e9 B/s), lat = 1us per link.
  // Ring 0->1->2->3->0: 0->1 and 2->3 stay in a leaf (2 links: f = 2us + s/B);
  // 1->2 and 3->0 cross the spine (4 links: w = 4us + s/U), each alone on its
  // links. Rank j issues its step-k receive only after its step-k send, which
  // waits for its step-(k-1) receive; the transfer into j starts when both
  // sides are issued (rendezvous), so with R(k, j) the step-k receive at j:
  //   R(k, j) = max(R(k-1, j-1), R(k-1, j)) + cost(j-1 -> j),  R(-1, .) = 0.
  // Step 0: R = (w, f, w, f) for ranks (0, 1, 2, 3); as w > f, every later step
  // adds w to the slow-link ranks 0 and 2: after 2(n-1) = 6 steps, 6w.
  const std::uint64_t count = 4000;  // S = 16000 B, s = 4000 B
  const SimResult r = run("fat-tree:hosts=4,leaves=2,spines=1,bw=10GBps,uplink=5GBps,lat=1us", 4,
                          count, Algorithm::kRing);
  const double s = 4000, slow = 4.0 + s / 5e9 * 1e6;
  EXPECT_LT(rel_err(time_to_us(r.total), 6 * slow), 1e-6) << time_to_us(r.total);
  // Ranks 1 and 3 receive their last block at R(5, 1) = 5w + f, but their last
  // send goes over a slow link and completes with R(5, 2) = 6w: all finish at 6w.
  for (Time f : r.rank_finish) EXPECT_EQ(f, r.total);
}

TEST(Simulator, RingOnThreeTierFatTreeFollowsTheCoreLinks) {
  // The same ring on 3 tiers: leaf0 (h0, h1) in pod 0, leaf1 (h2, h3) in pod 1,
  // one spine per pod, one core at C = 5e9 B/s below the 10e9 B/s elsewhere.
  // 1->2 and 3->0 cross pods over 6 links (w = 6us + s/C), each alone on its
  // links; 0->1 and 2->3 stay in a leaf (f = 2us + s/B). By the recurrence of
  // the test above the ring takes 6w.
  const std::uint64_t count = 4000;  // s = 4000 B
  const SimResult r =
      run("fat-tree:tiers=3,pods=2,hosts=4,leaves=2,spines=1,cores=1,bw=10GBps,core=5GBps,lat=1us",
          4, count, Algorithm::kRing);
  const double s = 4000, slow = 6.0 + s / 5e9 * 1e6;
  EXPECT_LT(rel_err(time_to_us(r.total), 6 * slow), 1e-6) << time_to_us(r.total);
  for (Time f : r.rank_finish) EXPECT_EQ(f, r.total);
}

TEST(Simulator, MoreRanksThanEndpoints) {
  const Topology t = generate_topology("switch:n=4");
  const auto sched =
      coll::make_schedule({CollectiveKind::kAllReduce, 5, 100, 0}, {Algorithm::kRing, 1, 0});
  cclab::test::expect_invalid([&] { simulate(t, *sched); }, "--ranks: 5 ranks");
}

// Every all-reduce algorithm completes on every built-in topology (a deadlock
// or a mismatched transfer throws), and no rank finishes before the fastest
// possible message when there is anything to send. Rank counts: every one to
// 17, then powers of two, their neighbours and others up to the 64 endpoints
// (the checker proves each count 1..64 apart from topologies).
class AllTopologies : public ::testing::TestWithParam<std::string> {};

TEST_P(AllTopologies, EveryAlgorithmCompletes) {
  const Topology t = generate_topology(GetParam());
  std::vector<int> rank_counts;
  for (int n = 1; n <= 17; ++n) rank_counts.push_back(n);
  for (int n : {24, 31, 32, 33, 40, 48, 63, 64}) rank_counts.push_back(n);
  for (Algorithm algo : coll::algorithms_for(CollectiveKind::kAllReduce)) {
    for (int n : rank_counts) {
      const auto sched =
          coll::make_schedule({CollectiveKind::kAllReduce, n, 1009, 0}, {algo, 2, 0});
      SCOPED_TRACE(fmt::format("{} ranks {}", sched->name(), n));
      const SimResult r = simulate(t, *sched);
      ASSERT_EQ(r.rank_finish.size(), static_cast<std::size_t>(n));
      // Even zero latency: ~1009*4/n bytes at <= 450 GB/s takes > 0 ps.
      if (n > 1) {
        EXPECT_GT(r.total, 0);
        EXPECT_GT(r.flows, 0u);
      }
      for (Time f : r.rank_finish) EXPECT_LE(f, r.total);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Builtin, AllTopologies,
                         ::testing::Values("switch:n=64", "ring:n=64", "torus2d:x=8,y=8",
                                           "torus3d:x=4,y=4,z=4",
                                           "fat-tree:hosts=64,leaves=8,spines=4,uplink=50Gbps",
                                           "fat-tree:tiers=3,pods=4,hosts=64,leaves=8,spines=2,"
                                           "cores=2,core=50Gbps",
                                           "nodes:nodes=8,gpus=8"));

}  // namespace
}  // namespace cclab::sim
