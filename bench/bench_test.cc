// Tests of the sweep tool: flag resolution, the size sweep, the reference
// values of the check, a full sweep on the threads backend, and the reports.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <numeric>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "cclab/collectives/error.h"
#include "check.h"
#include "options.h"
#include "report.h"
#include "sweep.h"

namespace cclab::bench {
namespace {

using coll::Algorithm;
using coll::CollectiveKind;
using coll::DataType;
using coll::ReduceOp;

TEST(SizeParse, AcceptsBytesAndBinarySuffixes) {
  EXPECT_EQ(parse_size_bytes("4096", "-b"), 4096u);
  EXPECT_EQ(parse_size_bytes("1K", "-b"), 1024u);
  EXPECT_EQ(parse_size_bytes("2k", "-b"), 2048u);
  EXPECT_EQ(parse_size_bytes("64M", "-b"), 64u << 20);
  EXPECT_EQ(parse_size_bytes("1G", "-b"), 1u << 30);
}

TEST(SizeParse, RejectsMalformedSizesNamingTheFlag) {
  for (const char* text :
       {"", "K", "12X", "1KB", "-1", " 1", "99999999999999999999", "17179869184G"}) {
    try {
      parse_size_bytes(text, "-e/--maxbytes");
      ADD_FAILURE() << "accepted '" << text << "'";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("-e/--maxbytes: malformed size"), std::string::npos)
          << e.what();
    }
  }
}

TEST(Resolve, DefaultsSelectEveryAllReduceAlgorithm) {
  const auto c = resolve(BenchFlags{});
  EXPECT_EQ(c.algos, coll::algorithms_for(CollectiveKind::kAllReduce));
  EXPECT_EQ(c.min_bytes, 1024u);
  EXPECT_EQ(c.max_bytes, 64u << 20);
}

// resolve(flags) must throw InvalidArgument whose message contains `expected`.
void expect_invalid(const BenchFlags& flags, const std::string& expected) {
  try {
    resolve(flags);
    ADD_FAILURE() << "accepted; expected an error containing '" << expected << "'";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}

TEST(Resolve, RejectsBadValuesNamingTheFlag) {
  const auto with = [](auto edit) {
    BenchFlags f;
    edit(f);
    return f;
  };
  expect_invalid(with([](auto& f) { f.algo = "ring,fast"; }), "--algo: unknown algorithm 'fast'");
  expect_invalid(with([](auto& f) { f.coll = "reducescatter", f.algo = "tree"; }),
                 "--algo: 'tree' does not apply to reducescatter (allowed: ");
  expect_invalid(with([](auto& f) { f.dtype = "f8"; }), "--dtype");
  expect_invalid(with([](auto& f) { f.op = "xor"; }), "--op");
  expect_invalid(with([](auto& f) { f.coll = "alltoall"; }), "--coll");
  expect_invalid(with([](auto& f) { f.backend = "mpi"; }), "--backend: unknown backend 'mpi'");
  expect_invalid(with([](auto& f) { f.min_bytes = "2K", f.max_bytes = "1K"; }),
                 "-b/--minbytes: 2K is larger than -e/--maxbytes 1K");
  expect_invalid(with([](auto& f) { f.ranks = 0; }), "--ranks: must be at least 1 (got 0)");
  expect_invalid(with([](auto& f) { f.chunks = "0"; }), "--chunks: '0' is not a chunk count");
  expect_invalid(with([](auto& f) { f.chunks = "1,,4"; }), "--chunks: '' is not a chunk count");
  expect_invalid(with([](auto& f) { f.chunks = "4,x"; }), "--chunks: 'x' is not a chunk count");
  expect_invalid(with([](auto& f) { f.chunks = "1000000"; }),
                 "--chunks: '1000000' is not a chunk count (allowed: integers from 1 to 999999");
  expect_invalid(with([](auto& f) { f.chunks = "4,1,4"; }), "--chunks: 4 is given twice");
  expect_invalid(with([](auto& f) { f.iters = 0; }), "-n/--iters");
  expect_invalid(with([](auto& f) { f.warmup = -1; }), "-w/--warmup");
  expect_invalid(with([](auto& f) { f.check = 2; }), "-c/--check");
  expect_invalid(with([](auto& f) { f.timing = "wall"; }),
                 "--timing: unknown timing 'wall' (allowed: rank, span)");
  expect_invalid(with([](auto& f) { f.step_factor = 1; }), "-f/--stepfactor");
  expect_invalid(with([](auto& f) { f.root = 2; }), "--root");
  expect_invalid(
      with([](auto& f) { f.inner = "hier"; }),
      "--inner: 'hier' is not an inner algorithm (allowed: ring, tree, hd, direct, biring, or "
      "all)");
  expect_invalid(with([](auto& f) { f.inner = "tree,ring,tree"; }),
                 "--inner: 'tree' is given twice");
  expect_invalid(with([](auto& f) { f.inner = "ring,"; }), "--inner: '' is not an inner");
  expect_invalid(
      with([](auto& f) { f.coll = "allgather", f.inner = "ring,tree"; }),
      "--inner: the hier of --coll allgather runs rings inside its groups and the ring "
      "or hd between them, or rings both ways in and between them (allowed: ring, hd, biring, "
      "or all)");
  // hd between 3 groups: named, an error before any rank starts (with
  // `all` the row is skipped instead: the CLI tests).
  expect_invalid(with([](auto& f) {
                   f.ranks = 6, f.group_size = "2", f.coll = "allgather", f.algo = "hier",
                   f.inner = "hd";
                 }),
                 "--inner: hd between the groups of allgather's hier needs a power-of-two number "
                 "of groups, got 3 (groups of 2; allowed here: ring, biring)");
  expect_invalid(with([](auto& f) { f.ranks = 4, f.group_size = "3"; }),
                 "--group-size: 3 does not divide --ranks 4 (allowed: 1, 2, 4");
  // Levels of groups (2x2): hier all-reduce's, their top groups dividing the
  // ranks.
  expect_invalid(with([](auto& f) { f.ranks = 6, f.group_size = "2x2"; }),
                 "--group-size: the top groups of 2x2 (4 ranks each) do not divide --ranks 6");
  expect_invalid(with([](auto& f) { f.ranks = 8, f.group_size = "2x2", f.coll = "broadcast"; }),
                 "--group-size: levels (2x2) are hier's only (allreduce, reducescatter, "
                 "allgather), not --coll broadcast");
  expect_invalid(with([](auto& f) { f.coll = "broadcast", f.rotate_levels = true; }),
                 "--rotate-levels: hier's only (allreduce, reducescatter, allgather), not --coll "
                 "broadcast");
  expect_invalid(with([](auto& f) { f.group_size = "2x"; }),
                 "--group-size: '2x' is not a group size");
  expect_invalid(with([](auto& f) { f.group_size = "-1"; }),
                 "--group-size: '-1' is not a group size");
}

// --chunks 1,4: each of ours with each count in the order given, `auto` once
// with the first (it keeps a count above 1 unless a table or CCLAB_ALGO
// chooses; 1 leaves grouped hier's count to the built-in rule).
TEST(Resolve, ChunkListGivesEachOfOursEachCount) {
  BenchFlags f;
  f.algo = "ring,auto,hd", f.chunks = "4,1";
  const auto c = resolve(f);
  EXPECT_EQ(c.chunks, (std::vector<int>{4, 1}));
  std::vector<std::pair<Algorithm, int>> got;
  for (const auto& a : c.ours()) got.emplace_back(a.algo, a.chunks);
  const std::vector<std::pair<Algorithm, int>> want = {{Algorithm::kRing, 4},
                                                       {Algorithm::kRing, 1},
                                                       {Algorithm::kAuto, 4},
                                                       {Algorithm::kHalvingDoubling, 4},
                                                       {Algorithm::kHalvingDoubling, 1}};
  EXPECT_EQ(got, want);
}

TEST(SweepSizes, GeometricUpToMaxAndRoundedToElements) {
  BenchConfig c;
  c.min_bytes = 1024, c.max_bytes = 5 * 1024, c.step_factor = 2;
  // 1K, 2K, 4K; 8K would pass 5K.
  const auto sizes = sweep_sizes(c);
  ASSERT_EQ(sizes.size(), 3u);
  EXPECT_EQ(sizes[2].bytes, 4096u);
  EXPECT_EQ(sizes[2].count, 1024u);  // f32
  c.min_bytes = c.max_bytes = 7;
  EXPECT_EQ(sweep_sizes(c)[0].count, 1u);  // 7 bytes hold one whole f32
  EXPECT_EQ(sweep_sizes(c)[0].bytes, 4u);
}

TEST(SweepSizes, ReduceScatterCountIsAMultipleOfRanks) {
  BenchConfig c;
  c.coll = CollectiveKind::kReduceScatter;
  c.ranks = 3;
  c.min_bytes = c.max_bytes = 100;
  // 100 B = 25 f32, rounded down to 24 (a multiple of 3): 8 per rank.
  const auto size = sweep_sizes(c)[0];
  EXPECT_EQ(size.count, 24u);
  EXPECT_EQ(size.bytes, 96u);
  EXPECT_EQ(shape_for(c, size.count).count, 8u);
  EXPECT_EQ(shape_for(c, size.count).input_count(), 24u);
}

TEST(Bandwidth, BusFactorsAndMedian) {
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::kAllReduce, 4), 1.5);  // 2 * 3/4
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::kAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::kBroadcast, 4), 1.0);
  BenchConfig c;
  c.ranks = 4;
  SweepRow row;
  row.bytes = 3000;
  summarize({5, 1, 3, 2, 4}, c, row);
  EXPECT_EQ(row.time_us_median, 3);
  EXPECT_EQ(row.time_us_min, 1);
  EXPECT_EQ(row.time_us_max, 5);
  // 3000 B in 3 us = 1e9 B/s = 1 GB/s; busbw = 1 * 2 * 3/4.
  EXPECT_DOUBLE_EQ(row.algbw_gbps, 1.0);
  EXPECT_DOUBLE_EQ(row.busbw_gbps, 1.5);
  summarize({4, 1, 3, 2}, c, row);
  EXPECT_EQ(row.time_us_median, 2.5);  // mean of the middle two
}

