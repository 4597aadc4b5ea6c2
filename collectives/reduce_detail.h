// The kernel sets behind reduce() and finalize_avg() (reduce.cc), which pick
// one at start-up by what the CPU has. Tests run every set this CPU can, so
// the baseline kernels are checked on machines that would never choose them.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "cclab/collectives/types.h"

namespace cclab::coll::detail {

struct ReduceKernels {
  std::string_view name;
  void (*reduce)(void* dst, const void* a, const void* b, std::uint64_t n, DataType t, ReduceOp op);
  void (*divide)(void* buf, std::uint64_t n, DataType t, int divisor);
};

// The baseline set, then AVX2/F16C where this CPU has both; reduce() and
// finalize_avg() run the last.
std::vector<ReduceKernels> reduce_kernel_sets();

}  // namespace cclab::coll::detail
