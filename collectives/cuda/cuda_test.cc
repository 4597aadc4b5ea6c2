// The cuda executor on a real GPU: kernels against the host kernels bit for
// bit, and every algorithm of every collective against the serial reference,
// with virtual ranks when the machine has fewer GPUs than ranks. Without a
// usable GPU every test here skips with CUDA's error text, except the one
// that checks what a user is told in that case.
#include "cclab/collectives/cuda.h"

#include <gtest/gtest.h>

#include "cclab/collectives/algorithms.h"
#include "cclab/collectives/error.h"
#include "cclab/collectives/reduce.h"
#include "cuda_check.h"
#include "gpu_test_util.h"
#include "kernels.h"

namespace cclab::coll {
namespace {

TEST(CudaAvailability, NoDeviceIsOneClearError) {
  const auto why = cuda_unavailable_reason();
  if (why.empty()) GTEST_SKIP() << "a CUDA device is usable here";
  EXPECT_EQ(why.rfind("no usable CUDA device: ", 0), 0u) << why;
  try {
    make_cuda_world(2);
    FAIL() << "make_cuda_world succeeded without a device";
  } catch (const BackendUnavailable& e) {
    EXPECT_EQ(std::string(e.what()), why);
  }
}

// Values with every bit pattern class a reduction meets (signs, fractions,
// growth under prod), but no NaN, whose min/max is order-dependent.
void fill_varied(std::vector<unsigned char>& buf, std::uint64_t count, DataType t, int salt) {
  for (std::uint64_t i = 0; i < count; ++i)
    test::store(buf.data(), i, t, (static_cast<int>((i * 37 + salt * 11) % 101) - 50) / 8.0);
}

// dst = a op b on the device equals reduce() on the host, for every type and
// op and for pointers misaligned against each other (scalar path) or not.
TEST(CudaKernels, ReduceMatchesHostBitForBit) {
  CCLAB_SKIP_WITHOUT_GPU();
  const std::uint64_t count = 100003;
  for (DataType t : all_dtypes()) {
    const std::size_t es = dtype_size(t);
    std::vector<unsigned char> a((count + 8) * es), b((count + 8) * es), want((count + 8) * es),
        got((count + 8) * es);
    fill_varied(a, count + 8, t, 1);
    fill_varied(b, count + 8, t, 2);
    DeviceBuffer da(0, a.size()), db(0, b.size()), dd(0, a.size());
    copy_to_device(da.data(), a.data(), a.size());
    copy_to_device(db.data(), b.data(), b.size());
    for (ReduceOp op : all_ops())
      for (std::uint64_t shift : {0, 1, 3}) {  // dst shifted: misaligned unless 0
        reduce(want.data(), a.data() + es, b.data() + es, count, t, op);
        detail::launch_reduce(nullptr, dd.data() + shift * es, da.data() + es, db.data() + es,
                              count, t, op, 132);
        CCLAB_CUDA(cudaDeviceSynchronize());
        copy_to_host(got.data(), dd.data() + shift * es, count * es);
        EXPECT_EQ(std::memcmp(got.data(), want.data(), count * es), 0)
            << dtype_name(t) << " " << op_name(op) << " shift " << shift;
      }
  }
}

TEST(CudaKernels, DivideMatchesFinalizeAvg) {
  CCLAB_SKIP_WITHOUT_GPU();
  const std::uint64_t count = 4099;
  for (DataType t : all_dtypes()) {
    const std::size_t es = dtype_size(t);
    std::vector<unsigned char> want(count * es), got(count * es);
    fill_varied(want, count, t, 3);
    DeviceBuffer d(0, want.size());
    copy_to_device(d.data(), want.data(), want.size());
    finalize_avg(want.data(), count, t, 7);
    detail::launch_divide(nullptr, d.data(), count, t, 7, 132);
    CCLAB_CUDA(cudaDeviceSynchronize());
    copy_to_host(got.data(), d.data(), got.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size()), 0) << dtype_name(t);
  }
}

struct WorldParam {
  CollectiveKind kind;
  Algorithm algo;
  int ranks;
};

std::vector<WorldParam> world_grid() {
  std::vector<WorldParam> out;
  for (auto k : {CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter,
                 CollectiveKind::kAllGather, CollectiveKind::kBroadcast})
    for (auto a : algorithms_for(k))
      for (int n : {1, 2, 3, 4, 8}) out.push_back({k, a, n});
  return out;
}

class CudaWorldGrid : public testing::TestWithParam<WorldParam> {};

TEST_P(CudaWorldGrid, MatchesSerialReference) {
  CCLAB_SKIP_WITHOUT_GPU();
  const auto [kind, algo, n] = GetParam();
  auto world = make_cuda_world(n);
  const bool reduces = kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kReduceScatter;
  std::vector<std::pair<DataType, ReduceOp>> cases = {{DataType::kF32, ReduceOp::kSum}};
  if (reduces)
    cases.insert(cases.end(), {{DataType::kBF16, ReduceOp::kAvg},
                               {DataType::kF16, ReduceOp::kMin},
                               {DataType::kI32, ReduceOp::kMax},
                               {DataType::kF64, ReduceOp::kProd}});
  const std::uint64_t u = n, large = (std::uint64_t{1} << 20) + 3;
  for (std::uint64_t count :
       {std::uint64_t{0}, std::uint64_t{1}, u - 1 + (u == 1), u + 1, std::uint64_t{1009}, large})
    for (auto [t, op] : cases)
      for (bool in_place : {false, true}) {
        // The large count once (f32 sum, out of place): the host reference
        // dominates its cost, and the small counts cover every case.
        if (count == large && (in_place || t != DataType::kF32)) continue;
        test::GpuCase c{kind, {algo, 2}, count, t, op, in_place};
        std::string first;
        EXPECT_EQ(test::run_and_check(*world, c, first,
                                      [](Communicator& comm, const CollectiveCall& call) {
                                        comm.start(call).wait();
                                      }),
                  0u)
            << "count " << count << " " << dtype_name(t) << " " << op_name(op)
            << (in_place ? " in place: " : ": ") << first;
      }
}

std::string world_name(const testing::TestParamInfo<WorldParam>& p) {
  return fmt::format("{}_{}_{}", collective_name(p.param.kind), algorithm_name(p.param.algo),
                     p.param.ranks);
}

INSTANTIATE_TEST_SUITE_P(Gpu, CudaWorldGrid, testing::ValuesIn(world_grid()), world_name);

// Several collectives in flight per rank: each rank starts three before
// waiting on any, with the output of one the input of the next.
TEST(CudaWorld, BackToBackCollectivesChainCorrectly) {
  CCLAB_SKIP_WITHOUT_GPU();
  auto world = make_cuda_world(4);
  const std::uint64_t count = 1 << 16;
  world->run([&](Communicator& comm) {
    DeviceBuffer buf(world->device(comm.rank()), count * 4);
    std::vector<float> host(count, 1.0f);
    copy_to_device(buf.data(), host.data(), count * 4);
    std::vector<Request> reqs;
    for (auto a : {Algorithm::kRing, Algorithm::kTree, Algorithm::kDirect})
      reqs.push_back(
          comm.iallreduce(buf.data(), buf.data(), count, DataType::kF32, ReduceOp::kSum, {a, 2}));
    for (auto& r : reqs) r.wait();
    copy_to_host(host.data(), buf.data(), count * 4);
    // 1 summed over 4 ranks, three times in a row: 4^3.
    for (std::uint64_t i = 0; i < count; ++i) ASSERT_EQ(host[i], 64.0f) << i;
  });
}

}  // namespace
}  // namespace cclab::coll
