// The event engine and the flow model against hand-derived values.
#include "cclab/sim/network.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <span>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cclab/sim/event_queue.h"
#include "cclab/sim/routing.h"
#include "cclab/sim/topology.h"
#include "test_util.h"

namespace cclab::sim {
namespace {

using test::rel_err;

TEST(EventQueue, TimeOrderThenInsertionOrder) {
  EventQueue<int> q;
  q.push(5, 1);
  q.push(3, 2);
  q.push(5, 3);
  q.push(3, 4);
  // Time 3 first (2 then 4: pushed in that order), then time 5 (1 then 3).
  const int expected[] = {2, 4, 1, 3};
  for (int want : expected) EXPECT_EQ(q.pop().payload, want);
  EXPECT_EQ(q.now(), 5);
  EXPECT_TRUE(q.empty());
  EXPECT_THROW(q.push(4, 0), InternalError);  // before now
}

// Runs the queue to the end; returns each finished tag's completion time.
std::map<std::uint64_t, Time> drain(SimQueue& q, Network& net) {
  std::map<std::uint64_t, Time> done;
  while (!q.empty()) {
    const auto e = q.pop();
    if (auto tag = net.handle(e.payload)) done[*tag] = q.now();
  }
  return done;
}

// Handles events until `flows` flows are active and the rates of that instant
// are shared (by the kReshare event queued behind the activations).
void run_until_active(SimQueue& q, Network& net, std::size_t flows) {
  while (net.active_flows() < flows) net.handle(q.pop().payload);
  while (!q.empty() && q.peek(0)->time == q.now()) net.handle(q.pop().payload);
}

TEST(Network, SingleFlowOverMultiHopPath) {
  // Fat tree, hosts on different leaves: host-leaf-spine-leaf-host, 4 links of
  // 1us each; host links 100 Gbps = 12.5e9 B/s, uplinks 40 Gbps = 5e9 B/s.
  // A lone flow of 1e6 B runs at the slowest link: 4us + 1e6/5e9 s = 204us.
  const Topology t =
      generate_topology("fat-tree:hosts=2,leaves=2,spines=1,bw=100Gbps,uplink=40Gbps,lat=1us");
  SimQueue q;
  Network net(t, q);
  Router router(t);
  const Route& r = router.route(t.endpoint(0), t.endpoint(1));
  ASSERT_EQ(r.links.size(), 4u);
  net.start(r, 1e6, 7);
  const auto done = drain(q, net);
  EXPECT_LT(rel_err(time_to_us(done.at(7)), 4.0 + 1e6 / 5e9 * 1e6), 1e-6);
}

TEST(Network, TwoFlowsShareALinkHalfEach) {
  // switch:n=3; e0->e2 and e1->e2 both cross sw->e2 (bw B = 10e9 B/s), so each
  // gets B/2 and both finish at 2*lat + S/(B/2) = 2us + 2*1e6/1e10 s = 202us.
  const Topology t = generate_topology("switch:n=3,bw=10GBps,lat=1us");
  SimQueue q;
  Network net(t, q);
  Router router(t);
  const FlowId a = net.start(router.route(t.endpoint(0), t.endpoint(2)), 1e6, 0);
  const FlowId b = net.start(router.route(t.endpoint(1), t.endpoint(2)), 1e6, 1);
  run_until_active(q, net, 2);
  EXPECT_DOUBLE_EQ(net.rate(a), 5e9);
  EXPECT_DOUBLE_EQ(net.rate(b), 5e9);
  const auto done = drain(q, net);
  EXPECT_LT(rel_err(time_to_us(done.at(0)), 202.0), 1e-6);
  EXPECT_LT(rel_err(time_to_us(done.at(1)), 202.0), 1e-6);
}

TEST(Network, MaxMinTextbookThreeFlowsTwoLinks) {
  // A chain n0 -A-> n1 -B-> n2, A = 10e9 B/s, B = 4e9 B/s, no latency.
  // Flows: f1 n0->n2 (A and B), f2 n0->n1 (A), f3 n1->n2 (B), 8e9 B each.
  // Progressive filling: fair shares A: 10/2 = 5, B: 4/2 = 2 (GB/s); B is
  // tighter, so f1 = f3 = 2; A keeps 10 - 2 = 8 for f2 alone: f2 = 8.
  // Completion: f2 at 8e9/8e9 = 1 s. Its departure frees A, but f1 is still
  // held by B at 2, so f1 and f3 finish at 8e9/2e9 = 4 s.
  Topology t;
  const NodeId n0 = t.add_endpoint("n0", true), n1 = t.add_endpoint("n1", true);
  const NodeId n2 = t.add_endpoint("n2", true);
  t.add_link(n0, n1, 10e9, 0);
  t.add_link(n1, n2, 4e9, 0);
  SimQueue q;
  Network net(t, q);
  Router router(t);
  const FlowId f1 = net.start(router.route(n0, n2), 8e9, 1);
  const FlowId f2 = net.start(router.route(n0, n1), 8e9, 2);
  const FlowId f3 = net.start(router.route(n1, n2), 8e9, 3);
  run_until_active(q, net, 3);
  EXPECT_DOUBLE_EQ(net.rate(f1), 2e9);
  EXPECT_DOUBLE_EQ(net.rate(f2), 8e9);
  EXPECT_DOUBLE_EQ(net.rate(f3), 2e9);
  const auto done = drain(q, net);
  EXPECT_LT(rel_err(time_to_seconds(done.at(2)), 1.0), 1e-6);
  EXPECT_LT(rel_err(time_to_seconds(done.at(1)), 4.0), 1e-6);
  EXPECT_LT(rel_err(time_to_seconds(done.at(3)), 4.0), 1e-6);
}

TEST(Network, RatesRiseWhenAFlowLeaves) {
  // switch:n=3, B = 10e9 B/s, no latency. e0->e2 with 1e9 B and e1->e2 with
  // 3e9 B share sw->e2 at 5e9 each. The small one ends at 1e9/5e9 = 0.2 s,
  // when the big one has 2e9 B left, now alone at 10e9: ends at 0.2 + 0.2 s.
  const Topology t = generate_topology("switch:n=3,bw=10GBps,lat=0");
  SimQueue q;
  Network net(t, q);
  Router router(t);
  net.start(router.route(t.endpoint(0), t.endpoint(2)), 1e9, 0);
  net.start(router.route(t.endpoint(1), t.endpoint(2)), 3e9, 1);
  const auto done = drain(q, net);
  EXPECT_LT(rel_err(time_to_seconds(done.at(0)), 0.2), 1e-6);
  EXPECT_LT(rel_err(time_to_seconds(done.at(1)), 0.4), 1e-6);
  EXPECT_DOUBLE_EQ(net.link_bytes()[router.route(t.endpoint(0), t.endpoint(2)).links[1]], 4e9);
}

TEST(Network, AFlowWithoutLatencyJoinsTheRefillOfTheInstantThatStartsIt) {
  // As RatesRiseWhenAFlowLeaves, and as the small flow lands at 0.2 s a third
  // starts e0->e2 with no latency (a pair's queued message put on the wire):
  // 1e9 B sharing sw->e2 with the big one's 2e9 B left, 5e9 each. It ends at
  // 0.2 + 0.2 s, the big one with 1e9 B left then alone at 1e10: at 0.5 s.
  // Refills: t=0 (the second flow joins the first), 0.2 s and 0.4 s, one
  // each: the third flow's arrival is refilled with the departure it follows.
  const Topology t = generate_topology("switch:n=3,bw=10GBps,lat=0");
  SimQueue q;
  Network net(t, q);
  Router router(t);
  const Route& e0_e2 = router.route(t.endpoint(0), t.endpoint(2));
  net.start(e0_e2, 1e9, 0);
  const FlowId big = net.start(router.route(t.endpoint(1), t.endpoint(2)), 3e9, 1);
  std::map<std::uint64_t, Time> done;
  FlowId third = 0;
  while (!q.empty()) {
    const auto e = q.pop();
    const auto tag = net.handle(e.payload);
    if (!tag) continue;
    done[*tag] = q.now();
    if (*tag != 0) continue;
    third = net.start(e0_e2.links, 0, 1e9, 2);
    EXPECT_EQ(net.active_flows(), 2u);  // active at once
    net.handle(q.pop().payload);        // the instant's refill
    EXPECT_DOUBLE_EQ(net.rate(third), 5e9);
    EXPECT_DOUBLE_EQ(net.rate(big), 5e9);
  }
  EXPECT_LT(rel_err(time_to_seconds(done.at(0)), 0.2), 1e-6);
  EXPECT_LT(rel_err(time_to_seconds(done.at(2)), 0.4), 1e-6);
  EXPECT_LT(rel_err(time_to_seconds(done.at(1)), 0.5), 1e-6);
  EXPECT_EQ(net.refills(), 3u);
}

// Max-min fair rates by the textbook's progressive filling, written apart
// from the model's: raise every unfrozen flow's rate together; the link with
// the least room per unfrozen flow saturates first and freezes its flows.
std::map<FlowId, double> reference_max_min(const std::map<FlowId, std::vector<LinkId>>& flows,
                                           const Topology& t) {
  std::map<FlowId, double> rate;
  std::vector<double> room(t.num_links());
  for (std::size_t l = 0; l < room.size(); ++l) room[l] = t.link(LinkId(l)).bw_bps;
  while (rate.size() < flows.size()) {
    std::vector<int> unfrozen(room.size(), 0);
    for (const auto& [id, links] : flows)
      if (!rate.count(id))
        for (LinkId l : links) ++unfrozen[l];
    LinkId tight = -1;
    for (std::size_t l = 0; l < room.size(); ++l)
      if (unfrozen[l] > 0 && (tight < 0 || room[l] / unfrozen[l] < room[tight] / unfrozen[tight]))
        tight = LinkId(l);
    const double share = room[tight] / unfrozen[tight];
    for (const auto& [id, links] : flows)
      if (!rate.count(id) && std::find(links.begin(), links.end(), tight) != links.end()) {
        rate[id] = share;
        for (LinkId l : links) room[l] -= share;
      }
  }
  return rate;
}

// What the driver below saw: instants checked, and the network's count of
// refills whose region grew.
struct InstantCounts {
  int instants = 0;
  std::uint64_t grown = 0;
};

// Picks a flow's two endpoints (indices into the topology's endpoints).
using PairPicker = std::function<std::pair<int, int>(std::mt19937_64&)>;

// Runs flows between endpoints that `pick` draws and, after every instant, checks
// every active flow's rate against the max-min rates of the flows then
// active. `initial` flows start together (one component where their routes
// overlap) and leave as they finish; `among` more arrive at instants where
// flows leave (every fifth instant), and `alone` at instants of their own
// (every third, after a latency of 1-1000 us), each of 0.1-1 GB.
InstantCounts check_instants_against_reference(const Topology& t, const PairPicker& pick,
                                               std::uint64_t seed, int initial, int among,
                                               int alone) {
  SCOPED_TRACE(fmt::format("seed {}", seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> bytes(1e8, 1e9);
  SimQueue q;
  Network net(t, q);
  Router router(t);
  // Flows by id: those active, and those that become active at a later time.
  std::map<FlowId, std::vector<LinkId>> active;
  std::map<FlowId, std::pair<Time, std::vector<LinkId>>> pending;
  std::map<std::uint64_t, FlowId> by_tag;
  std::uint64_t next_tag = 0;
  const auto start = [&](Time latency) {
    const auto [from, to] = pick(rng);
    const Route& r = router.route(t.endpoint(from), t.endpoint(to));
    const FlowId id = net.start(r.links, latency, bytes(rng), next_tag);
    pending[id] = {q.now() + latency, {r.links.begin(), r.links.end()}};
    by_tag[next_tag++] = id;
  };
  for (int i = 0; i < initial; ++i) start(0);
  InstantCounts seen;
  int arrived_among = 0, arrived_alone = 0;
  while (!q.empty()) {
    const auto e = q.pop();
    if (auto tag = net.handle(e.payload)) active.erase(by_tag.at(*tag));
    if (!q.empty() && q.peek(0)->time == q.now()) continue;  // the instant goes on
    if (++seen.instants % 5 == 0 && arrived_among < among) {
      ++arrived_among;
      start(0);
      continue;  // its instant goes on
    }
    for (auto it = pending.begin(); it != pending.end();)
      if (it->second.first <= q.now()) {
        active[it->first] = std::move(it->second.second);
        it = pending.erase(it);
      } else {
        ++it;
      }
    for (const auto& [id, want] : reference_max_min(active, t))
      EXPECT_LT(rel_err(net.rate(id), want), 1e-9)
          << "flow " << id << " after instant " << seen.instants << ", " << active.size()
          << " active";
    if (::testing::Test::HasFailure()) break;
    if (seen.instants % 3 == 0 && arrived_alone < alone) {
      ++arrived_alone;
      start(static_cast<Time>(1000 + rng() % 999'000));
    }
  }
  EXPECT_TRUE(active.empty());
  EXPECT_TRUE(pending.empty());
  EXPECT_EQ(next_tag, std::uint64_t(initial + among + alone));
  seen.grown = net.refills_grown();
  return seen;
}

// 48 flows over a chain of 8 links of 1-10 GB/s, each over a random stretch
// of it; 16 arrive among departures and 16 alone; five draws.
TEST(Network, RatesAfterEachInstantAreMaxMinFair) {
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    Topology t;
    std::vector<NodeId> nodes;
    for (int i = 0; i <= 8; ++i) nodes.push_back(t.add_endpoint(fmt::format("n{}", i), true));
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> bw(1e9, 1e10);
    for (int i = 0; i < 8; ++i) t.add_link(nodes[i], nodes[i + 1], bw(rng), 0);
    const auto forward = [](std::mt19937_64& r) {
      const int from = int(r() % 8);
      return std::pair{from, from + 1 + int(r() % (8 - from))};
    };
    const InstantCounts seen = check_instants_against_reference(t, forward, seed, 48, 16, 16);
    EXPECT_GE(seen.instants, 90);  // departures (nearly) one by one, and the lone arrivals
  }
}

// Any two different endpoints of n.
PairPicker any_pair(int n) {
  return [n](std::mt19937_64& r) {
    const int from = int(r() % n);
    return std::pair{from, (from + 1 + int(r() % (n - 1))) % n};
  };
}

// A departure whose effect travels the length of a chain: links 0..k, link
// 0 of 2 GB/s carrying f and g0, link i (1 <= i < k) of 2i+1 GB/s carrying
// g(i-1) and gi, link k (fast) gk-1 alone. Progressive filling gives f and
// g0 1 GB/s and gi i+1 (link i's room over g(i-1)'s rate). When f leaves,
// g0 and g1 share link 1 at 1.5, then g2 and g3 link 3 at 3.5 (link 2 has
// 5 - 1.5 for g2), and so on: g(2j) = g(2j+1) = 2j + 1.5. Every g changes,
// one link further each round of the local refill's growth: k - 1 rounds,
// past kLocalRounds (8) at k = 12, where it takes the whole reach instead.
void check_departure_along_a_chain(int k, std::uint64_t widened) {
  SCOPED_TRACE(fmt::format("chain of {} links", k + 1));
  Topology t;
  std::vector<NodeId> nodes;
  for (int i = 0; i <= k + 1; ++i) nodes.push_back(t.add_endpoint(fmt::format("n{}", i), true));
  std::vector<LinkId> links;
  for (int i = 0; i <= k; ++i) {
    const double gbps = i == 0 ? 2 : i < k ? 2 * i + 1 : 1000;
    links.push_back(t.add_link(nodes[i], nodes[i + 1], gbps * 1e9, 0));
  }
  SimQueue q;
  Network net(t, q);
  const FlowId f = net.start(std::span(links).first(1), 0, 1e6, 1000);
  std::vector<FlowId> g;
  for (int i = 0; i < k; ++i) g.push_back(net.start(std::span(links).subspan(i, 2), 0, 1e15, i));
  run_until_active(q, net, k + 1);
  EXPECT_DOUBLE_EQ(net.rate(f), 1e9);
  for (int i = 0; i < k; ++i) EXPECT_DOUBLE_EQ(net.rate(g[i]), (i + 1) * 1e9) << "g" << i;
  const std::uint64_t grown = net.refills_grown();
  std::optional<std::uint64_t> done;
  while (!done) done = net.handle(q.pop().payload);
  ASSERT_EQ(*done, 1000u);
  while (!q.empty() && q.peek(0)->time == q.now()) net.handle(q.pop().payload);
  for (int i = 0; i < k; ++i) EXPECT_DOUBLE_EQ(net.rate(g[i]), (i / 2 * 2 + 1.5) * 1e9) << "g" << i;
  EXPECT_EQ(net.refills_grown(), grown + 1);
  EXPECT_EQ(net.refills_widened(), widened);
}

TEST(Network, ADepartureThatMovesAWholeChainGrowsTheRefillAlongIt) {
  check_departure_along_a_chain(6, 0);   // 5 rounds
  check_departure_along_a_chain(12, 1);  // 11 rounds: the whole reach after 8
}

// A leaf-spine whose links all differ (1-10 GB/s): 4 leaves of 4 hosts, 3
// spines, so that flows meet on host links and on uplinks and a refill's
// effect travels beyond the seeds' neighbours. The local refill must grow
// its region there and still give the max-min rates after every instant.
TEST(Network, LocalRefillsGrowToTheMaxMinRatesOnALeafSpine) {
  std::uint64_t grown = 0;
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    Topology t;
    std::mt19937_64 rng(seed * 7919);
    std::uniform_real_distribution<double> bw(1e9, 1e10);
    std::vector<NodeId> leaves, spines;
    for (int s = 0; s < 3; ++s)
      spines.push_back(t.add_node(NodeKind::kSwitch, fmt::format("spine{}", s), true));
    for (int l = 0; l < 4; ++l) {
      leaves.push_back(t.add_node(NodeKind::kSwitch, fmt::format("leaf{}", l), true));
      for (NodeId s : spines) {
        t.add_link(leaves[l], s, bw(rng), 0);
        t.add_link(s, leaves[l], bw(rng), 0);
      }
      for (int h = 0; h < 4; ++h) {
        const NodeId host = t.add_endpoint(fmt::format("h{}", 4 * l + h));
        t.add_link(host, leaves[l], bw(rng), 0);
        t.add_link(leaves[l], host, bw(rng), 0);
      }
    }
    grown += check_instants_against_reference(t, any_pair(16), seed, 64, 24, 24).grown;
  }
  EXPECT_GT(grown, 0u);
}

// The same on the generated fat tree, whose links all run at one rate: its
// rates tie at every level, where the checks' tolerances must neither take
// rounding for a change nor miss one.
TEST(Network, LocalRefillsGiveTheMaxMinRatesWhereRatesTie) {
  const Topology t = generate_topology("fat-tree:hosts=16,leaves=4,spines=2,lat=0");
  for (std::uint64_t seed = 1; seed <= 4; ++seed)
    check_instants_against_reference(t, any_pair(16), seed, 64, 24, 24);
}

}  // namespace
}  // namespace cclab::sim
