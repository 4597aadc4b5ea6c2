#include "cclab/collectives/reduce.h"

#include <cstdint>

#include "cclab/collectives/half.h"

namespace cclab::coll {
namespace baseline {
#include "reduce_kernels.inc"
}  // namespace baseline

#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx2,f16c")
namespace avx2 {
#include "reduce_kernels.inc"
}  // namespace avx2
#pragma GCC pop_options
#endif

namespace {

using ReduceFn = void (*)(void*, const void*, const void*, std::uint64_t, DataType, ReduceOp);

ReduceFn pick_kernel() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c")) return avx2::reduce_impl;
#endif
  return baseline::reduce_impl;
}

const ReduceFn kReduce = pick_kernel();

template <class T>
void divide(void* buf, std::uint64_t n, int divisor) {
  auto* p = static_cast<T*>(buf);
  for (std::uint64_t i = 0; i < n; ++i) p[i] = static_cast<T>(p[i] / static_cast<T>(divisor));
}

template <float (*Load)(std::uint16_t), std::uint16_t (*Store)(float)>
void divide_half(void* buf, std::uint64_t n, int divisor) {
  auto* p = static_cast<std::uint16_t*>(buf);
  for (std::uint64_t i = 0; i < n; ++i) p[i] = Store(Load(p[i]) / static_cast<float>(divisor));
}

}  // namespace

void reduce(void* dst, const void* a, const void* b, std::uint64_t count, DataType t, ReduceOp op) {
  kReduce(dst, a, b, count, t, op);
}

void finalize_avg(void* buf, std::uint64_t count, DataType t, int divisor) {
  switch (t) {
    case DataType::kF32:
      divide<float>(buf, count, divisor);
      break;
    case DataType::kF64:
      divide<double>(buf, count, divisor);
      break;
    case DataType::kF16:
      divide_half<f16_to_float, float_to_f16>(buf, count, divisor);
      break;
    case DataType::kBF16:
      divide_half<bf16_to_float, float_to_bf16>(buf, count, divisor);
      break;
    case DataType::kI32:
      divide<std::int32_t>(buf, count, divisor);
      break;
    case DataType::kI64:
      divide<std::int64_t>(buf, count, divisor);
      break;
    case DataType::kU8:
      divide<std::uint8_t>(buf, count, divisor);
      break;
  }
}

}  // namespace cclab::coll
