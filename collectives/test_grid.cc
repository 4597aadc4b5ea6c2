// The numeric grid: every algorithm of every collective x ranks {1,2,3,4,5,7,
// 8,16} x counts {0, 1, n-1, n+1, 1009, 2^20+3} x every dtype x every op, run
// on the threads backend and compared bit for bit with a serial reference.
// Sanitizer builds (CCLAB_TEST_GRID=reduced) shrink the large count and the
// rank list; rings always runs the reduced large count.
#include <algorithm>
#include <cstring>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cclab/collectives/threads.h"
#include "test_util.h"

namespace cclab::coll {
namespace {

struct GridParam {
  CollectiveKind kind;
  Algorithm algo;
  int ranks;
};

std::vector<GridParam> grid() {
  std::vector<int> ranks = {1, 2, 3, 4, 5, 7, 8, 16};
  if (test::reduced_grid()) ranks = {1, 2, 3, 5, 8};
  std::vector<GridParam> out;
  for (auto k : {CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter,
                 CollectiveKind::kAllGather, CollectiveKind::kBroadcast})
    for (auto a : algorithms_for(k))
      for (int n : ranks) out.push_back({k, a, n});
  return out;
}

std::string grid_name(const testing::TestParamInfo<GridParam>& p) {
  return fmt::format("{}_{}_{}", collective_name(p.param.kind), algorithm_name(p.param.algo),
                     p.param.ranks);
}

class Grid : public testing::TestWithParam<GridParam> {};

TEST_P(Grid, MatchesSerialReference) {
  const auto [kind, algo, n] = GetParam();
  // rings is the ring on each of its parts, and hier's reduce-scatter and
  // all-gather are rings in both phases: their arithmetic is the ring's, so
  // they take the reduced large count everywhere (CI time, not coverage).
  const bool ring_arithmetic = algo == Algorithm::kRings || (algo == Algorithm::kHierarchical &&
                                                             kind != CollectiveKind::kAllReduce);
  std::uint64_t large = test::reduced_grid() || ring_arithmetic ? (1u << 14) + 3 : (1u << 20) + 3;
  // Reduce-scatter and all-gather buffers are count * ranks long: keep the
  // largest buffer at about `large` elements.
  if (kind == CollectiveKind::kReduceScatter || kind == CollectiveKind::kAllGather)
    large = large / n + 1;
  const std::vector<std::uint64_t> counts = {0,    1,    std::uint64_t(n - 1), std::uint64_t(n + 1),
                                             1009, large};
  const bool reduces = kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kReduceScatter;
  std::vector<ReduceOp> ops(all_ops().begin(), all_ops().end());
  if (!reduces) ops = {ReduceOp::kSum};
  ThreadsWorld world(n);
  const CollectiveShape biggest{kind, n, large};
  const std::uint64_t max_elems =  // bytes of the largest buffer
      std::max(biggest.input_count(), biggest.output_count()) * 8;
  std::vector<std::uint64_t> wrong(n, 0);
  std::vector<std::string> first_error(n);
  // The reduced result, computed once per configuration with each rank
  // filling a slice of it.
  std::vector<unsigned char> ref(max_elems);
  world.run([&](Communicator& comm) {
    const int r = comm.rank();
    std::vector<unsigned char> in(max_elems), out(max_elems), want(max_elems);
    for (std::uint64_t count : counts) {
      for (DataType t : all_dtypes()) {
        for (ReduceOp op : ops) {
          const CollectiveShape shape{kind, n, count, n / 2};
          const std::size_t es = dtype_size(t);
          test::fill_input(in.data(), shape.input_count(), t, op, r);
          if (reduces) {
            const std::uint64_t len = shape.input_count();
            for (std::uint64_t i = len * r / n; i < len * (r + 1) / n; ++i)
              test::reference_value(ref.data() + i * es, i, t, op, n);
          }
          CollectiveCall call{shape, t, op, in.data(), out.data(), {algo, 2}};
          comm.start(call).wait();
          comm.barrier();  // the reference is complete
          const unsigned char* expect = want.data();
          if (reduces)
            expect = ref.data() + (kind == CollectiveKind::kReduceScatter ? count * r * es : 0);
          else
            for (std::uint64_t i = 0; i < shape.output_count(); ++i)
              test::expected_output(want.data() + i * es, shape, r, i, t, op);
          for (std::uint64_t i = 0; i < shape.output_count(); ++i) {
            if (std::memcmp(out.data() + i * es, expect + i * es, es) != 0 && wrong[r]++ == 0)
              first_error[r] = fmt::format("rank {} count {} {} {}: element {} differs", r, count,
                                           dtype_name(t), op_name(op), i);
          }
          comm.barrier();  // everyone has compared before the reference changes
        }
      }
    }
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(wrong[r], 0u) << first_error[r];
}

INSTANTIATE_TEST_SUITE_P(Numeric, Grid, testing::ValuesIn(grid()), grid_name);

}  // namespace
}  // namespace cclab::coll
