// The Chrome trace and topology files read from disk.
#include "cclab/sim/trace.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cclab/collectives/algorithms.h"
#include "cclab/collectives/error.h"
#include "cclab/sim/simulator.h"
#include "cclab/sim/topology.h"
#include "cclab/test/errors.h"

namespace cclab::sim {
namespace {

using coll::Algorithm;
using coll::CollectiveKind;

TEST(Trace, OneSlicePerStepAndLinkCounters) {
  // Ring of 4 on a switch: every flow is alone on its two links, so each link
  // counter reads utilisation 1 while a flow is on it and 0 after.
  const Topology t = generate_topology("switch:n=4,bw=10GBps,lat=1us");
  const auto sched =
      coll::make_schedule({CollectiveKind::kAllReduce, 4, 4000, 0}, {Algorithm::kRing, 1, 0});
  std::ostringstream text;
  TraceWriter trace(t, text);
  const SimResult r = simulate(t, *sched, {4, &trace});
  trace.finish();
  const auto doc = nlohmann::json::parse(text.str());
  std::uint64_t slices = 0;
  double max_util = 0, last_util = -1;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") == "X" && e.at("pid") == 0) {
      ++slices;
      EXPECT_GE(e.at("dur").get<double>(), 0.0);
      EXPECT_LE(e.at("ts").get<double>() + e.at("dur").get<double>(),
                time_to_us(r.total) * (1 + 1e-9));
    } else if (e.at("ph") == "C") {
      last_util = e.at("args").at("utilisation").get<double>();
      max_util = std::max(max_util, last_util);
    }
  }
  EXPECT_EQ(slices, r.steps);  // every issued step became one slice
  EXPECT_DOUBLE_EQ(max_util, 1.0);
  EXPECT_DOUBLE_EQ(last_util, 0.0);  // the last flow's links drain to idle
}

// With a host overhead o each rank's host has a slice of o per message end:
// a 4-rank ring has 6 steps of a send and a receive, so 12 slices a host,
// one at a time.
TEST(Trace, HostOverheadHasASlicePerMessageEnd) {
  const Topology t = generate_topology("switch:n=4,bw=10GBps,lat=1us,overhead=1us");
  const auto sched =
      coll::make_schedule({CollectiveKind::kAllReduce, 4, 4000, 0}, {Algorithm::kRing, 1, 0});
  std::ostringstream text;
  TraceWriter trace(t, text);
  simulate(t, *sched, {4, &trace});
  trace.finish();
  std::map<int, std::vector<std::pair<double, double>>> hosts;  // tid -> (ts, dur)
  const auto doc = nlohmann::json::parse(text.str());
  for (const auto& e : doc.at("traceEvents"))
    if (e.at("ph") == "X" && e.at("pid") == 2)
      hosts[e.at("tid").get<int>()].emplace_back(e.at("ts").get<double>(),
                                                 e.at("dur").get<double>());
  ASSERT_EQ(hosts.size(), 4u);
  for (auto& [rank, slices] : hosts) {
    EXPECT_EQ(slices.size(), 12u) << "rank " << rank;
    std::sort(slices.begin(), slices.end());
    for (std::size_t i = 0; i < slices.size(); ++i) {
      EXPECT_NEAR(slices[i].second, 1.0, 1e-9);
      if (i > 0) {
        EXPECT_GE(slices[i].first, slices[i - 1].first + 1.0 - 1e-9);
      }
    }
  }
  const Topology bare = generate_topology("switch:n=4,bw=10GBps,lat=1us");
  std::ostringstream plain_text;
  TraceWriter plain(bare, plain_text);
  simulate(bare, *sched, {4, &plain});
  plain.finish();
  const auto plain_doc = nlohmann::json::parse(plain_text.str());
  for (const auto& e : plain_doc.at("traceEvents"))
    EXPECT_FALSE(e.at("ph") == "X" && e.at("pid") == 2) << "no host slices without an overhead";
}

TEST(TopologyFile, LoadsFromDiskAndNamesTheFile) {
  const auto path = std::filesystem::temp_directory_path() / "cclab_sim_topology_test.json";
  {
    std::ofstream out(path);
    out << R"({"nodes": [{"name": "a", "kind": "endpoint"}, {"name": "b", "kind": "endpoint"}],
              "links": [{"from": "a", "to": "b", "bw": "8Gbps", "lat": "2us"}]})";
  }
  const Topology t = make_topology(path.string());
  // One duplex link a-b of 1e9 B/s and 2us: a 1e6 B transfer each way for a
  // 2-rank ring (S = 2e6 B, 2(n-1) = 2 steps of S/2): 2 * (2us + 1e6/1e9 s).
  const auto sched =
      coll::make_schedule({CollectiveKind::kAllReduce, 2, 500000, 0}, {Algorithm::kRing, 1, 0});
  EXPECT_NEAR(time_to_us(simulate(t, *sched).total), 2 * (2.0 + 1000.0), 1e-6 * 2004);
  std::filesystem::remove(path);
  cclab::test::expect_invalid([&] { make_topology(path.string()); }, "cannot open file");
}

}  // namespace
}  // namespace cclab::sim