TEST(Reference, InputsAndReductionsFromTheFormula) {
  // ((r*7 + i*3) % 5) + 1 at i = 0 for r = 0..3: 1, 3, 5, 2.
  EXPECT_EQ(input_value(2, 0, ReduceOp::kSum), 5);
  EXPECT_EQ(reduced_value(4, 0, ReduceOp::kSum), 11);
  EXPECT_EQ(reduced_value(4, 0, ReduceOp::kMin), 1);
  EXPECT_EQ(reduced_value(4, 0, ReduceOp::kMax), 5);
  // prod at i = 0: ranks 0 and 4 of 0..7 have (r + i) % 4 == 0, so 2 * 2.
  EXPECT_EQ(reduced_value(8, 0, ReduceOp::kProd), 4);
  // Period: i and i + kPeriod give the same inputs for either formula.
  for (int r = 0; r < 6; ++r)
    for (auto op : {ReduceOp::kSum, ReduceOp::kProd})
      EXPECT_EQ(input_value(r, 3, op), input_value(r, 3 + kPeriod, op));
}

template <class T>
T decode(DataType t, auto encode) {
  std::byte bytes[8] = {};
  encode(t, bytes);
  T value;
  std::memcpy(&value, bytes, sizeof(T));
  return value;
}

TEST(Reference, EncodesIntoEachType) {
  // bf16 keeps the top 16 bits of a float: 1.0f = 0x3F800000.
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3F80);
  // 1 + 2^-8 is a tie between 0x3F80 and 0x3F81: to even, 0x3F80.
  EXPECT_EQ(float_to_bf16_bits(1.00390625f), 0x3F80);
  // 1 + 3 * 2^-8 is a tie between 0x3F81 and 0x3F82: to even, 0x3F82.
  EXPECT_EQ(float_to_bf16_bits(1.01171875f), 0x3F82);
  // 10/3 = 0x40555555 in f32; the dropped half 0x5555 is below a half ulp.
  const auto avg = [](DataType t, std::byte* out) {
    encode_reduced(10, 3, ReduceOp::kAvg, t, out);
  };
  EXPECT_EQ(decode<std::uint16_t>(DataType::kBF16, avg), 0x4055);
  EXPECT_EQ(decode<float>(DataType::kF32, avg), 10.0f / 3.0f);
  EXPECT_EQ(decode<std::int32_t>(DataType::kI32, avg), 3);  // truncated
  EXPECT_EQ(decode<_Float16>(DataType::kF16, avg), static_cast<_Float16>(10.0f / 3.0f));
  // u8 sums wrap: 300 mod 256 = 44.
  const auto wrap = [](DataType t, std::byte* out) { encode_int(300, t, out); };
  EXPECT_EQ(decode<std::uint8_t>(DataType::kU8, wrap), 44);
}

