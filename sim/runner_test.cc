// The schedule runner's execution model on hand-written programs: rendezvous,
// FIFO matching per pair, and deadlock detection.
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cclab/collectives/error.h"
#include "cclab/collectives/schedule.h"
#include "cclab/sim/simulator.h"
#include "cclab/sim/topology.h"
#include "test_util.h"

namespace cclab::sim {
namespace {

using coll::Region;
using coll::Step;
using coll::StepKind;
using test::rel_err;

coll::Program play(std::vector<Step> steps) {
  for (const Step& s : steps) co_yield s;
}

// A schedule whose programs are given literally.
class Script : public coll::Schedule {
 public:
  explicit Script(std::vector<std::vector<Step>> programs) : programs_(std::move(programs)) {
    shape_.ranks = static_cast<int>(programs_.size());
  }
  const coll::CollectiveShape& shape() const override { return shape_; }
  std::string name() const override { return "script"; }
  coll::Program program(int rank) const override { return play(programs_[rank]); }

 private:
  coll::CollectiveShape shape_;
  std::vector<std::vector<Step>> programs_;
};

Step send(int peer, std::uint64_t count) {
  Step s;
  s.kind = StepKind::kSend;
  s.peer = peer;
  s.src = Region{coll::BufferId::kInput, 0, count};
  return s;
}

Step recv(int peer, std::uint64_t count, std::int64_t dep = -1) {
  Step s;
  s.kind = StepKind::kRecv;
  s.peer = peer;
  s.dst = Region{coll::BufferId::kOutput, 0, count};
  if (dep >= 0) s.deps[s.num_deps++] = dep;
  return s;
}

TEST(Runner, TransferStartsWhenBothSidesAreIssued) {
  // switch, lat 1us, B = 10e9 B/s; 2500 f32 = 1e4 B take 2us + 1us = 3us.
  // Rank 1 first receives from rank 2 (done at 3us) and only then issues its
  // receive from rank 0 (dep on step 0). Rank 0's send is issued at 0 but,
  // with rendezvous, its transfer starts at 3us: rank 0 finishes at 6us (an
  // eager send would have finished at 3us, or later only through sharing).
  const Topology t = generate_topology("switch:n=3,bw=10GBps,lat=1us");
  const Script s({{send(1, 2500)}, {recv(2, 2500), recv(0, 2500, 0)}, {send(1, 2500)}});
  const SimResult r = simulate(t, s);
  EXPECT_LT(rel_err(time_to_us(r.rank_finish[0]), 6.0), 1e-9);
  EXPECT_LT(rel_err(time_to_us(r.rank_finish[2]), 3.0), 1e-9);
  EXPECT_EQ(r.total, r.rank_finish[0]);
}

TEST(Runner, MatchesFifoPerPair) {
  // Rank 0 sends 1000 then 3000 elements; rank 1 receives 1000 then 3000.
  // Both transfers start at 0 and share e0->sw and sw->e1 (B = 10e9 B/s, route
  // latency 2 x 500ns = 1us): 4000 B and 12000 B at 5e9 each; the small one ends at 1us + 0.8us,
  // leaving 8000 B for the large one alone at 1e10: 1.8us + 0.8us = 2.6us.
  const Topology t = generate_topology("switch:n=2,bw=10GBps,lat=500ns");
  const Script s({{send(1, 1000), send(1, 3000)}, {recv(0, 1000), recv(0, 3000)}});
  const SimResult r = simulate(t, s);
  EXPECT_LT(rel_err(time_to_us(r.total), 2.6), 1e-9);
  for (double b : {r.link_bytes[0], r.link_bytes[3]}) EXPECT_DOUBLE_EQ(b, 16000.0);
  // Receives in the other order cannot match sizes: an internal error, not a hang.
  const Script swapped({{send(1, 1000), send(1, 3000)}, {recv(0, 3000), recv(0, 1000)}});
  EXPECT_THROW(simulate(t, swapped), InternalError);
}

TEST(Runner, PairFifoPutsOnePairsMessagesOnTheWireOneAfterAnother) {
  // switch, lat 1us (routes 2us), B = 10e9 B/s: 2500 f32 = 1e4 B take 1us on
  // the wire. Rank 0 sends A then B to rank 1, which forwards A to rank 2 as
  // soon as it has it.
  //  - pairs=shared: A and B share the links from 2us at 5e9 B/s each and
  //    land together at 4us; the forward lands at 4 + 2 + 1 = 7us.
  //  - fifo (the default): A goes alone and lands at 3us, B's bytes follow it
  //    and land at 4us (no second latency); the forward lands at 3 + 3 = 6us.
  Step forward = send(2, 2500);
  forward.deps[forward.num_deps++] = 0;
  const Script s(
      {{send(1, 2500), send(1, 2500)}, {recv(0, 2500), recv(0, 2500), forward}, {recv(1, 2500)}});
  const SimResult shared =
      simulate(generate_topology("switch:n=3,bw=10GBps,lat=1us,pairs=shared"), s);
  EXPECT_LT(rel_err(time_to_us(shared.rank_finish[0]), 4.0), 1e-9);
  EXPECT_LT(rel_err(time_to_us(shared.rank_finish[2]), 7.0), 1e-9);
  const SimResult fifo = simulate(generate_topology("switch:n=3,bw=10GBps,lat=1us"), s);
  EXPECT_LT(rel_err(time_to_us(fifo.rank_finish[0]), 4.0), 1e-9);
  EXPECT_LT(rel_err(time_to_us(fifo.rank_finish[2]), 6.0), 1e-9);
  EXPECT_EQ(fifo.link_bytes, shared.link_bytes) << "the same bytes cross the same links";
}

TEST(Runner, DeadlockIsAnErrorNamingTheRank) {
  // Both ranks receive before they send, and receives block the send behind
  // them (dep): under rendezvous neither transfer can start.
  const Topology t = generate_topology("switch:n=2");
  Step s0 = send(1, 10), s1 = send(0, 10);
  s0.deps[s0.num_deps++] = 0;
  s1.deps[s1.num_deps++] = 0;
  const Script s({{recv(1, 10), s0}, {recv(0, 10), s1}});
  try {
    simulate(t, s);
    ADD_FAILURE() << "no exception";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("deadlocked: rank 0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cclab::sim
