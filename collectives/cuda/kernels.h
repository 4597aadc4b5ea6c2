// The device kernels of the cuda and nccl executors, callable from host code:
// element-wise reduction (dst = a op b, reading and writing 16 bytes per
// access where the pointers allow, see kernel_layout.h) and avg's final
// division. Pointers may be on another device the current one can access
// (peer access): that is the fused "read peer, reduce, write" transfer.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "cclab/collectives/types.h"

namespace cclab::coll::detail {

// dst may alias a or b exactly. Enqueued on `stream` of the current device;
// kAvg reduces as kSum. Throws CudaError if the launch fails.
void launch_reduce(cudaStream_t stream, void* dst, const void* a, const void* b,
                   std::uint64_t count, DataType t, ReduceOp op, int sm_count);

// buf[i] /= divisor, exactly as finalize_avg() does on the host.
void launch_divide(cudaStream_t stream, void* buf, std::uint64_t count, DataType t, int divisor,
                   int sm_count);

}  // namespace cclab::coll::detail