TEST(Reference, CountsEachWrongElement) {
  // An all-reduce output built from the reference, then two elements broken.
  const int ranks = 3;
  coll::CollectiveShape shape{CollectiveKind::kAllReduce, ranks, 3000, 0};
  std::vector<std::byte> out(3000 * 4);
  for (std::uint64_t i = 0; i < 3000; ++i)
    encode_reduced(reduced_value(ranks, i, ReduceOp::kSum), ranks, ReduceOp::kSum, DataType::kF32,
                   &out[i * 4]);
  const Expectation expect(ranks, DataType::kF32, ReduceOp::kSum);
  EXPECT_EQ(expect.count_wrong(shape, 1, out.data()), 0u);
  out[7 * 4] = std::byte{0x7F};
  out[2999 * 4 + 3] = std::byte{0x7F};
  EXPECT_EQ(expect.count_wrong(shape, 1, out.data()), 2u);
}

// A one-rank backend whose collectives do nothing (but run `on_call`, when
// given, with the call): the check must see it.
class InertComm final : public coll::Communicator {
  struct Done final : coll::detail::RequestImpl {
    void wait() override {}
    bool test() override { return true; }
  };

 public:
  using OnCall = std::function<void(const coll::CollectiveCall&)>;
  explicit InertComm(OnCall on_call = {}) : on_call_(std::move(on_call)) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  coll::Request start(const coll::CollectiveCall& call) override {
    if (on_call_) on_call_(call);
    return coll::Request(std::make_shared<Done>());
  }
  void barrier() override {}
  std::unique_ptr<Communicator> split(int, int) override { return nullptr; }

 private:
  OnCall on_call_;
};

class InertBackend final : public Backend {
 public:
  explicit InertBackend(InertComm::OnCall on_call = {}) : comm_(std::move(on_call)) {}
  std::string_view name() const override { return "inert"; }
  int ranks() const override { return 1; }
  void run(const std::function<void(coll::Communicator&)>& fn) override { fn(comm_); }

 private:
  InertComm comm_;
};

double thread_cpu_us() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_nsec) / 1e3;
}

// Each call burns 2 ms of this thread's CPU time (however long that takes on
// a shared machine) and then sleeps, which blocks the thread: a voluntary
// context switch at least.
TEST(Sweep, HostUseCountsEachCallsCpuTimeAndContextSwitches) {
  BenchFlags f;
  f.ranks = 1, f.algo = "ring", f.min_bytes = "64", f.max_bytes = "64", f.iters = 5;
  f.warmup = 0, f.check = 0;
  const auto c = resolve(f);
  InertBackend backend([](const coll::CollectiveCall&) {
    const double start = thread_cpu_us();
    while (thread_cpu_us() - start < 2000) {
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  });
  const auto rows = run_sweep(c, backend);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_GE(rows[0].cpu_us_median, 2000.0);
  EXPECT_GE(rows[0].csw_median, 1.0);
  // A process cannot use more CPU time than its wall time on every core.
  const double cores = std::thread::hardware_concurrency();
  EXPECT_LE(rows[0].cpu_us_median, rows[0].time_us_median * cores + 100) << rows[0].time_us_median;
}

TEST(Sweep, ACollectiveThatWritesNothingIsWrong) {
  for (bool interleave : {false, true}) {
    BenchFlags f;
    f.ranks = 1, f.algo = "ring,hd", f.min_bytes = "64", f.max_bytes = "128", f.iters = 1;
    f.step_factor = 2, f.interleave = interleave;
    const auto c = resolve(f);
    InertBackend backend;
    const auto rows = run_sweep(c, backend);
    ASSERT_EQ(rows.size(), 4u);
    EXPECT_EQ(rows[0].wrong, 16u);  // 64 B of f32, all still poisoned
    EXPECT_EQ(rows[1].wrong, 16u);
    EXPECT_EQ(rows[2].wrong, 32u);
    EXPECT_EQ(rows[3].wrong, 32u);
  }
}

// Interleaved rows share the ranks' buffers: each is still checked on its own.
TEST(Sweep, InterleavedThreadsResultsAreExact) {
  for (bool in_place : {false, true}) {
    BenchFlags f;
    f.ranks = 3, f.in_place = in_place, f.interleave = true;
    f.min_bytes = std::string("1"), f.max_bytes = "20K", f.step_factor = 7, f.iters = 2;
    const auto c = resolve(f);
    auto backend = make_backend("threads", c.ranks, c.timeout);
    const auto rows = run_sweep(c, *backend);
    ASSERT_EQ(rows.size(), sweep_sizes(c).size() * c.algos.size());
    for (const auto& row : rows)
      EXPECT_EQ(row.wrong, 0u) << (in_place ? "in place " : "") << coll::algorithm_name(row.algo)
                               << " " << row.bytes << " B";
  }
}

// The order of the calls a sweep of two sizes and two algorithms makes,
// sequentially and interleaved (no check, one warm-up): "r" ring, "h" hd,
// and the size's initial as a suffix.
std::string call_order(bool interleave) {
  BenchFlags f;
  f.ranks = 1, f.algo = "ring,hd", f.min_bytes = "64", f.max_bytes = "128", f.step_factor = 2;
  f.iters = 3, f.warmup = 1, f.check = 0, f.interleave = interleave;
  const auto c = resolve(f);
  std::string order;
  InertBackend backend([&](const coll::CollectiveCall& call) {
    order += call.algo.algo == coll::Algorithm::kRing ? 'r' : 'h';
    order += call.shape.count == 16 ? '1' : '2';
  });
  const auto rows = run_sweep(c, backend);
  EXPECT_EQ(rows.size(), 4u);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].algo,
              i % 2 == 0 ? coll::Algorithm::kRing : coll::Algorithm::kHalvingDoubling);
    EXPECT_EQ(rows[i].iters, 3);
  }
  return order;
}

