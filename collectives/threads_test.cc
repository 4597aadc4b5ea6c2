// Behaviour of the threads backend beyond plain numerics: bitwise identity
// and determinism with inexact inputs, in place, non-blocking calls, split,
// timeouts and failure propagation.
#include "cclab/collectives/threads.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cclab/collectives/error.h"
#include "test_util.h"

namespace cclab::coll {
namespace {

std::vector<float> random_floats(int rank, std::size_t n) {
  std::mt19937 gen(1234 + rank);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen) * std::pow(10.f, static_cast<float>(gen() % 7) - 3);
  return v;
}

// With inputs where the reduction order changes the rounding, every rank
// still ends with the same bits, and a second run gives the same bits again.
TEST(Threads, BitwiseIdenticalAndDeterministic) {
  for (auto algo : algorithms_for(CollectiveKind::kAllReduce)) {
    for (int n : {3, 8}) {
      const std::size_t count = 10007;
      std::vector<std::vector<float>> first(n), second(n);
      ThreadsWorld world(n);
      world.run([&](Communicator& c) {
        auto in = random_floats(c.rank(), count);
        std::vector<float> out(count);
        for (auto* dst : {&first, &second}) {
          c.allreduce(in.data(), out.data(), count, DataType::kF32, ReduceOp::kSum, {algo, 3});
          (*dst)[c.rank()] = out;
        }
      });
      // A loose sanity check against a double-precision sum.
      for (std::size_t i = 0; i < count; i += 997) {
        double sum = 0;
        for (int r = 0; r < n; ++r) sum += random_floats(r, count)[i];
        EXPECT_NEAR(first[0][i], sum, 1e-3 + 1e-5 * std::abs(sum));
      }
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(std::memcmp(first[r].data(), first[0].data(), count * 4), 0)
            << algorithm_name(algo) << " n=" << n << " rank " << r << " differs from rank 0";
        EXPECT_EQ(std::memcmp(first[r].data(), second[r].data(), count * 4), 0)
            << algorithm_name(algo) << " n=" << n << " rank " << r << " differs between runs";
      }
    }
  }
}

// In place (NCCL's conventions for where the data sits) gives the serial
// reference too, for every collective and algorithm.
TEST(Threads, InPlaceEveryCollective) {
  const int n = 5;
  const std::uint64_t count = 1001;
  for (auto kind : {CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter,
                    CollectiveKind::kAllGather, CollectiveKind::kBroadcast}) {
    for (auto algo : algorithms_for(kind)) {
      ThreadsWorld world(n);
      world.run([&](Communicator& c) {
        const int r = c.rank();
        const CollectiveShape shape{kind, n, count, 2};
        std::vector<std::int32_t> buf(std::max(shape.input_count(), shape.output_count()));
        const std::uint64_t in_at = kind == CollectiveKind::kAllGather ? count * r : 0;
        const std::uint64_t out_at = kind == CollectiveKind::kReduceScatter ? count * r : 0;
        test::fill_input(buf.data() + in_at, shape.input_count(), DataType::kI32, ReduceOp::kSum,
                         r);
        c.start({shape,
                 DataType::kI32,
                 ReduceOp::kSum,
                 buf.data() + in_at,
                 buf.data() + out_at,
                 {algo, 2}})
            .wait();
        for (std::uint64_t i = 0; i < shape.output_count(); ++i) {
          std::int32_t want = 0;
          if (kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kReduceScatter)
            test::reference_value(&want, i + out_at, DataType::kI32, ReduceOp::kSum, n);
          else if (kind == CollectiveKind::kAllGather)
            want = test::input_value(static_cast<int>(i / count), i % count, ReduceOp::kSum);
          else
            want = test::input_value(2, i, ReduceOp::kSum);
          ASSERT_EQ(buf[out_at + i], want) << collective_name(kind) << " " << algorithm_name(algo)
                                           << " rank " << r << " element " << i;
        }
      });
    }
  }
}

