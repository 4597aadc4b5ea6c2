// The nccl backend: our schedules with NCCL as the transport (ncclSend and
// ncclRecv, grouped, plus our reduction kernels), and NCCL's own all-reduce
// as the baseline to beat, in the same world and the same run.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "cclab/collectives/cuda.h"

namespace cclab::coll {

// NCCL's all-reduce with its algorithm pinned through NCCL_ALGO (read by NCCL
// when a communicator is created), or left to NCCL (kDefault).
enum class NcclAlgo : std::uint8_t { kDefault, kRing, kTree };
std::string_view nccl_algo_name(NcclAlgo a);  // "nccl", "nccl-ring", "nccl-tree"

// One NCCL communicator per rank, all in this process (ncclCommInitAll), one
// rank per GPU: NCCL refuses two ranks on one GPU ("Duplicate GPU detected"),
// so the world has min(ranks, GPUs) ranks and note() says so when it dropped
// some. Throws BackendUnavailable without a usable GPU.
std::unique_ptr<GpuWorld> make_nccl_world(int ranks, const GpuOptions& options = {});

// ncclAllReduce on a communicator of a nccl world; collective (every rank
// calls it). Throws InvalidArgument for a communicator of another backend.
void nccl_allreduce(Communicator& comm, const void* send, void* recv, std::uint64_t count,
                    DataType t, ReduceOp op, NcclAlgo algo);

}  // namespace cclab::coll