// Every timed iteration runs each row once, and over a whole design (n
// iterations, 2n for odd n) every row takes every position and directly
// follows every other row equally often: counted here, not by the design's
// formula.
TEST(Sweep, InterleavedOrderIsABalancedLatinSquare) {
  for (int n = 1; n <= 7; ++n) {
    const int sequences = n % 2 == 0 ? n : 2 * n;
    std::vector<std::vector<int>> follows(n, std::vector<int>(n, 0)), at(n, std::vector<int>(n, 0));
    for (int i = 0; i < sequences; ++i) {
      const std::vector<int> order = interleaved_order(n, i);
      ASSERT_EQ(order, interleaved_order(n, i + sequences)) << "the design repeats, n=" << n;
      std::vector<int> sorted = order;
      std::sort(sorted.begin(), sorted.end());
      std::vector<int> all(n);
      std::iota(all.begin(), all.end(), 0);
      ASSERT_EQ(sorted, all) << "not a permutation, n=" << n << " iteration " << i;
      for (int j = 0; j < n; ++j) ++at[order[j]][j];
      for (int j = 1; j < n; ++j) ++follows[order[j - 1]][order[j]];
    }
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b) {
        EXPECT_EQ(at[a][b], sequences / n) << "row " << a << " at position " << b << ", n=" << n;
        if (a != b) {
          EXPECT_EQ(follows[a][b], sequences / n) << "row " << b << " after " << a << ", n=" << n;
        }
      }
  }
  EXPECT_TRUE(interleaved_order(0, 3).empty());
}

// The interval's ranks are those of the published tables for the median's
// distribution-free confidence interval (n = 20: the 6th and 15th of the
// sorted values; n = 100: the 40th and 61st), not recomputed from the code.
TEST(Sweep, PairedRatioIntervalTakesTheTabulatedOrderStatistics) {
  for (const auto& [n, low, high] : {std::tuple{20, 6, 15}, std::tuple{100, 40, 61}}) {
    std::vector<double> num(n), den(n, 2.0);  // ratios 1..n, given in scrambled order
    for (int i = 0; i < n; ++i) num[i] = 2.0 * ((i * 7) % n + 1);
    const PairedRatio r = paired_ratio(num, den);
    ASSERT_TRUE(r.has_interval) << n;
    EXPECT_DOUBLE_EQ(r.median, (n + 1) / 2.0) << n;
    EXPECT_DOUBLE_EQ(r.low, low) << n;
    EXPECT_DOUBLE_EQ(r.high, high) << n;
    EXPECT_GE(r.coverage, 0.95) << n;
    EXPECT_LT(r.coverage, 0.975) << n;
  }
}

// Six pairs are the fewest whose extremes cover the median at 95% (1 - 2/64);
// with five there is no interval, only the median.
TEST(Sweep, PairedRatioNeedsSixPairsForAnInterval) {
  const PairedRatio six = paired_ratio({3, 1, 2, 6, 5, 4}, {1, 1, 1, 1, 1, 1});
  ASSERT_TRUE(six.has_interval);
  EXPECT_DOUBLE_EQ(six.low, 1);
  EXPECT_DOUBLE_EQ(six.high, 6);
  EXPECT_DOUBLE_EQ(six.coverage, 1 - 2.0 / 64);
  const PairedRatio five = paired_ratio({3, 1, 2, 5, 4}, {1, 1, 1, 1, 1});
  EXPECT_FALSE(five.has_interval);
  EXPECT_DOUBLE_EQ(five.median, 3);
}

// Pairs, not medians: a machine that is slow in half the iterations moves
// both rows' medians, but each call-by-call ratio stays 1.25.
TEST(Sweep, PairedRatioComparesCallsOfTheSameIteration) {
  std::vector<double> ours, peer;
  for (int i = 0; i < 20; ++i) {
    const double slow = i % 2 == 0 ? 1.0 : 3.0 + i;  // drifts within the run
    ours.push_back(100 * slow);
    peer.push_back(125 * slow);
  }
  peer[1] = peer[3] = 125;  // and two of the peer's calls missed the slow spell
  const PairedRatio r = paired_ratio(peer, ours);
  EXPECT_DOUBLE_EQ(r.median, 1.25);
  EXPECT_DOUBLE_EQ(r.high, 1.25);
  EXPECT_NE(median(peer) / median(ours), 1.25);
}

