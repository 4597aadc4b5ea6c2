// The Chrome trace and topology files read from disk.
#include "cclab/sim/trace.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
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

// The parts of a trace a filter is checked on: slices as (pid, tid, name, ts,
// dur) in picoseconds, and each link counter's (ts, value) changes.
struct Parsed {
  std::multiset<std::tuple<int, int, std::string, Time, Time>> slices;
  std::map<std::string, std::vector<std::pair<Time, double>>> counters;
};

Time ps(const nlohmann::json& us) { return std::llround(us.get<double>() * 1e6); }

Parsed trace_of(const Topology& t, const coll::Schedule& sched, TraceFilter filter,
                SimResult* result = nullptr) {
  std::ostringstream text;
  TraceWriter trace(t, text, std::move(filter));
  const SimResult r = simulate(t, sched, {4, &trace});
  trace.finish();
  if (result) *result = r;
  Parsed p;
  const auto doc = nlohmann::json::parse(text.str());
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") == "X")
      p.slices.emplace(e.at("pid").get<int>(), e.at("tid").get<int>(),
                       e.at("name").get<std::string>(), ps(e.at("ts")), ps(e.at("dur")));
    if (e.at("ph") != "C") continue;
    auto& changes = p.counters[e.at("name")];
    const double v = e.at("args").at("utilisation");
    if (changes.empty() || changes.back().second != v) changes.emplace_back(ps(e.at("ts")), v);
  }
  return p;
}

// A counter's value at `t`: its last change at or before t (0 before any).
double value_at(const std::vector<std::pair<Time, double>>& changes, Time t) {
  double v = 0;
  for (const auto& [ts, u] : changes)
    if (ts <= t) v = u;
  return v;
}

// --trace-ranks 1,2 --trace-window over a third of an 8-rank ring
// with a host overhead, against the whole trace filtered here: the slices
// of ranks 1 and 2 that overlap the window, and the counters of the links
// their messages cross (read from their send and receive slices), equal
// to the whole trace's at every instant of the window.
TEST(Trace, FilterKeepsTheRanksAndWindowAsked) {
  const Topology t = generate_topology("switch:n=8,bw=10GBps,lat=1us,overhead=1us");
  const auto sched =
      coll::make_schedule({CollectiveKind::kAllReduce, 8, 16000, 0}, {Algorithm::kRing, 2, 0});
  SimResult r;
  const Parsed whole = trace_of(t, *sched, {}, &r);
  TraceFilter filter;
  filter.ranks = parse_rank_list("1-2", 8, "--trace-ranks");
  // From just after rank 1's uplink gets busy past a third of the run, so
  // the window opens with a counter to carry over.
  const auto& uplink = whole.counters.at("link e1->sw");
  const auto busy = std::find_if(uplink.begin(), uplink.end(), [&](const auto& c) {
    return c.first > r.total / 3 && c.second > 0;
  });
  ASSERT_NE(busy, uplink.end());
  filter.from = busy->first + 1;
  filter.until = filter.from + r.total / 3;
  ASSERT_GT(value_at(uplink, filter.from), 0);
  const Parsed part = trace_of(t, *sched, filter);

  std::multiset<std::tuple<int, int, std::string, Time, Time>> expected;
  std::set<std::string> links;  // those ranks 1 and 2 send or receive on
  for (const auto& sl : whole.slices) {
    const auto& [pid, tid, name, ts, dur] = sl;
    if (tid != 1 && tid != 2) continue;
    if (ts + dur >= filter.from && ts <= filter.until) expected.insert(sl);
    if (pid != 0) continue;
    const std::string peer = name.substr(name.find(' ') + 1, 1);
    const std::string self = std::to_string(tid);
    if (name.starts_with("send "))
      links.insert({"link e" + self + "->sw", "link sw->e" + peer});
    else if (name.starts_with("recv"))
      links.insert({"link e" + peer + "->sw", "link sw->e" + self});
  }
  EXPECT_EQ(part.slices, expected);
  ASSERT_GT(expected.size(), 4u);
  EXPECT_LT(expected.size(), whole.slices.size() / 4);
  EXPECT_EQ(links.size(), 6u);  // each rank's two links, and one of each neighbour's

  for (const auto& [name, changes] : part.counters) {
    EXPECT_TRUE(links.contains(name)) << name << " is no link of ranks 1 and 2";
    for (const auto& [ts, v] : changes) {
      EXPECT_GE(ts, filter.from) << name;
      EXPECT_LE(ts, filter.until) << name;
    }
  }
  for (const std::string& name : links) {
    const auto& changes = whole.counters.at(name);
    std::vector<Time> instants{filter.from};
    for (const auto& [ts, v] : changes)
      if (ts >= filter.from && ts <= filter.until) instants.push_back(ts);
    const auto it = part.counters.find(name);
    for (Time at : instants) {
      const double got = it == part.counters.end() ? 0 : value_at(it->second, at);
      EXPECT_EQ(got, value_at(changes, at)) << name << " at " << at << " ps";
    }
  }
}

TEST(Trace, RankListsAndWindowsRefuseWhatTheyCannotMean) {
  EXPECT_EQ(parse_rank_list("0,2-3", 5, "--trace-ranks"),
            (std::vector<bool>{true, false, true, true, false}));
  cclab::test::expect_invalid([] { parse_rank_list("5", 5, "--trace-ranks"); },
                              "--trace-ranks: rank 5 is not one of the 5 ranks (allowed: 0 to 4)");
  cclab::test::expect_invalid([] { parse_rank_list("3-1", 5, "--trace-ranks"); },
                              "'3-1' runs backwards");
  for (const char* bad : {"", "1,", "a", "1-", "-1", "1-2-3", "1.5"})
    cclab::test::expect_invalid([&] { parse_rank_list(bad, 5, "--trace-ranks"); },
                                "--trace-ranks: ");
  TraceFilter f;
  parse_time_window("10us:2ms", "--trace-window", f);
  EXPECT_EQ(f.from, 10'000'000);
  EXPECT_EQ(f.until, 2'000'000'000);
  parse_time_window(":5ns", "--trace-window", f);
  EXPECT_EQ(f.from, 0);
  EXPECT_EQ(f.until, 5'000);
  parse_time_window("1us:", "--trace-window", f);
  EXPECT_EQ(f.until, std::numeric_limits<Time>::max());
  cclab::test::expect_invalid([&] { parse_time_window("2us:1us", "--trace-window", f); },
                              "--trace-window: '2us:1us' ends before it starts");
  cclab::test::expect_invalid([&] { parse_time_window("10us", "--trace-window", f); },
                              "is not FROM:UNTIL");
  cclab::test::expect_invalid([&] { parse_time_window("1parsec:", "--trace-window", f); },
                              "--trace-window");
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
