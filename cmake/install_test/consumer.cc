// Built against an installed cclab: proves that the exported target, its
// headers and its link dependencies work from outside the build tree. It is
// also the README's API example: 4 ranks as threads, a blocking and a
// non-blocking all-reduce, and a split, each checked against a closed form.
#include <cstdio>
#include <vector>

#include "cclab/collectives/threads.h"

int main() {
  using namespace cclab::coll;
  ThreadsWorld world(4);              // 4 ranks as threads of this process
  world.run([](Communicator& comm) {  // runs on every rank's thread
    std::vector<float> grad(1 << 20, 1.0f + comm.rank());
    comm.allreduce(grad.data(), grad.data(), grad.size(), DataType::kF32, ReduceOp::kSum,
                   {Algorithm::kRing, /*chunks=*/2});
    if (grad[12345] != 1 + 2 + 3 + 4) throw std::runtime_error("allreduce: wrong sum");

    std::int64_t mine = comm.rank(), total = 0;
    Request req = comm.iallreduce(&mine, &total, 1, DataType::kI64, ReduceOp::kMax);
    req.wait();  // non-blocking calls are matched across ranks by issue order
    if (total != 3) throw std::runtime_error("iallreduce: wrong max");

    auto half = comm.split(/*color=*/comm.rank() % 2, /*key=*/comm.rank());
    std::int32_t one = 1, count = 0;
    half->allreduce(&one, &count, 1, DataType::kI32, ReduceOp::kSum);
    if (count != 2) throw std::runtime_error("split: wrong size");
  });
  std::puts("consumer: allreduce, iallreduce and split agree with the closed forms");
  return 0;
}