// The machine-speed probes run in the quiet points: before any collective
// (after the inputs are written) and after the last, once each.
TEST(Sweep, QuietHookRunsBeforeTheFirstAndAfterTheLastCollective) {
  BenchFlags f;
  f.ranks = 1, f.algo = "ring", f.min_bytes = "64", f.max_bytes = "128", f.step_factor = 2;
  f.iters = 2, f.warmup = 1, f.check = 0;
  std::string order;
  InertBackend backend([&](const coll::CollectiveCall&) { order += 'c'; });
  run_sweep(resolve(f), backend, [&](bool at_start) { order += at_start ? 'S' : 'E'; });
  EXPECT_EQ(order, "S" + std::string(2 * (1 + 2), 'c') + "E");
}

TEST(Sweep, QuietHookRunsOnOneRankOnly) {
  BenchFlags f;
  f.ranks = 3, f.algo = "ring", f.min_bytes = "1K", f.max_bytes = "1K", f.iters = 2, f.warmup = 1;
  const auto c = resolve(f);
  auto backend = make_backend("threads", c.ranks, c.timeout);
  std::vector<bool> calls;  // six entries if every rank ran it
  const auto rows = run_sweep(c, *backend, [&](bool at_start) { calls.push_back(at_start); });
  EXPECT_EQ(calls, (std::vector<bool>{true, false}));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].wrong, 0u);
}

TEST(Sweep, InterleaveTimesEachRowOfASizeInTurn) {
  // One warm-up of each row, then iteration by iteration, then the next size.
  // Warm-up in the listed order, then the timed iterations in
  // interleaved_order: ring first, hd first, ring first.
  EXPECT_EQ(call_order(true), "r1h1r1h1h1r1r1h1r2h2r2h2h2r2r2h2");
  EXPECT_EQ(call_order(false), "r1r1r1r1h1h1h1h1r2r2r2r2h2h2h2h2");
}

// Two thread ranks whose barrier lets rank 1 go `skew` after rank 0, and
// whose collective returns on each rank once both have entered it: rank 0
// waits out the skew inside every call, which --timing rank counts and
// --timing span (from the last rank's start) leaves out.
class SkewedPair final : public Backend {
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    std::uint64_t barrier_arrivals = 0, call_arrivals = 0;
  };
  class Comm final : public coll::Communicator {
    struct Done final : coll::detail::RequestImpl {
      void wait() override {}
      bool test() override { return true; }
    };

   public:
    Comm(State& s, int rank, std::chrono::milliseconds skew) : s_(s), rank_(rank), skew_(skew) {}
    int rank() const override { return rank_; }
    int size() const override { return 2; }
    coll::Request start(const coll::CollectiveCall&) override {
      meet(s_.call_arrivals);
      return coll::Request(std::make_shared<Done>());
    }
    void barrier() override {
      meet(s_.barrier_arrivals);
      if (rank_ == 1) std::this_thread::sleep_for(skew_);
    }
    std::unique_ptr<Communicator> split(int, int) override { return nullptr; }

   private:
    // Returns once both ranks have arrived at this meeting.
    void meet(std::uint64_t& arrivals) {
      std::unique_lock lock(s_.mu);
      const std::uint64_t goal = (arrivals / 2 + 1) * 2;
      ++arrivals;
      s_.cv.notify_all();
      s_.cv.wait(lock, [&] { return arrivals >= goal; });
    }
    State& s_;
    int rank_;
    std::chrono::milliseconds skew_;
  };

 public:
  explicit SkewedPair(std::chrono::milliseconds skew) : skew_(skew) {}
  std::string_view name() const override { return "skewed"; }
  int ranks() const override { return 2; }
  void run(const std::function<void(coll::Communicator&)>& fn) override {
    State state;
    Comm c0(state, 0, skew_), c1(state, 1, skew_);
    std::thread other([&] { fn(c1); });
    fn(c0);
    other.join();
  }

 private:
  std::chrono::milliseconds skew_;
};

TEST(Sweep, SpanTimingLeavesOutTheBarriersExitSkew) {
  constexpr auto kSkew = std::chrono::milliseconds(40);
  const auto median_ms = [&](const std::string& timing) {
    BenchFlags f;
    f.ranks = 2, f.algo = "ring", f.min_bytes = "64", f.max_bytes = "64", f.iters = 5;
    f.warmup = 0, f.check = 0, f.timing = timing;
    SkewedPair backend(kSkew);
    const auto rows = run_sweep(resolve(f), backend);
    EXPECT_EQ(rows.size(), 1u);
    return rows.empty() ? 0.0 : rows[0].time_us_median / 1000;
  };
  // Rank 0's own time holds the whole skew (a sleep: never shorter).
  EXPECT_GE(median_ms("rank"), 40.0);
  // From rank 1's start both return at once; half the skew is room for a slow wake-up.
  EXPECT_LT(median_ms("span"), 20.0);
}

// Every collective, algorithm, placement and a few types on 3 threads ranks
// (a non-power of two), with sizes that are not multiples of the rank count.
TEST(Sweep, ThreadsResultsAreExact) {
  struct TypeOp {
    const char* dtype;
    const char* op;
  };
  for (const char* coll : {"allreduce", "reducescatter", "allgather", "broadcast"}) {
    for (auto [dtype, op] : {TypeOp{"f32", "sum"}, TypeOp{"bf16", "avg"}, TypeOp{"f16", "prod"},
                             TypeOp{"u8", "max"}, TypeOp{"i64", "min"}}) {
      for (bool in_place : {false, true}) {
        BenchFlags f;
        f.ranks = 3, f.coll = coll, f.root = 2, f.in_place = in_place, f.dtype = dtype, f.op = op;
        // std::string(): GCC 12 -O3 gives a false -Wrestrict for assigning "1" here.
        f.min_bytes = std::string("1"), f.max_bytes = "20K";
        f.step_factor = 7, f.iters = 2, f.warmup = 1;
        const auto c = resolve(f);
        auto backend = make_backend("threads", c.ranks, c.timeout);
        const auto rows = run_sweep(c, *backend);
        ASSERT_EQ(rows.size(), sweep_sizes(c).size() * c.algos.size());
        for (const auto& row : rows)
          EXPECT_EQ(row.wrong, 0u)
              << coll << " " << dtype << " " << op << (in_place ? " in place " : " ")
              << coll::algorithm_name(row.algo) << " " << row.bytes << " B";
      }
    }
  }
}

