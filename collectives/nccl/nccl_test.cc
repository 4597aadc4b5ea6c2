// The nccl executor on real GPUs: our schedules over ncclSend/ncclRecv and
// NCCL's own all-reduce, both against the serial reference. One rank per GPU
// (NCCL refuses two on one GPU); without a usable GPU the tests skip with
// CUDA's error text.
#include "cclab/collectives/nccl.h"

#include <gtest/gtest.h>

#include "cclab/collectives/algorithms.h"
#include "gpu_test_util.h"

namespace cclab::coll {
namespace {

using Run = void (*)(Communicator&, const CollectiveCall&);

TEST(NcclWorld, SchedulesOverSendRecvMatchReference) {
  CCLAB_SKIP_WITHOUT_GPU();
  auto world = make_nccl_world(8);
  for (auto kind : {CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter,
                    CollectiveKind::kAllGather, CollectiveKind::kBroadcast})
    for (auto algo : algorithms_for(kind))
      for (std::uint64_t count : {std::uint64_t{1}, std::uint64_t{1009}, std::uint64_t{1} << 20})
        for (auto [t, op] : {std::pair{DataType::kF32, ReduceOp::kSum},
                             std::pair{DataType::kBF16, ReduceOp::kAvg}}) {
          test::GpuCase c{kind, {algo, 2}, count, t, op, false};
          std::string first;
          EXPECT_EQ(test::run_and_check(*world, c, first,
                                        [](Communicator& comm, const CollectiveCall& call) {
                                          comm.start(call).wait();
                                        }),
                    0u)
              << world->note() << " " << collective_name(kind) << " " << algorithm_name(algo)
              << " count " << count << " " << dtype_name(t) << ": " << first;
        }
}

TEST(NcclWorld, NativeAllReduceMatchesReference) {
  CCLAB_SKIP_WITHOUT_GPU();
  auto world = make_nccl_world(8);
  for (auto algo : {NcclAlgo::kDefault, NcclAlgo::kRing, NcclAlgo::kTree})
    for (auto [t, op] :
         {std::pair{DataType::kF32, ReduceOp::kSum}, std::pair{DataType::kI32, ReduceOp::kMax}}) {
      test::GpuCase c{CollectiveKind::kAllReduce, {}, 1 << 20, t, op, true};
      std::string first;
      EXPECT_EQ(test::run_and_check(*world, c, first,
                                    [&](Communicator& comm, const CollectiveCall& call) {
                                      nccl_allreduce(comm, call.send, call.recv, call.shape.count,
                                                     call.dtype, call.op, algo);
                                    }),
                0u)
          << nccl_algo_name(algo) << ": " << first;
    }
}

TEST(NcclWorld, SaysWhenItRunsFewerRanksThanAsked) {
  CCLAB_SKIP_WITHOUT_GPU();
  auto world = make_nccl_world(64);  // more ranks than any machine has GPUs
  EXPECT_LT(world->size(), 64);
  EXPECT_NE(world->note().find("NCCL refuses two ranks on one GPU"), std::string::npos)
      << world->note();
}

}  // namespace
}  // namespace cclab::coll
