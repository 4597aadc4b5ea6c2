#include "cclab/collectives/communicator.h"

#include "cclab/collectives/error.h"
#include "cclab/collectives/reduce.h"

namespace cclab::coll {

void finalize_call(const CollectiveCall& call) {
  const auto& shape = call.shape;
  if (call.op == ReduceOp::kAvg &&
      (shape.kind == CollectiveKind::kAllReduce || shape.kind == CollectiveKind::kReduceScatter))
    finalize_avg(call.recv, shape.output_count(), call.dtype, shape.ranks);
}

bool output_is_disjoint(const CollectiveCall& call) {
  const std::size_t es = dtype_size(call.dtype);
  const auto in = reinterpret_cast<std::uintptr_t>(call.send);
  const auto out = reinterpret_cast<std::uintptr_t>(call.recv);
  return in + call.shape.input_count() * es <= out || out + call.shape.output_count() * es <= in;
}

void Request::wait() {
  CCLAB_CHECK(impl_ != nullptr, "wait() on an empty Request");
  impl_->wait();
}

bool Request::test() {
  CCLAB_CHECK(impl_ != nullptr, "test() on an empty Request");
  return impl_->test();
}

namespace {
CollectiveCall make_call(CollectiveKind kind, int ranks, std::uint64_t count, DataType t,
                         ReduceOp op, const void* send, void* recv, const AlgoConfig& algo,
                         int root = 0) {
  CollectiveCall c;
  c.shape = {kind, ranks, count, root};
  c.dtype = t;
  c.op = op;
  c.send = send;
  c.recv = recv;
  c.algo = algo;
  return c;
}
}  // namespace

Request Communicator::iallreduce(const void* send, void* recv, std::uint64_t count, DataType t,
                                 ReduceOp op, const AlgoConfig& algo) {
  return start(make_call(CollectiveKind::kAllReduce, size(), count, t, op, send, recv, algo));
}

Request Communicator::ireduce_scatter(const void* send, void* recv, std::uint64_t recv_count,
                                      DataType t, ReduceOp op, const AlgoConfig& algo) {
  return start(
      make_call(CollectiveKind::kReduceScatter, size(), recv_count, t, op, send, recv, algo));
}

Request Communicator::iall_gather(const void* send, void* recv, std::uint64_t send_count,
                                  DataType t, const AlgoConfig& algo) {
  return start(make_call(CollectiveKind::kAllGather, size(), send_count, t, ReduceOp::kSum, send,
                         recv, algo));
}

Request Communicator::ibroadcast(const void* send, void* recv, std::uint64_t count, DataType t,
                                 int root, const AlgoConfig& algo) {
  return start(make_call(CollectiveKind::kBroadcast, size(), count, t, ReduceOp::kSum, send, recv,
                         algo, root));
}

void Communicator::allreduce(const void* send, void* recv, std::uint64_t count, DataType t,
                             ReduceOp op, const AlgoConfig& algo) {
  run(make_call(CollectiveKind::kAllReduce, size(), count, t, op, send, recv, algo));
}

void Communicator::reduce_scatter(const void* send, void* recv, std::uint64_t recv_count,
                                  DataType t, ReduceOp op, const AlgoConfig& algo) {
  run(make_call(CollectiveKind::kReduceScatter, size(), recv_count, t, op, send, recv, algo));
}

void Communicator::all_gather(const void* send, void* recv, std::uint64_t send_count, DataType t,
                              const AlgoConfig& algo) {
  run(make_call(CollectiveKind::kAllGather, size(), send_count, t, ReduceOp::kSum, send, recv,
                algo));
}

void Communicator::broadcast(const void* send, void* recv, std::uint64_t count, DataType t,
                             int root, const AlgoConfig& algo) {
  run(make_call(CollectiveKind::kBroadcast, size(), count, t, ReduceOp::kSum, send, recv, algo,
                root));
}

}  // namespace cclab::coll
