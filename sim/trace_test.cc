// The Chrome trace and topology files read from disk.
#include "cclab/sim/trace.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cclab/collectives/algorithms.h"
#include "cclab/collectives/error.h"
#include "cclab/sim/simulator.h"
#include "cclab/sim/topology.h"

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
  TraceWriter trace(t);
  const SimResult r = simulate(t, *sched, {4, &trace});
  const auto doc = nlohmann::json::parse(trace.to_json());
  std::uint64_t slices = 0;
  double max_util = 0, last_util = -1;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") == "X") {
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
  try {
    make_topology(path.string());
    ADD_FAILURE() << "no exception";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("cannot open file"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cclab::sim