// Several collectives in flight at once, waited in reverse order, are matched
// across ranks by issue order.
TEST(Threads, NonBlockingCallsInFlight) {
  const int n = 4;
  ThreadsWorld world(n);
  world.run([&](Communicator& c) {
    const std::vector<Algorithm> algos = {Algorithm::kRing, Algorithm::kTree,
                                          Algorithm::kHalvingDoubling, Algorithm::kDirect,
                                          Algorithm::kHierarchical};
    std::vector<std::vector<std::int64_t>> in, out;
    std::vector<Request> reqs;
    for (std::size_t k = 0; k < algos.size(); ++k) {
      const std::uint64_t count = 100 + 37 * k;
      in.emplace_back(count, c.rank() + 10 * static_cast<std::int64_t>(k));
      out.emplace_back(count, -1);
    }
    for (std::size_t k = 0; k < algos.size(); ++k)
      reqs.push_back(c.iallreduce(in[k].data(), out[k].data(), in[k].size(), DataType::kI64,
                                  ReduceOp::kSum, {algos[k], 2}));
    for (std::size_t k = algos.size(); k-- > 0;) {
      reqs[k].wait();
      // sum over r of (r + 10k) = n(n-1)/2 + 10kn
      const std::int64_t want = n * (n - 1) / 2 + 10 * static_cast<std::int64_t>(k) * n;
      for (auto v : out[k]) ASSERT_EQ(v, want) << algorithm_name(algos[k]);
    }
  });
}

// hier in chunks with the ring between groups, or hd between a power of two
// of groups, is one pipeline of waves (hierarchical.cc): exact sums against
// the closed form, in and out of place, for one wave (4 chunks) and several
// uneven ones (9, 16), groups of 2 and 4 (4 and 2 groups), on a count that
// splits unevenly everywhere.
TEST(Threads, PipelinedHierAllReducesExactly) {
  const int n = 8;
  const std::size_t count = 1009;
  ThreadsWorld world(n);
  world.run([&](Communicator& c) {
    for (auto inner : {Algorithm::kRing, Algorithm::kHalvingDoubling})
      for (int g : {2, 4})
        for (int chunks : {4, 9, 16})
          for (bool in_place : {false, true}) {
            std::vector<double> in(count), out(count, -1.0);
            for (std::size_t i = 0; i < count; ++i) in[i] = c.rank() + static_cast<double>(i);
            double* dst = in_place ? in.data() : out.data();
            c.allreduce(in.data(), dst, count, DataType::kF64, ReduceOp::kSum,
                        {Algorithm::kHierarchical, chunks, g, inner});
            for (std::size_t i = 0; i < count; ++i)
              ASSERT_EQ(dst[i], n * (n - 1) / 2.0 + n * static_cast<double>(i))
                  << algorithm_name(inner) << " between groups, g " << g << " chunks " << chunks
                  << (in_place ? " in place" : "") << " rank " << c.rank() << " element " << i;
          }
  });
}

// hier/biring runs bidirectional rings inside its groups and between them:
// exact sums against the closed form, in and out of place, groups of 2, 4
// and 8 (one group: biring alone), on a count that splits unevenly.
TEST(Threads, HierWithBiringAllReducesExactly) {
  const int n = 8;
  const std::size_t count = 1009;
  ThreadsWorld world(n);
  world.run([&](Communicator& c) {
    for (int g : {2, 4, 8})
      for (int chunks : {1, 3})
        for (bool in_place : {false, true}) {
          std::vector<double> in(count), out(count, -1.0);
          for (std::size_t i = 0; i < count; ++i) in[i] = c.rank() + static_cast<double>(i);
          double* dst = in_place ? in.data() : out.data();
          c.allreduce(in.data(), dst, count, DataType::kF64, ReduceOp::kSum,
                      {Algorithm::kHierarchical, chunks, g, Algorithm::kBiRing});
          for (std::size_t i = 0; i < count; ++i)
            ASSERT_EQ(dst[i], n * (n - 1) / 2.0 + n * static_cast<double>(i))
                << "g " << g << " chunks " << chunks << (in_place ? " in place" : "") << " rank "
                << c.rank() << " element " << i;
        }
  });
}