// Memory the sweep may only reach through upload, download and fill, as a
// GPU's: its own allocations, and counters that show the staged path ran.
struct StagedCounts {
  std::atomic<int> uploads{0}, downloads{0}, fills{0};
};

class StagedMemory final : public RankMemory {
 public:
  explicit StagedMemory(StagedCounts& counts) : counts_(counts) {}
  std::byte* allocate(std::size_t bytes) override {
    return blocks_.emplace_back(std::max<std::size_t>(bytes, 64)).data();
  }
  bool host_visible() const override { return false; }
  void upload(std::byte* dst, const std::byte* host, std::size_t bytes) override {
    ++counts_.uploads;
    RankMemory::upload(dst, host, bytes);
  }
  void download(std::byte* host, const std::byte* src, std::size_t bytes) override {
    ++counts_.downloads;
    RankMemory::download(host, src, bytes);
  }
  void fill(std::byte* dst, int byte, std::size_t bytes) override {
    ++counts_.fills;
    RankMemory::fill(dst, byte, bytes);
  }

 private:
  StagedCounts& counts_;
  std::deque<std::vector<std::byte>> blocks_;  // stable addresses
};

// A backend whose ranks run on `inner` with staged memory.
class StagedBackend final : public Backend {
 public:
  StagedBackend(std::unique_ptr<Backend> inner, StagedCounts& counts)
      : inner_(std::move(inner)), counts_(counts) {}
  std::string_view name() const override { return inner_->name(); }
  int ranks() const override { return inner_->ranks(); }
  void run(const std::function<void(coll::Communicator&)>& fn) override { inner_->run(fn); }
  std::unique_ptr<RankMemory> memory(int) override {
    return std::make_unique<StagedMemory>(counts_);
  }

 private:
  std::unique_ptr<Backend> inner_;
  StagedCounts& counts_;
};

// The GPU backends' path through the sweep, on the CPU: inputs uploaded,
// outputs poisoned with fill and read back with download, results exact.
TEST(Sweep, StagedMemoryResultsAreExact) {
  for (bool in_place : {false, true}) {
    BenchFlags f;
    f.ranks = 3, f.in_place = in_place, f.dtype = "bf16", f.op = "avg";
    f.min_bytes = std::string("6"), f.max_bytes = "6K", f.step_factor = 8, f.iters = 2;
    const auto c = resolve(f);
    StagedCounts counts;
    StagedBackend backend(make_backend("threads", c.ranks, c.timeout), counts);
    const auto rows = run_sweep(c, backend);
    ASSERT_EQ(rows.size(), sweep_sizes(c).size() * c.algos.size());
    for (const auto& row : rows)
      EXPECT_EQ(row.wrong, 0u) << (in_place ? "in place " : "") << coll::algorithm_name(row.algo)
                               << " " << row.bytes << " B";
    // One poison and one read-back per rank and row; inputs once (out of
    // place) or per row (in place, where the call overwrites them).
    const int per_rank_rows = static_cast<int>(rows.size());
    EXPECT_EQ(counts.fills.load(), 3 * per_rank_rows);
    EXPECT_EQ(counts.downloads.load(), 3 * per_rank_rows);
    EXPECT_GE(counts.uploads.load(), in_place ? 3 * per_rank_rows : 3);
  }
}

// The JSON record of `f`'s sweep on threads, whose rows of each size must be
// `labels` in order, each checked against the naive reduction.
nlohmann::json sweep_of_labelled_exact_rows(const BenchFlags& f,
                                            const std::vector<std::string>& labels) {
  const auto c = resolve(f);
  auto backend = make_backend("threads", c.ranks, c.timeout);
  const auto rows = run_sweep(c, *backend);
  EXPECT_EQ(rows.size(), sweep_sizes(c).size() * labels.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(algo_label(rows[i]), labels[i % labels.size()]);
    EXPECT_EQ(rows[i].wrong, 0u) << algo_label(rows[i]) << " " << rows[i].bytes << " B";
  }
  return to_json(c, rows);
}

// Every row of ours named with its chunks, each checked, and the record's
// rows carry their chunks (what calibrate and the tables read).
TEST(Sweep, ChunkListRowsAreLabelledAndExact) {
  BenchFlags f;
  f.ranks = 3, f.algo = "ring,hd", f.chunks = "1,3";
  f.min_bytes = "12", f.max_bytes = "12K", f.step_factor = 32, f.iters = 2, f.warmup = 0;
  const auto record = sweep_of_labelled_exact_rows(f, {"ring", "ring:3", "hd", "hd:3"});
  EXPECT_EQ(record["config"]["chunks"], nlohmann::json::array({1, 3}));
  EXPECT_EQ(record["rows"][1]["algo"], "ring:3");
  EXPECT_EQ(record["rows"][1]["chunks"], 3);
}

// --inner ring,tree,direct: hier runs with each, the others once; every row
// is checked against the naive reduction, and the labels name the inner one.
TEST(Sweep, InnerListRunsHierWithEach) {
  BenchFlags f;
  f.ranks = 4, f.algo = "ring,hier", f.inner = "ring,tree,direct", f.group_size = "2";
  f.min_bytes = "16", f.max_bytes = "16K", f.step_factor = 1024, f.iters = 2, f.warmup = 0;
  const auto record = sweep_of_labelled_exact_rows(f, {"ring", "hier", "hier/tree", "hier/direct"});
  EXPECT_EQ(record["config"]["inner"], "ring,tree,direct");
  EXPECT_EQ(record["rows"][2]["algo"], "hier/tree");
}

