// Reduction kernels. One grid-stride kernel per (type, op): a scalar head up to
// the common 16-byte boundary, a body of uint4 vectors with kUnroll
// independent loads in flight per thread (enough to cover memory latency at
// kBlocksPerSm x 512 threads per SM), and a scalar tail. Arithmetic matches
// the host kernels bit for bit: f16/bf16 widen to f32, apply the op and round
// to nearest even; integers wrap like the host's casts.
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cclab/collectives/kernel_layout.h"
#include "cuda_check.h"
#include "kernels.h"

namespace cclab::coll::detail {
namespace {

constexpr int kUnroll = 4;

// Arithmetic type of T: f32 for the 16-bit floats, T otherwise.
template <class T>
struct Arith {
  using type = T;
  __device__ static T load(T x) { return x; }
  __device__ static T store(T x) { return x; }
};
template <>
struct Arith<__half> {
  using type = float;
  __device__ static float load(__half x) { return __half2float(x); }
  __device__ static __half store(float x) { return __float2half_rn(x); }
};
template <>
struct Arith<__nv_bfloat16> {
  using type = float;
  __device__ static float load(__nv_bfloat16 x) { return __bfloat162float(x); }
  __device__ static __nv_bfloat16 store(float x) { return __float2bfloat16_rn(x); }
};

// The same expressions as reduce_kernels.inc (min/max order matters for NaN).
struct Sum {
  template <class A>
  __device__ A operator()(A p, A q) const {
    return static_cast<A>(p + q);
  }
};
struct Prod {
  template <class A>
  __device__ A operator()(A p, A q) const {
    return static_cast<A>(p * q);
  }
};
struct Min {
  template <class A>
  __device__ A operator()(A p, A q) const {
    return q < p ? q : p;
  }
};
struct Max {
  template <class A>
  __device__ A operator()(A p, A q) const {
    return p < q ? q : p;
  }
};

template <class T, class Op>
__device__ T apply(T x, T y) {
  using A = Arith<T>;
  return A::store(Op()(A::load(x), A::load(y)));
}

template <class T, class Op>
__device__ uint4 apply_vector(uint4 x, uint4 y) {
  constexpr int kPer = sizeof(uint4) / sizeof(T);
  uint4 r;
  const T* xs = reinterpret_cast<const T*>(&x);
  const T* ys = reinterpret_cast<const T*>(&y);
  T* rs = reinterpret_cast<T*>(&r);
#pragma unroll
  for (int k = 0; k < kPer; ++k) rs[k] = apply<T, Op>(xs[k], ys[k]);
  return r;
}

// Scalar elements [begin, end).
template <class T, class Op>
__device__ void scalar_range(T* dst, const T* a, const T* b, std::uint64_t begin, std::uint64_t end,
                             std::uint64_t tid, std::uint64_t stride) {
  for (std::uint64_t i = begin + tid; i < end; i += stride) dst[i] = apply<T, Op>(a[i], b[i]);
}

template <class T, class Op>
__global__ void reduce_kernel(T* dst, const T* a, const T* b, VectorSplit split) {
  const std::uint64_t tid = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x;
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  scalar_range<T, Op>(dst, a, b, 0, split.head, tid, stride);
  auto* dv = reinterpret_cast<uint4*>(dst + split.head);
  const auto* av = reinterpret_cast<const uint4*>(a + split.head);
  const auto* bv = reinterpret_cast<const uint4*>(b + split.head);
  std::uint64_t i = tid;
  // kUnroll vectors per thread per round, all loads issued before any use.
  for (; i + (kUnroll - 1) * stride < split.vectors; i += kUnroll * stride) {
    uint4 x[kUnroll], y[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      x[k] = av[i + k * stride];
      y[k] = bv[i + k * stride];
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) dv[i + k * stride] = apply_vector<T, Op>(x[k], y[k]);
  }
  for (; i < split.vectors; i += stride) dv[i] = apply_vector<T, Op>(av[i], bv[i]);
  const std::uint64_t body_end = split.head + split.vectors * split.per_vector;
  scalar_range<T, Op>(dst, a, b, body_end, body_end + split.tail, tid, stride);
}

template <class T>
__global__ void divide_kernel(T* buf, std::uint64_t n, int divisor) {
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t i = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    using A = Arith<T>;
    using V = typename A::type;
    if constexpr (std::is_integral_v<V>) {
      buf[i] = static_cast<T>(buf[i] / divisor);  // as int or wider, like the host
    } else {
      buf[i] = A::store(static_cast<V>(A::load(buf[i]) / static_cast<V>(divisor)));
    }
  }
}

template <class T, class Op>
void launch_typed(cudaStream_t stream, void* dst, const void* a, const void* b, std::uint64_t count,
                  int sm_count) {
  const auto split =
      split_vectors(reinterpret_cast<std::uintptr_t>(dst), reinterpret_cast<std::uintptr_t>(a),
                    reinterpret_cast<std::uintptr_t>(b), count, sizeof(T));
  // Work items: vectors per kUnroll, or scalars when there is no body.
  const std::uint64_t items = std::max<std::uint64_t>((split.vectors + kUnroll - 1) / kUnroll,
                                                      std::max(split.head, split.tail));
  const auto shape = launch_shape(items, sm_count);
  if (shape.blocks == 0) return;
  reduce_kernel<T, Op><<<shape.blocks, shape.threads, 0, stream>>>(
      static_cast<T*>(dst), static_cast<const T*>(a), static_cast<const T*>(b), split);
  CCLAB_CUDA(cudaGetLastError());
}

template <class T>
void launch_op(cudaStream_t stream, void* dst, const void* a, const void* b, std::uint64_t count,
               ReduceOp op, int sm_count) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return launch_typed<T, Sum>(stream, dst, a, b, count, sm_count);
    case ReduceOp::kProd:
      return launch_typed<T, Prod>(stream, dst, a, b, count, sm_count);
    case ReduceOp::kMin:
      return launch_typed<T, Min>(stream, dst, a, b, count, sm_count);
    case ReduceOp::kMax:
      return launch_typed<T, Max>(stream, dst, a, b, count, sm_count);
  }
}