// hier over three and four levels (AlgoConfig::upper_groups) on threads:
// exact against the closed form, every inner algorithm, in and out of place.
TEST(Threads, MultilevelHierAllReducesExactly) {
  const int n = 12;
  const std::size_t count = 1009;
  ThreadsWorld world(n);
  world.run([&](Communicator& c) {
    for (const std::vector<int>& levels : {std::vector<int>{2, 3}, {3, 2, 2}, {2, 2, 3}, {4}})
      for (auto inner : inner_algorithms())
        for (bool in_place : {false, true})
          for (bool rotate : {false, true}) {
            if (levels.size() == 1 && !rotate) continue;  // two levels one way: hier itself
            std::vector<double> in(count), out(count, -1.0);
            for (std::size_t i = 0; i < count; ++i) in[i] = c.rank() + static_cast<double>(i);
            double* dst = in_place ? in.data() : out.data();
            AlgoConfig cfg{Algorithm::kHierarchical, 2, levels.front(), inner};
            cfg.upper_groups.assign(levels.begin() + 1, levels.end());
            cfg.rotate_levels = rotate;
            c.allreduce(in.data(), dst, count, DataType::kF64, ReduceOp::kSum, cfg);
            for (std::size_t i = 0; i < count; ++i)
              ASSERT_EQ(dst[i], n * (n - 1) / 2.0 + n * static_cast<double>(i))
                  << group_levels_name(levels.front(), cfg.upper_groups)
                  << (rotate ? " rotated" : "") << " inner " << algorithm_name(inner)
                  << (in_place ? " in place" : "") << " rank " << c.rank() << " element " << i;
          }
  });
}

// Reduce-scatter and all-gather with `config` against the closed form, out
// of place: rank r's element i of its input is r + i, so block b's element
// i sums to n(n-1)/2 + n(b count + i); all-gather's rank r contributes
// r count + i at element i. Stops at the first wrong element, named with
// `what`.
void expect_exact_blocks(Communicator& c, const AlgoConfig& config, std::size_t count,
                         const std::string& what) {
  const int n = c.size();
  std::vector<double> in(n * count), block(count, -1.0);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = c.rank() + static_cast<double>(i);
  c.reduce_scatter(in.data(), block.data(), count, DataType::kF64, ReduceOp::kSum, config);
  for (std::size_t i = 0; i < count; ++i)
    ASSERT_EQ(block[i], n * (n - 1) / 2.0 + n * static_cast<double>(c.rank() * count + i))
        << "reduce-scatter " << what << " element " << i;
  std::vector<double> mine(count), all(n * count, -1.0);
  for (std::size_t i = 0; i < count; ++i) mine[i] = static_cast<double>(c.rank() * count + i);
  c.all_gather(mine.data(), all.data(), count, DataType::kF64, config);
  for (std::size_t i = 0; i < all.size(); ++i)
    ASSERT_EQ(all[i], static_cast<double>(i)) << "all-gather " << what << " element " << i;
}

// hier's reduce-scatter and all-gather in chunks are pipelines too: exact
// blocks against the closed form, groups of 2 and 4, chunks 4, 9 and 16, on a
// count that splits unevenly (out of place; in place is NCCL's layout, which
// the checker proves).
TEST(Threads, PipelinedHierReduceScattersAndAllGathersExactly) {
  const int n = 8;
  const std::size_t count = 337;
  ThreadsWorld world(n);
  world.run([&](Communicator& c) {
    for (auto inner : {Algorithm::kRing, Algorithm::kHalvingDoubling})
      for (int g : {2, 4})
        for (int chunks : {1, 4, 9, 16}) {
          if (inner == Algorithm::kRing && chunks == 1) continue;  // the phased form
          const AlgoConfig config{Algorithm::kHierarchical, chunks, g, inner};
          expect_exact_blocks(c, config, count,
                              fmt::format("{} between groups, g {} chunks {} rank {}",
                                          algorithm_name(inner), g, chunks, c.rank()));
        }
  });
}