// A row of ours at `bytes` whose calls all took `us`.
SweepRow timed_row(const BenchConfig& c, std::uint64_t bytes, const coll::AlgoConfig& algo,
                   double us) {
  SweepRow r;
  r.bytes = bytes, r.count = bytes / 4, r.algo = algo.algo, r.chunks = algo.chunks;
  r.inner = algo.inner;
  summarize({us, us, us}, c, r);
  return r;
}

// The table `--tune` writes from `rows` (to a file named `name`), read back,
// and the summary it printed.
std::pair<coll::TuningTable, std::string> tuned(BenchConfig c, const std::string& name,
                                                const std::vector<SweepRow>& rows) {
  c.tune_path = testing::TempDir() + name;
  std::ostringstream out;
  write_tuning_table(out, c, rows);
  return {coll::load_tuning_table(c.tune_path), out.str()};
}

// A measured table records hier's inner algorithm, so that `auto` runs what
// was timed (it ran hier with the ring before tables had the field).
TEST(Report, TuningTableRecordsHiersInnerAlgorithm) {
  BenchFlags f;
  f.ranks = 4, f.algo = "hier", f.inner = "ring,direct", f.min_bytes = "1K", f.max_bytes = "1M",
  f.step_factor = 1024;
  const auto c = resolve(f);
  const coll::AlgoConfig ring{Algorithm::kHierarchical, 1, 0, Algorithm::kRing};
  const coll::AlgoConfig direct{Algorithm::kHierarchical, 1, 0, Algorithm::kDirect};
  const auto [table, out] =
      tuned(c, "inner_table.json",
            {timed_row(c, 1024, ring, 30), timed_row(c, 1024, direct, 10),
             timed_row(c, 1 << 20, ring, 500), timed_row(c, 1 << 20, direct, 900)});
  ASSERT_EQ(table.bands.size(), 2u) << out;
  EXPECT_EQ(table.bands[0].inner, Algorithm::kDirect);
  EXPECT_EQ(table.bands[1].inner, Algorithm::kRing);
  EXPECT_NE(out.find("hier/direct"), std::string::npos) << out;
  const coll::SelectorSettings settings{{}, {table}};
  const coll::CollectiveShape shape{coll::CollectiveKind::kAllReduce, 4, 256};
  const auto small = coll::select_algorithm(shape, 4, {}, settings);
  EXPECT_EQ(small.config.algo, Algorithm::kHierarchical);
  EXPECT_EQ(small.config.inner, Algorithm::kDirect) << small.reason;
}

// A measured table chooses chunks as well as the algorithm: at each size the
// row with the smallest median (given here), whatever its chunks.
TEST(Report, TuningTableFromAChunkListChoosesChunks) {
  BenchFlags f;
  f.algo = "ring", f.chunks = "1,4", f.min_bytes = "1K", f.max_bytes = "1M", f.step_factor = 1024;
  const auto c = resolve(f);
  const coll::AlgoConfig one{Algorithm::kRing, 1}, four{Algorithm::kRing, 4};
  const auto [table, out] =
      tuned(c, "chunks_table.json",
            {timed_row(c, 1024, one, 10), timed_row(c, 1024, four, 30),
             timed_row(c, 1 << 20, one, 900), timed_row(c, 1 << 20, four, 500)});
  EXPECT_EQ(table.tool, "cclab bench --tune");
  ASSERT_EQ(table.bands.size(), 2u) << out;
  EXPECT_EQ(table.bands[0].chunks, 1);
  EXPECT_EQ(table.bands[1].min_bytes, 1u << 20);
  EXPECT_EQ(table.bands[1].algo, Algorithm::kRing);
  EXPECT_EQ(table.bands[1].chunks, 4);
  EXPECT_NE(out.find("ring:4"), std::string::npos) << out;
}

TEST(Sweep, StagedMemoryStillCatchesACallThatWritesNothing) {
  BenchFlags f;
  f.ranks = 1, f.algo = "ring", f.min_bytes = "64", f.max_bytes = "64", f.iters = 1;
  const auto c = resolve(f);
  StagedCounts counts;
  StagedBackend backend(std::make_unique<InertBackend>(), counts);
  const auto rows = run_sweep(c, backend);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].wrong, 16u);  // 64 B of f32, all still poisoned (through fill)
}

TEST(Report, TableColumnsAndJsonRecord) {
  BenchFlags f;
  f.coll = "allgather", f.check = 0, f.algo = "ring";
  const auto c = resolve(f);
  SweepRow row;
  row.bytes = 1024, row.count = 256, row.algo = Algorithm::kRing, row.iters = 3;
  summarize({2, 1, 3}, c, row);
  row.cpu_us_median = 3.5, row.csw_median = 2;
  std::ostringstream out;
  print_table(out, c, {row});
  const std::string text = out.str();
  EXPECT_NE(text.find("# cclab bench: backend threads, ranks 2, coll allgather"),
            std::string::npos);
  EXPECT_NE(text.find("size(B)        count  type  redop    algo    time(us)  algbw(GB/s)  "
                      "busbw(GB/s)  #wrong     cpu(us)     csw"),
            std::string::npos)
      << text;
  // 1024 B in 2 us = 0.512 GB/s; allgather busbw = 0.512 * 1/2.
  EXPECT_NE(text.find("1024          256   f32   none    ring        2.00         0.51         "
                      "0.26     N/A         3.5     2.0"),
            std::string::npos)
      << text;
  const auto record = to_json(c, {row});
  EXPECT_EQ(record["tool"], "cclab bench");
  EXPECT_EQ(record["config"]["coll"], "allgather");
  EXPECT_EQ(record["rows"][0]["time_us_median"], 2.0);
  // The calls themselves, in the order timed (summarize sorts its own copy).
  EXPECT_EQ(record["rows"][0]["times_us"], nlohmann::json::array({2.0, 1.0, 3.0}));
  EXPECT_EQ(record["rows"][0]["redop"], "none");
  EXPECT_EQ(record["rows"][0]["cpu_us_median"], 3.5);
  EXPECT_EQ(record["rows"][0]["csw_median"], 2.0);
  EXPECT_TRUE(record["rows"][0]["wrong"].is_null());
  for (const char* key : {"cpu_model", "cores", "hostname"})
    EXPECT_TRUE(record["machine"].contains(key)) << key;
  for (const char* key : {"compiler", "build_type", "git_commit"})
    EXPECT_TRUE(record["build"].contains(key)) << key;
  EXPECT_EQ(record["date"].get<std::string>().size(), 20u);  // 2024-05-01T12:00:00Z
  EXPECT_TRUE(record["config"]["eager_bytes"].is_null()) << "threads: no gloo settings";
  EXPECT_TRUE(record["config"]["loop_thread"].is_null());
  EXPECT_TRUE(record["config"]["connections"].is_null());
}

