// FrameArena: programs whose frames come from an arena yield exactly the steps
// of heap-allocated ones, whether the frames fit the block or spill, and
// however the arena moves or which arena is current when frames are freed.
#include "cclab/collectives/generator.h"

#include <vector>

#include <gtest/gtest.h>

#include "cclab/collectives/algorithms.h"
#include "cclab/collectives/schedule.h"

namespace cclab::coll {
namespace {

std::vector<Step> drain(Program p) {
  std::vector<Step> steps;
  while (p.next()) steps.push_back(p.value());
  return steps;
}

void expect_same(const std::vector<Step>& a, const std::vector<Step>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].kind, b[i].kind) << i;
    EXPECT_EQ(a[i].peer, b[i].peer) << i;
    EXPECT_EQ(describe(a[i]), describe(b[i])) << i;
    EXPECT_EQ(a[i].deps, b[i].deps) << i;
  }
}

std::unique_ptr<Schedule> hier_schedule() {
  return make_schedule({CollectiveKind::kAllReduce, 24, 1009, 0},
                       {Algorithm::kHierarchical, 2, 4, Algorithm::kHalvingDoubling});
}

TEST(FrameArena, ProgramsFromAnArenaYieldTheHeapProgramsSteps) {
  const auto sched = hier_schedule();
  for (int rank : {0, 5, 23}) {
    const auto reference = drain(sched->program(rank));  // frames on the heap
    FrameArena arena;
    std::vector<Step> steps;
    {
      ScopedFrameArena scope(arena);
      steps = drain(sched->program(rank));
    }
    expect_same(steps, reference);
    EXPECT_GT(arena.used(), 1000u) << "the frames came from the arena";
    EXPECT_LE(arena.used(), 4096u);
  }
}

TEST(FrameArena, FramesThatDoNotFitSpillToTheHeap) {
  const auto sched = hier_schedule();
  const auto reference = drain(sched->program(7));
  FrameArena tiny(512);
  ScopedFrameArena scope(tiny);
  expect_same(drain(sched->program(7)), reference);
  EXPECT_LE(tiny.used(), 512u);
}

TEST(FrameArena, ArenaMovesWhileFramesLiveAndFramesFreeUnderAnotherScope) {
  const auto sched = hier_schedule();
  const auto reference = drain(sched->program(9));
  FrameArena first;
  Program p;
  {
    ScopedFrameArena scope(first);
    p = sched->program(9);
    ASSERT_TRUE(p.next());  // nested frames exist now
  }
  FrameArena moved = std::move(first);
  std::vector<Step> steps{p.value()};
  {
    ScopedFrameArena scope(moved);
    while (p.next()) steps.push_back(p.value());
  }
  expect_same(steps, reference);
  FrameArena other;
  ScopedFrameArena scope(other);
  p = Program();  // frees the frames into `moved`, not the current arena
  EXPECT_EQ(other.used(), FrameArena().used()) << "nothing allocated from the current arena";
}

}  // namespace
}  // namespace cclab::coll