// hier's reduce-scatter and all-gather in levels, one way and rotated, in 1
// and 3 chunks: exact blocks against the closed form (12 ranks, levels 2x3,
// 3x2x2, and 4 rotated; a count that splits unevenly into the parts).
TEST(Threads, MultilevelHierReduceScattersAndAllGathersExactly) {
  const int n = 12;
  const std::size_t count = 101;
  ThreadsWorld world(n);
  world.run([&](Communicator& c) {
    for (const std::vector<int>& levels : {std::vector<int>{2, 3}, {3, 2, 2}, {4}})
      for (int chunks : {1, 3})
        for (bool rotate : {false, true}) {
          if (levels.size() == 1 && !rotate) continue;  // two levels one way: hier itself
          AlgoConfig cfg{Algorithm::kHierarchical, chunks, levels.front()};
          cfg.upper_groups.assign(levels.begin() + 1, levels.end());
          cfg.rotate_levels = rotate;
          expect_exact_blocks(c, cfg, count,
                              fmt::format("{}{} chunks {} rank {}",
                                          group_levels_name(levels.front(), cfg.upper_groups),
                                          rotate ? " rotated" : "", chunks, c.rank()));
        }
  });
}

// split(color, key): ranks of one color form a communicator ordered by key.
TEST(Threads, SplitOrdersByKey) {
  ThreadsWorld world(6);
  world.run([&](Communicator& c) {
    const int color = c.rank() % 2;
    auto sub = c.split(color, -c.rank());  // reverse order inside each color
    ASSERT_NE(sub, nullptr);
    EXPECT_EQ(sub->size(), 3);
    // Ranks of a color are {color, color+2, color+4}; the largest gets rank 0.
    EXPECT_EQ(sub->rank(), (4 + color - c.rank()) / 2);
    std::int32_t v = c.rank(), sum = 0;
    sub->allreduce(&v, &sum, 1, DataType::kI32, ReduceOp::kSum);
    EXPECT_EQ(sum, color == 0 ? 0 + 2 + 4 : 1 + 3 + 5);
    auto none = c.split(c.rank() == 0 ? -1 : 0, 0);
    EXPECT_EQ(none == nullptr, c.rank() == 0);
  });
}

TEST(Threads, TimeoutNamesRankPeerAndStep) {
  ThreadsWorld world(2, {std::chrono::milliseconds(300)});
  std::string error;
  try {
    world.run([&](Communicator& c) {
      if (c.rank() == 1) return;  // never joins the collective
      std::vector<float> buf(64, 1.f);
      c.allreduce(buf.data(), buf.data(), buf.size(), DataType::kF32, ReduceOp::kSum,
                  {Algorithm::kRing});
    });
  } catch (const TimeoutError& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("rank 0"), std::string::npos) << error;
  EXPECT_NE(error.find("waiting for rank 1"), std::string::npos) << error;
  EXPECT_NE(error.find("step"), std::string::npos) << error;
  EXPECT_NE(error.find("allreduce"), std::string::npos) << error;
}

// One rank failing stops the others quickly (no wait for the timeout), each
// with an error naming the failed rank, and run() rethrows the root cause.
TEST(Threads, FailureOfOneRankStopsTheOthers) {
  ThreadsWorld world(4, {std::chrono::milliseconds(60000)});
  std::vector<std::string> seen(4);
  std::string root_cause;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    world.run([&](Communicator& c) {
      try {
        if (c.rank() == 2) throw std::runtime_error("boom");
        std::vector<float> buf(1024, 1.f);
        c.allreduce(buf.data(), buf.data(), buf.size(), DataType::kF32, ReduceOp::kSum);
      } catch (const std::exception& e) {
        seen[c.rank()] = e.what();
        throw;
      }
    });
  } catch (const std::exception& e) {
    root_cause = e.what();
  }
  EXPECT_EQ(root_cause, "boom");
  for (int r : {0, 1, 3}) EXPECT_NE(seen[r].find("rank 2 failed"), std::string::npos) << seen[r];
  // Not a timing assertion on speed: only that nobody waited for the 60 s timeout.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
}

