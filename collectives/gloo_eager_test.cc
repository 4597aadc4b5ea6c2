// The gloo executor's eager messages (gloo_eager.h), with every rank a thread
// of this process and its own Gloo context over 127.0.0.1: results against a
// naive sum for sizes either side of the eager limit, messages that arrive
// before their step is issued, more messages in flight than a ring has
// entries, and ranks that disagree on the size of a message; hier grouping
// the ranks of a host, which needs ranks on several hosts; and the memory the
// rings live in.
#include "gloo_eager.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "cclab/collectives/error.h"
#include "cclab/collectives/gloo.h"

namespace cclab::coll {
namespace {

using Body = std::function<void(Communicator&)>;

// Runs `body` on `n` ranks, each a thread with its own communicator; returns
// each rank's error text ("" when it returned normally). Rank r says it runs
// on host `hosts[r]` when given, else all on "localhost".
std::vector<std::string> run_ranks(int n, std::size_t eager_bytes, const Body& body,
                                   std::chrono::milliseconds timeout = std::chrono::seconds(20),
                                   const std::vector<std::string>& hosts = {}) {
  static std::atomic<int> run_id{0};
  const auto dir =
      std::filesystem::temp_directory_path() /
      ("cclab_eager_test_" + std::to_string(::getpid()) + "_" + std::to_string(run_id++));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        GlooOptions o;
        o.rank = r;
        o.world_size = n;
        o.rendezvous = parse_rendezvous("file:" + dir.string(), "test");
        o.host = "127.0.0.1";
        o.host_name = hosts.empty() ? "localhost" : hosts[r];
        o.timeout = timeout;
        o.eager_bytes = eager_bytes;
        auto comm = make_gloo_communicator(o);
        body(*comm);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  std::filesystem::remove_all(dir);
  return errors;
}

// Rank r's input: small integers, so float sums are exact. Not test_util.h's
// input_value: its values repeat every 5 elements, and here `salt` must make
// the 40 collectives in flight together carry different data, so that a
// message delivered to the wrong one shows.
std::vector<float> input(int rank, std::size_t count, int salt = 0) {
  std::vector<float> v(count);
  for (std::size_t i = 0; i < count; ++i)
    v[i] = static_cast<float>((i * 7 + static_cast<std::size_t>(rank) * 13 + salt) % 101);
  return v;
}

// The sum over ranks, element by element, computed here.
std::vector<float> naive_sum(int n, std::size_t count, int salt = 0) {
  std::vector<float> sum(count, 0.0f);
  for (int r = 0; r < n; ++r) {
    const auto v = input(r, count, salt);
    for (std::size_t i = 0; i < count; ++i) sum[i] += v[i];
  }
  return sum;
}

void expect_all_ok(const std::vector<std::string>& errors) {
  for (std::size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// Element counts around a 4 KiB eager limit (1024 floats): below, at, above,
// and far above, where the message takes Gloo's rendezvous.
const std::vector<std::size_t> kCounts = {1, 1000, 1024, 1025, 3000, 50000};

// Every all-reduce algorithm on 2 and 3 ranks (a 4 KiB eager limit), each
// count, against a naive sum on every rank.
void expect_every_algorithm_sums(const std::vector<std::size_t>& counts, int chunks) {
  for (int n : {2, 3}) {
    std::vector<std::vector<std::string>> mismatches(n);
    expect_all_ok(run_ranks(n, 4096, [&](Communicator& comm) {
      for (Algorithm a : algorithms_for(CollectiveKind::kAllReduce))
        for (std::size_t count : counts) {
          AlgoConfig algo;
          algo.algo = a;
          algo.chunks = chunks;
          const auto in = input(comm.rank(), count);
          std::vector<float> out(count, -1.0f);
          comm.allreduce(in.data(), out.data(), count, DataType::kF32, ReduceOp::kSum, algo);
          if (out != naive_sum(n, count))
            mismatches[comm.rank()].push_back(std::string(algorithm_name(a)) + " count " +
                                              std::to_string(count));
        }
    }));
    for (int r = 0; r < n; ++r)
      EXPECT_TRUE(mismatches[r].empty())
          << n << " ranks, rank " << r << " wrong at " << mismatches[r].front();
  }
}

TEST(GlooEager, EveryAlgorithmMatchesANaiveSumEitherSideOfTheLimit) {
  expect_every_algorithm_sums(kCounts, 2);
}

TEST(GlooEager, LargeMessagesGoAsFragments) {
  // A 1 MiB limit: messages above one fragment (256 KiB) go in pieces, the
  // last one short; 300000 floats (1.2 MB) are above the limit.
  const std::vector<std::size_t> counts = {32768, 32769, 100000, 262144, 300000};
  for (int n : {2, 3}) {
    std::vector<int> wrong(n, 0);
    expect_all_ok(run_ranks(n, 1 << 20, [&](Communicator& comm) {
      for (Algorithm a : algorithms_for(CollectiveKind::kAllReduce))
        for (std::size_t count : counts) {
          AlgoConfig algo;
          algo.algo = a;
          const auto in = input(comm.rank(), count);
          std::vector<float> out(count, -1.0f);
          comm.allreduce(in.data(), out.data(), count, DataType::kF32, ReduceOp::kSum, algo);
          wrong[comm.rank()] += out != naive_sum(n, count);
        }
    }));
    EXPECT_EQ(wrong, std::vector<int>(n, 0)) << n << " ranks";
  }
}

TEST(GlooEager, MessagesThatArriveBeforeTheirStepIsIssued) {
  // After a first call (which posts the receives ahead), rank 1 starts late:
  // rank 0's messages of several collectives are there before rank 1 has
  // issued any of their receives.
  constexpr int kCalls = 5;
  constexpr std::size_t kCount = 300;
  std::vector<int> wrong(2, 0);
  expect_all_ok(run_ranks(2, 4096, [&](Communicator& comm) {
    comm.barrier();
    if (comm.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::vector<std::vector<float>> in, out(kCalls, std::vector<float>(kCount));
    std::vector<Request> requests;
    for (int c = 0; c < kCalls; ++c) {
      in.push_back(input(comm.rank(), kCount, c));
      AlgoConfig algo;
      algo.algo = Algorithm::kDirect;
      requests.push_back(comm.iallreduce(in[c].data(), out[c].data(), kCount, DataType::kF32,
                                         ReduceOp::kSum, algo));
    }
    for (int c = 0; c < kCalls; ++c) {
      requests[c].wait();
      wrong[comm.rank()] += out[c] != naive_sum(2, kCount, c);
    }
  }));
  EXPECT_EQ(wrong, (std::vector<int>{0, 0}));
}

TEST(GlooEager, MoreMessagesInFlightThanRingEntries) {
  // 40 collectives in flight, 8 chunks each: far more eager messages per peer
  // than a ring has entries, so senders run out of credit and wait for signals;
  // a peer's messages of a later collective come before those of an earlier
  // one (kept until their step is issued).
  constexpr int kCalls = 40;
  constexpr std::size_t kCount = 512;
  std::vector<int> wrong(3, 0);
  expect_all_ok(run_ranks(3, 4096, [&](Communicator& comm) {
    std::vector<std::vector<float>> in, out(kCalls, std::vector<float>(kCount));
    std::vector<Request> requests;
    for (int c = 0; c < kCalls; ++c) {
      in.push_back(input(comm.rank(), kCount, c));
      AlgoConfig algo;
      algo.algo = c % 2 ? Algorithm::kRing : Algorithm::kDirect;
      algo.chunks = 8;
      requests.push_back(comm.iallreduce(in[c].data(), out[c].data(), kCount, DataType::kF32,
                                         ReduceOp::kSum, algo));
    }
    for (int c = kCalls - 1; c >= 0; --c) {  // waited newest first
      requests[c].wait();
      wrong[comm.rank()] += out[c] != naive_sum(3, kCount, c);
    }
  }));
  EXPECT_EQ(wrong, (std::vector<int>{0, 0, 0}));
}

TEST(GlooEager, RanksThatDisagreeOnTheSizeGetAnErrorNotWrongData) {
  const auto errors = run_ranks(
      2, 4096,
      [](Communicator& comm) {
        const std::size_t count = comm.rank() == 0 ? 100 : 200;  // both eager
        std::vector<float> in(count, 1.0f), out(count);
        AlgoConfig algo;
        algo.algo = Algorithm::kDirect;
        comm.allreduce(in.data(), out.data(), count, DataType::kF32, ReduceOp::kSum, algo);
      },
      std::chrono::seconds(5));
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[r].find(std::string("rank ") + std::to_string(r) + ": message 0 of"),
              std::string::npos)
        << errors[r];
    EXPECT_NE(errors[r].find(r == 0 ? "has 800 bytes where" : "has 400 bytes where"),
              std::string::npos)
        << errors[r];
    EXPECT_NE(errors[r].find("do all ranks run the same collective"), std::string::npos)
        << errors[r];
  }
}

TEST(GlooEager, ManyChunkedCallsLeaveNoWaitForALaterCollective) {
  // A regression test: a step whose last fragment was being copied out still
  // looked as if it waited for a message, so another thread started a wait on
  // its behalf; the rank's own thread could take that wait and block on a
  // message only the next collective sends: with that bug this test hung in
  // one run of four. Every call is checked as well.
  std::vector<int> wrong(3, 0);
  for (int rep = 0; rep < 8; ++rep)
    expect_all_ok(run_ranks(
        3, 4096,
        [&](Communicator& comm) {
          for (int it = 0; it < 50; ++it)
            for (Algorithm a : algorithms_for(CollectiveKind::kAllReduce))
              for (std::size_t count : {1000, 1025}) {
                AlgoConfig algo;
                algo.algo = a;
                algo.chunks = 2;
                const auto in = input(comm.rank(), count, it);
                std::vector<float> out(count, -1.0f);
                comm.allreduce(in.data(), out.data(), count, DataType::kF32, ReduceOp::kSum, algo);
                wrong[comm.rank()] += out != naive_sum(3, count, it);
              }
        },
        std::chrono::seconds(10)));
  EXPECT_EQ(wrong, (std::vector<int>{0, 0, 0}));
}

TEST(GlooSegments, EveryAlgorithmMatchesANaiveSumWithMessagesOfSeveralSegments) {
  // Not eager: messages up to 2 MiB go whole, larger ones as 1 MiB segments,
  // and a receive that reduces stages four at a time, reusing a segment's
  // staging once reduced. 2.4, 4.8 and 12 MB vectors: messages whole (the
  // ring's 1.6 MB among them) and of three to twelve segments, most with a
  // short last one.
  expect_every_algorithm_sums({600000, 1200000, 3000000}, 1);
}

TEST(GlooEager, MessagesThatArrivedBeforeThePeerClosedAreStillDelivered) {
  // Rank 1 broadcasts twice (its eager sends are done once copied) and closes
  // while rank 0 has not started: both messages wait in rank 0's ring, and
  // Gloo fails every wait on the closed pair. Both must still be delivered
  // (their header and trailer say they arrived whole), not reported as a lost
  // peer. Found by ManyChunkedCalls... under load, about 1 run in 5.
  constexpr std::size_t kCount = 100;
  std::vector<std::vector<float>> got(2);
  expect_all_ok(run_ranks(2, 4096, [&](Communicator& comm) {
    std::vector<float> warm(kCount, 1.0f), warm_out(kCount);
    comm.allreduce(warm.data(), warm_out.data(), kCount, DataType::kF32, ReduceOp::kSum);
    if (comm.rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    for (int salt : {1, 2}) {
      const auto root_data = input(1, kCount, salt);
      std::vector<float> out(kCount, -1.0f);
      comm.broadcast(root_data.data(), out.data(), kCount, DataType::kF32, /*root=*/1);
      if (comm.rank() == 0) got[salt - 1] = out;
    }
  }));
  EXPECT_EQ(got[0], input(1, kCount, 1));
  EXPECT_EQ(got[1], input(1, kCount, 2));
}

TEST(GlooEager, ASenderFarAheadOfItsReceiverWaitsForCredit) {
  // Rank 1 broadcasts 50 times while rank 0 has not started: far more
  // messages than a ring has entries, so rank 1 must hold the rest back until
  // rank 0 has taken the first ones (written into a ring entry still in use,
  // a message would overwrite one not yet taken, and some result would be
  // another broadcast's data). Then a sum in the other direction.
  constexpr int kCalls = 50;
  constexpr std::size_t kCount = 100;
  std::vector<std::vector<float>> got(kCalls);
  std::vector<float> sum;
  expect_all_ok(run_ranks(2, 4096, [&](Communicator& comm) {
    std::vector<float> warm(kCount, 1.0f), warm_out(kCount);
    comm.allreduce(warm.data(), warm_out.data(), kCount, DataType::kF32, ReduceOp::kSum);
    if (comm.rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    for (int c = 0; c < kCalls; ++c) {
      const auto root_data = input(1, kCount, c);
      std::vector<float> out(kCount, -1.0f);
      comm.broadcast(root_data.data(), out.data(), kCount, DataType::kF32, /*root=*/1);
      if (comm.rank() == 0) got[c] = out;
    }
    const auto in = input(comm.rank(), kCount);
    std::vector<float> out(kCount, -1.0f);
    comm.allreduce(in.data(), out.data(), kCount, DataType::kF32, ReduceOp::kSum);
    if (comm.rank() == 0) sum = out;
  }));
  for (int c = 0; c < kCalls; ++c) EXPECT_EQ(got[c], input(1, kCount, c)) << "broadcast " << c;
  EXPECT_EQ(sum, naive_sum(2, kCount));
}

// Not eager, but it needs ranks on several hosts: with AlgoConfig::group_size
// left at 0, hier groups the ranks that share a host. Four ranks on four hosts
// make groups of 1 where the default is 2; floats of mixed magnitudes summed
// in another order differ, so the groups show in the bits of the result.
TEST(GlooHostGroups, HierWithoutAGroupSizeGroupsTheRanksOfAHost) {
  constexpr std::size_t kCount = 1000;
  const auto data = [](int rank) {
    std::vector<float> v(kCount);
    for (std::size_t i = 0; i < kCount; ++i)
      v[i] = static_cast<float>((i * 37 + rank * 11) % 97 + 1) *
             std::pow(10.0f, static_cast<float>((i + rank * 3) % 7) - 3.0f);
    return v;
  };
  std::vector<std::vector<float>> out(3, std::vector<float>(kCount));  // hosts, g=1, g=2
  expect_all_ok(run_ranks(4, 4096,
                          [&](Communicator& comm) {
                            const auto in = data(comm.rank());
                            AlgoConfig algo;
                            algo.algo = Algorithm::kHierarchical;
                            std::vector<std::vector<float>> mine(3, std::vector<float>(kCount));
                            for (int g : {0, 1, 2}) {
                              algo.group_size = g;
                              comm.allreduce(in.data(), mine[g].data(), kCount, DataType::kF32,
                                             ReduceOp::kSum, algo);
                            }
                            if (comm.rank() == 0) out = mine;
                          },
                          std::chrono::seconds(20), {"a", "b", "c", "d"}));
  ASSERT_NE(out[1], out[2]) << "these inputs cannot tell the group sizes apart";
  EXPECT_EQ(out[0], out[1]) << "hier did not group by host (4 hosts: groups of 1)";
}

TEST(GlooEager, TheLimitIsChecked) {
  GlooOptions o;
  o.eager_bytes = kGlooMaxEagerBytes + 1;
  try {
    make_gloo_communicator(o);
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("eager_bytes 16777217 is above the largest allowed"),
              std::string::npos)
        << e.what();
  }
}

// The rings' memory: a zeroed mapping of its own, in small pages, entries a
// cache line apart.

// The VmFlags line of the mapping of /proc/self/smaps that starts at `p`
// ("" when no mapping starts there).
std::string vm_flags_at(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto start = reinterpret_cast<std::uintptr_t>(p);
  bool in_it = false;
  for (std::string line; std::getline(smaps, line);) {
    const auto dash = line.find('-');
    if (dash != std::string::npos && dash > 0 && line.find(' ') > dash &&
        std::isxdigit(static_cast<unsigned char>(line[0])))
      in_it = std::stoull(line.substr(0, dash), nullptr, 16) == start;
    else if (in_it && line.rfind("VmFlags:", 0) == 0)
      return line;
  }
  return {};
}

TEST(GlooEagerMemory, ARingIsAZeroedMappingOfItsOwnInSmallPages) {
  const std::size_t bytes = detail::kEagerSlots * detail::eager_ring_stride(64u << 10);
  detail::EagerMemory m(bytes);
  ASSERT_NE(m.data(), nullptr);
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  EXPECT_EQ(m.size(), (bytes + page - 1) / page * page);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(m.data()) % page, 0u);
  EXPECT_TRUE(
      std::all_of(m.data(), m.data() + m.size(), [](std::byte b) { return b == std::byte{0}; }));
  std::fill(m.data(), m.data() + m.size(), std::byte{7});  // writable to the end
  const std::string flags = vm_flags_at(m.data());
  ASSERT_FALSE(flags.empty()) << "no mapping starts at the ring's memory";
  EXPECT_EQ(flags.find(" hg"), std::string::npos) << "asks for huge pages: " << flags;
}

TEST(GlooEagerMemory, SizesRoundUpToPagesAndOwnershipMoves) {
  detail::EagerMemory a(1);
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  EXPECT_EQ(a.size(), page);
  EXPECT_EQ(a.data()[0], std::byte{0});
  std::byte* at = a.data();
  detail::EagerMemory b(std::move(a));
  EXPECT_EQ(b.data(), at);
  EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty
  detail::EagerMemory c(3 * page + 1);
  EXPECT_EQ(c.size(), 4 * page);
  c = std::move(b);
  EXPECT_EQ(c.data(), at);
  EXPECT_EQ(c.size(), page);
}

TEST(GlooEagerMemory, RingEntriesAreACacheLineApartAndHoldABlock) {
  for (const std::size_t payload :
       {std::size_t{4} << 10, std::size_t{64} << 10, std::size_t{1000}}) {
    const std::size_t stride = detail::eager_ring_stride(payload);
    EXPECT_EQ(stride % 64, 0u) << payload;
    EXPECT_GE(stride, detail::eager_block_bytes(payload)) << payload;
    EXPECT_LT(stride, detail::eager_block_bytes(payload) + 64) << payload;
  }
}

}  // namespace
}  // namespace cclab::coll