template <class T>
void launch_divide_typed(cudaStream_t stream, void* buf, std::uint64_t count, int divisor,
                         int sm_count) {
  const auto shape = launch_shape(count, sm_count);
  if (shape.blocks == 0) return;
  divide_kernel<T>
      <<<shape.blocks, shape.threads, 0, stream>>>(static_cast<T*>(buf), count, divisor);
  CCLAB_CUDA(cudaGetLastError());
}

}  // namespace

void launch_reduce(cudaStream_t stream, void* dst, const void* a, const void* b,
                   std::uint64_t count, DataType t, ReduceOp op, int sm_count) {
  switch (t) {
    case DataType::kF32:
      return launch_op<float>(stream, dst, a, b, count, op, sm_count);
    case DataType::kF64:
      return launch_op<double>(stream, dst, a, b, count, op, sm_count);
    case DataType::kF16:
      return launch_op<__half>(stream, dst, a, b, count, op, sm_count);
    case DataType::kBF16:
      return launch_op<__nv_bfloat16>(stream, dst, a, b, count, op, sm_count);
    case DataType::kI32:
      return launch_op<std::int32_t>(stream, dst, a, b, count, op, sm_count);
    case DataType::kI64:
      return launch_op<std::int64_t>(stream, dst, a, b, count, op, sm_count);
    case DataType::kU8:
      return launch_op<std::uint8_t>(stream, dst, a, b, count, op, sm_count);
  }
}

void launch_divide(cudaStream_t stream, void* buf, std::uint64_t count, DataType t, int divisor,
                   int sm_count) {
  switch (t) {
    case DataType::kF32:
      return launch_divide_typed<float>(stream, buf, count, divisor, sm_count);
    case DataType::kF64:
      return launch_divide_typed<double>(stream, buf, count, divisor, sm_count);
    case DataType::kF16:
      return launch_divide_typed<__half>(stream, buf, count, divisor, sm_count);
    case DataType::kBF16:
      return launch_divide_typed<__nv_bfloat16>(stream, buf, count, divisor, sm_count);
    case DataType::kI32:
      return launch_divide_typed<std::int32_t>(stream, buf, count, divisor, sm_count);
    case DataType::kI64:
      return launch_divide_typed<std::int64_t>(stream, buf, count, divisor, sm_count);
    case DataType::kU8:
      return launch_divide_typed<std::uint8_t>(stream, buf, count, divisor, sm_count);
  }
}

}  // namespace cclab::coll::detail