TEST(Threads, AvgDividesOnceAtTheEnd) {
  const int n = 3;
  ThreadsWorld world(n);
  world.run([&](Communicator& c) {
    // Ranks contribute 1, 2, 4: the f32 average is 7/3 rounded once.
    float v = static_cast<float>(1 << c.rank()), out = 0;
    for (auto algo : algorithms_for(CollectiveKind::kAllReduce)) {
      c.allreduce(&v, &out, 1, DataType::kF32, ReduceOp::kAvg, {algo});
      EXPECT_EQ(out, 7.f / 3.f) << algorithm_name(algo);
    }
  });
}

// Hundreds of ranks as threads: a ring of descriptors exists only for the
// pairs that exchange messages (every pair had one, 4 KiB each: 1.1 GB at 512
// ranks), and a rank polls only its own. The sum of rank + i is closed-form.
TEST(ManyRanks, FiveHundredTwelveThreadsAllReduceExactly) {
  const int n = 512;
  const std::size_t count = 300;
  ThreadsWorld world(n);
  world.run([&](Communicator& c) {
    std::vector<double> in(count), out(count);
    for (std::size_t i = 0; i < count; ++i) in[i] = c.rank() + static_cast<double>(i);
    for (auto algo : {Algorithm::kHalvingDoubling, Algorithm::kTree, Algorithm::kHierarchical}) {
      std::fill(out.begin(), out.end(), -1.0);
      c.allreduce(in.data(), out.data(), count, DataType::kF64, ReduceOp::kSum, {algo});
      for (std::size_t i = 0; i < count; ++i)
        ASSERT_EQ(out[i], n * (n - 1) / 2.0 + n * static_cast<double>(i))
            << algorithm_name(algo) << " rank " << c.rank() << " element " << i;
    }
  });
}

TEST(ManyRanks, MoreThanTheLimitIsRefusedByName) {
  try {
    ThreadsWorld world(kThreadsMaxRanks + 1);
    FAIL() << "accepted " << kThreadsMaxRanks + 1 << " ranks";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(fmt::format("must be 1 to {}", kThreadsMaxRanks)),
              std::string::npos)
        << e.what();
  }
}

// A thread the system refuses (address space capped, so no stack for it):
// run() stops and joins the ranks it started and names the refused one,
// where it used to destroy joinable threads (std::terminate).
TEST(ManyRanks, RefusedThreadIsAnErrorNotAnAbort) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "sanitizers reserve address space beyond any cap this test could set";
#else
  const auto capped_run = [] {
    std::ifstream statm("/proc/self/statm");
    std::size_t pages = 0;
    statm >> pages;
    const rlim_t cap = pages * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) + (96u << 20);
    const rlimit lim{cap, cap};
    if (setrlimit(RLIMIT_AS, &lim) != 0) std::_Exit(3);
    ThreadsWorld world(64, {std::chrono::milliseconds(20000)});
    try {
      world.run([](Communicator& c) {  // 8 MiB stacks: not all 64 fit in 96 MiB
        std::vector<float> buf(256, 1.f);
        c.allreduce(buf.data(), buf.data(), buf.size(), DataType::kF32, ReduceOp::kSum);
      });
    } catch (const Error& e) {
      std::fprintf(stderr, "%s\n", e.what());
      std::_Exit(0);
    }
    std::_Exit(2);  // every thread started: the cap did not bite
  };
  EXPECT_EXIT(capped_run(), ::testing::ExitedWithCode(0),
              "cannot start the thread of rank [0-9]+ of 64: ");
#endif
}

}  // namespace
}  // namespace cclab::coll
