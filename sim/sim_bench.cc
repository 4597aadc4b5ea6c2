// Simulator speed under Google Benchmark: how many engine events and schedule
// steps per second of wall time the simulator processes on large cases.
//   ring, 4 chunks, 1024 ranks on one switch (8.4M steps)
//   the same on a 3-tier fat tree: 8 pods of 4 leaves of 32 hosts, 4 spines
//   per pod, 4 cores; uplinks at 50 Gbps (8:1 at the leaves), so the flows
//   that leave a leaf share links (contention)
//   hier (g = 8, inner ring) on nodes:nodes=N,gpus=8 (N = 256 and 2048)
//   hier with hd between the 256 nodes in 32 chunks, one pipeline (what
//   `auto` runs there at 16 MiB; 64 MiB here)
//   hier with hd between the 4 leaves of a fat tree of 128 hosts and 2 spines
//   in 64 chunks: every flow between leaves shares an uplink with the others,
//   so the flows in flight form one component that each instant refills
//   the same on a leaf-spine of 1024 hosts in 16 leaves and 16 spines
//   without oversubscription (uplinks at 4x the hosts' links), 8 chunks:
//   the component spans the fabric, but an instant changes few of its rates
//   (the local refill's case)
//   hd on a 24x24 torus: 576 ranks, not a power of two, so Rabenseifner's
//   extra steps and the folded ranks' partners cross the torus, and the
//   flows of a step share links in one large component (progressive filling)
// The topology is built once per case; each iteration builds the schedule and
// simulates it (schedules are lazy: generating them is part of the replay).
#include <memory>
#include <string>

#include <benchmark/benchmark.h>

#include "cclab/collectives/algorithms.h"
#include "cclab/sim/simulator.h"
#include "cclab/sim/topology.h"

namespace {

using cclab::coll::Algorithm;

void simulate_case(benchmark::State& state, const std::string& spec, Algorithm algo, int chunks,
                   int group_size, Algorithm inner = Algorithm::kRing) {
  const cclab::sim::Topology topo = cclab::sim::generate_topology(spec);
  const int ranks = static_cast<int>(topo.num_endpoints());
  const std::uint64_t count = std::uint64_t{64} << 20 >> 2;  // 64 MiB of f32
  double events = 0, steps = 0, simulated_us = 0;
  for (auto _ : state) {
    const auto sched =
        cclab::coll::make_schedule({cclab::coll::CollectiveKind::kAllReduce, ranks, count, 0},
                                   {algo, chunks, group_size, inner});
    const auto r = cclab::sim::simulate(topo, *sched);
    events += static_cast<double>(r.events);
    steps += static_cast<double>(r.steps);
    simulated_us = cclab::sim::time_to_us(r.total);
    benchmark::DoNotOptimize(r.total);
  }
  state.counters["events/s"] = benchmark::Counter(events, benchmark::Counter::kIsRate);
  state.counters["steps/s"] = benchmark::Counter(steps, benchmark::Counter::kIsRate);
  state.counters["simulated_us"] = simulated_us;
}

void BM_SimRing1024Switch(benchmark::State& state) {
  simulate_case(state, "switch:n=1024,bw=100Gbps,lat=1us", Algorithm::kRing, 4, 0);
}
void BM_SimRing1024FatTree3(benchmark::State& state) {
  simulate_case(state,
                "fat-tree:tiers=3,pods=8,hosts=1024,leaves=32,spines=4,cores=4,bw=100Gbps,"
                "uplink=50Gbps,lat=1us",
                Algorithm::kRing, 4, 0);
}
// 16,384 endpoints on one switch: every route crosses a node of that degree.
void BM_SimHd16384Switch(benchmark::State& state) {
  simulate_case(state, "switch:n=16384,bw=100Gbps,lat=1us", Algorithm::kHalvingDoubling, 1, 0);
}
void BM_SimHdTorus24x24(benchmark::State& state) {
  simulate_case(state, "torus2d:x=24,y=24,bw=100Gbps,lat=1us", Algorithm::kHalvingDoubling, 1, 0);
}
void BM_SimHierNodes256(benchmark::State& state) {
  simulate_case(state, "nodes:nodes=256,gpus=8", Algorithm::kHierarchical, 1, 8);
}
void BM_SimHierHdNodes256(benchmark::State& state) {
  simulate_case(state, "nodes:nodes=256,gpus=8", Algorithm::kHierarchical, 32, 8,
                Algorithm::kHalvingDoubling);
}
void BM_SimHierHdFatTree128Spines2(benchmark::State& state) {
  simulate_case(state, "fat-tree:hosts=128,leaves=4,spines=2", Algorithm::kHierarchical, 64, 32,
                Algorithm::kHalvingDoubling);
}
void BM_SimHierHdFatTree1024Spines16(benchmark::State& state) {
  simulate_case(state, "fat-tree:hosts=1024,leaves=16,spines=16,uplink=400Gbps",
                Algorithm::kHierarchical, 8, 64, Algorithm::kHalvingDoubling);
}
void BM_SimHierNodes2048(benchmark::State& state) {
  simulate_case(state, "nodes:nodes=2048,gpus=8", Algorithm::kHierarchical, 1, 8);
}

BENCHMARK(BM_SimRing1024Switch)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_SimRing1024FatTree3)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_SimHd16384Switch)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_SimHdTorus24x24)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_SimHierNodes256)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_SimHierHdNodes256)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_SimHierHdFatTree128Spines2)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_SimHierHdFatTree1024Spines16)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_SimHierNodes2048)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