// The gloo backend's figures depend on the kernel's TCP congestion control
// (report.h): the record names it, read here with a shell, and a gloo table's
// header prints it (a threads table has no TCP to name).
TEST(Report, TcpCongestionControlIsRecordedAndHeadsGlooTables) {
  std::string expected = "unknown";
  if (FILE* sh = popen("cat /proc/sys/net/ipv4/tcp_congestion_control 2>/dev/null", "r")) {
    char name[64] = {};
    if (fscanf(sh, "%63s", name) == 1) expected = name;
    pclose(sh);
  }
  BenchConfig c;
  EXPECT_EQ(to_json(c, {})["machine"]["tcp_congestion_control"], expected);
  std::ostringstream threads, gloo;
  print_table(threads, c, {});
  c.backend = "gloo";
  print_table(gloo, c, {});
  const std::string line = "# tcp congestion control " + expected + " ";
  EXPECT_EQ(threads.str().find("tcp congestion control"), std::string::npos) << threads.str();
  EXPECT_NE(gloo.str().find(line), std::string::npos) << gloo.str();
}

TEST(Report, MachineSpeedIsAHeaderLineAndInTheRecord) {
  BenchConfig c;
  const SpeedAround speed{{2.5, 200, 8}, {2.6, 41000, 4}};
  std::ostringstream with, without;
  print_table(with, c, {}, speed);
  print_table(without, c, {});
  EXPECT_NE(with.str().find("# machine speed (start / end): compute 2.50 / 2.60 ns, ping-pong "
                            "200 / 41000 ns, copy 8.0 / 4.0 GB/s\n"),
            std::string::npos)
      << with.str();
  EXPECT_EQ(without.str().find("machine speed"), std::string::npos);
  const auto record = to_json(c, {}, speed);
  EXPECT_EQ(record["machine"]["speed"]["version"], kMachineSpeedVersion);
  EXPECT_EQ(record["machine"]["speed"]["start"]["pingpong_ns"], 200.0);
  EXPECT_EQ(record["machine"]["speed"]["end"]["copy_gbps"], 4.0);
  EXPECT_EQ(record["machine"]["speed"]["end"]["compute_ns"], 2.6);
  EXPECT_FALSE(to_json(c, {})["machine"].contains("speed"));
}

TEST(MachineSpeed, EveryProbeMeasuresAPositiveFiniteFigure) {
  const MachineSpeed s = measure_machine_speed();
  for (double v : {s.compute_ns, s.pingpong_ns, s.copy_gbps}) {
    EXPECT_GT(v, 0);
    EXPECT_TRUE(std::isfinite(v));
  }
}

// --pin narrows a rank to one core; the ping-pong's two threads must still
// get a core each, or a trip takes a scheduler time slice.
TEST(MachineSpeed, ProbesRunOnEveryOnlineCpuWhenTheCallerIsPinned) {
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  if (online < 2) GTEST_SKIP() << "one online CPU: nothing to unpin";
  cpu_set_t before, one;
  ASSERT_EQ(sched_getaffinity(0, sizeof before, &before), 0);
  if (CPU_COUNT(&before) < online) GTEST_SKIP() << "this process may not use every online CPU";
  CPU_ZERO(&one);
  CPU_SET(0, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  const MachineSpeed s = measure_machine_speed();
  ASSERT_EQ(sched_setaffinity(0, sizeof before, &before), 0);
  EXPECT_EQ(s.cpus, online);
  EXPECT_EQ(speed_json({s, s})["start"]["cpus"], online);
}

// Left to the scheduler, the ping-pong's two threads sometimes shared a CPU
// while another thread waited there (a threads sweep's end probe read 6.4 ms
// a trip): each is confined to a CPU of its own.
TEST(MachineSpeed, PingPongThreadsAreConfinedToTwoDifferentCpus) {
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  if (CPU_COUNT(&allowed) < 2) GTEST_SKIP() << "this process may use one CPU only";
  const MachineSpeed s = measure_machine_speed();
  EXPECT_GE(s.pingpong_cpus[0], 0);
  EXPECT_GE(s.pingpong_cpus[1], 0);
  EXPECT_NE(s.pingpong_cpus[0], s.pingpong_cpus[1]);
  EXPECT_EQ(speed_json({s, s})["end"]["pingpong_cpus"], nlohmann::json(s.pingpong_cpus));
  cpu_set_t after;
  ASSERT_EQ(sched_getaffinity(0, sizeof after, &after), 0);
  EXPECT_TRUE(CPU_EQUAL(&allowed, &after)) << "the caller's affinity changed";
}

TEST(Report, JsonRecordsTheGlooSettingsGiven) {
  BenchFlags f;
  f.backend = "gloo", f.eager = "64K", f.loop_thread = "normal";
  const auto record = to_json(resolve(f), {});
  EXPECT_EQ(record["config"]["eager_bytes"], 65536);
  EXPECT_EQ(record["config"]["loop_thread"], "normal");
  EXPECT_EQ(record["config"]["connections"], "shared");  // the default, named
  f.connections = "row";
  EXPECT_EQ(to_json(resolve(f), {})["config"]["connections"], "row");
}

}  // namespace
}  // namespace cclab::bench
