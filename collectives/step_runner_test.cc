// The StepRunner's execution model: in-order issue, deps, fences, completion
// in any order, over windows both smaller and larger than its in-place ring.
#include "cclab/collectives/step_runner.h"

#include <algorithm>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "cclab/collectives/error.h"

namespace cclab::coll::detail {
namespace {

// n independent sends, then a fence, then one send that depends on send 0.
Program sends_then_fence(int n) {
  for (int i = 0; i < n; ++i) {
    Step s;
    s.kind = StepKind::kSend;
    s.peer = 1;
    co_yield s;
  }
  Step fence;
  co_yield fence;
  Step last;
  last.kind = StepKind::kSend;
  last.peer = 1;
  last.deps[0] = 0;
  last.num_deps = 1;
  co_yield last;
}

class StepRunnerWindow : public ::testing::TestWithParam<int> {};

TEST_P(StepRunnerWindow, CompletesInAnyOrderAndHonoursTheFence) {
  const int n = GetParam();
  StepRunner runner(sends_then_fence(n));
  std::vector<std::int64_t> issued;
  auto issue = [&](std::int64_t id, const Step& s) {
    if (s.kind == StepKind::kFence) return true;
    issued.push_back(id);
    return false;
  };
  runner.issue_ready(issue);
  ASSERT_EQ(issued.size(), static_cast<std::size_t>(n)) << "the fence must hold the rest back";
  std::vector<std::int64_t> order = issued;
  std::shuffle(order.begin(), order.end(), std::mt19937(n));
  for (std::size_t k = 0; k < order.size(); ++k) {
    EXPECT_EQ(runner.oldest_unfinished(), *std::min_element(order.begin() + k, order.end()));
    runner.complete(order[k]);
    runner.issue_ready(issue);
    if (k + 1 < order.size()) {
      EXPECT_EQ(issued.size(), static_cast<std::size_t>(n));
    }
  }
  // Fence (id n) completed at once; the last send (id n + 1) is now in flight.
  ASSERT_EQ(issued.size(), static_cast<std::size_t>(n + 1));
  EXPECT_EQ(issued.back(), n + 1);
  EXPECT_FALSE(runner.finished());
  runner.complete(n + 1);
  EXPECT_TRUE(runner.finished());
  EXPECT_THROW(runner.complete(n + 1), InternalError) << "completed twice";
}

// Windows below, at and above the in-place capacity, and several doublings.
INSTANTIATE_TEST_SUITE_P(Windows, StepRunnerWindow, ::testing::Values(1, 31, 32, 33, 100, 1000));

}  // namespace
}  // namespace cclab::coll::detail
