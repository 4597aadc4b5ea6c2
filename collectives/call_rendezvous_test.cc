#include "call_rendezvous.h"

#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "cclab/collectives/error.h"

namespace cclab::coll::detail {
namespace {

using std::chrono::milliseconds;

// Every set is launched once, in call order, with each rank's own call in its
// slot (the count encodes rank and call number, so a mix-up shows).
TEST(ThreadsCallRendezvous, LaunchesEverySetOnceInOrder) {
  constexpr int kRanks = 5, kCalls = 200;
  CallRendezvous rv(kRanks);
  std::vector<std::uint64_t> launched;
  std::atomic<int> bad{0};
  const auto launch = [&](std::uint64_t seq, const std::vector<CollectiveCall>& calls,
                          const std::vector<int>& variants) -> std::shared_ptr<void> {
    launched.push_back(seq);
    for (int r = 0; r < kRanks; ++r)
      if (calls[r].shape.count != seq * 100 + r || variants[r] != r) ++bad;
    return std::make_shared<std::uint64_t>(seq);
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      for (int k = 0; k < kCalls; ++k) {
        CollectiveCall c;
        c.shape.count = static_cast<std::uint64_t>(k) * 100 + r;
        auto t = rv.arrive(r, c, r, launch);
        EXPECT_EQ(t.seq, static_cast<std::uint64_t>(k));
        rv.wait_launched(t, r, milliseconds(10000));
        // Every rank sees the result of its own set's launch.
        EXPECT_EQ(*std::static_pointer_cast<std::uint64_t>(t.state->result), t.seq);
      }
    });
  for (auto& t : threads) t.join();
  ASSERT_EQ(launched.size(), static_cast<std::size_t>(kCalls));
  for (int k = 0; k < kCalls; ++k) EXPECT_EQ(launched[k], static_cast<std::uint64_t>(k));
  EXPECT_EQ(bad.load(), 0);
}

TEST(ThreadsCallRendezvous, MissingRankTimesOutNamingIt) {
  CallRendezvous rv(3);
  const auto nothing = [](auto, const auto&, const auto&) { return std::shared_ptr<void>(); };
  auto t0 = rv.arrive(0, {}, 0, nothing);
  rv.arrive(2, {}, 0, nothing);
  try {
    rv.wait_launched(t0, 0, milliseconds(50));
    FAIL() << "no timeout";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("rank(s) 1 never called it"), std::string::npos)
        << e.what();
  }
}

TEST(ThreadsCallRendezvous, LaunchErrorReachesEveryRank) {
  CallRendezvous rv(2);
  const auto fail = [](auto, const auto&, const auto&) -> std::shared_ptr<void> {
    throw InvalidArgument("ranks disagree");
  };
  auto t0 = rv.arrive(0, {}, 0, fail);
  auto t1 = rv.arrive(1, {}, 0, fail);
  EXPECT_THROW(rv.wait_launched(t0, 0, milliseconds(1000)), InvalidArgument);
  EXPECT_THROW(rv.launched(t1), InvalidArgument);
}

TEST(ThreadsCallRendezvous, BarrierTimesOutAlone) {
  CallRendezvous rv(2);
  EXPECT_THROW(rv.barrier(0, milliseconds(20)), TimeoutError);
}

}  // namespace
}  // namespace cclab::coll::detail
