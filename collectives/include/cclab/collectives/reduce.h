// Reduction kernels over typed buffers. They vectorise (the loops are plain
// element-wise loops over __restrict pointers, compiled for AVX2 where the CPU
// has it, with a baseline fallback) and are shared by every CPU executor.
#pragma once

#include <cstdint>

#include "cclab/collectives/types.h"

namespace cclab::coll {

// dst[i] = a[i] (op) b[i]. dst may alias a or b exactly (not partially).
// kAvg reduces as kSum: the division happens once, in finalize_avg.
// f16/bf16 widen to f32, apply op, and round back to nearest even.
void reduce(void* dst, const void* a, const void* b, std::uint64_t count, DataType t, ReduceOp op);

// memcpy for collective payloads: large copies bypass the cache like large
// reductions do (see reduce.cc). dst == src is a no-op.
void copy_bytes(void* dst, const void* src, std::uint64_t bytes);

// buf[i] = buf[i] / divisor, for kAvg's final step (integers truncate).
void finalize_avg(void* buf, std::uint64_t count, DataType t, int divisor);

// The operator kAvg reduces with during the collective.
inline ReduceOp step_op(ReduceOp op) { return op == ReduceOp::kAvg ? ReduceOp::kSum : op; }

}  // namespace cclab::coll
