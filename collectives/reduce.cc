#include "cclab/collectives/reduce.h"

#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "cclab/collectives/half.h"
#include "reduce_detail.h"

namespace cclab::coll {
namespace baseline {
#include "reduce_kernels.inc"
}  // namespace baseline

#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx2,f16c")
#define CCLAB_KERNELS_F16C
namespace avx2 {
#include "reduce_kernels.inc"
}  // namespace avx2
#undef CCLAB_KERNELS_F16C
#pragma GCC pop_options
#endif

std::vector<detail::ReduceKernels> detail::reduce_kernel_sets() {
  std::vector<ReduceKernels> sets = {{"baseline", baseline::reduce_impl, baseline::divide_impl}};
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c"))
    sets.push_back({"avx2-f16c", avx2::reduce_impl, avx2::divide_impl});
#endif
  return sets;
}

namespace {

// What reduce() and finalize_avg() run: the best set this CPU has.
const detail::ReduceKernels kKernels = detail::reduce_kernel_sets().back();

// Above this size a result is not read again while it is still in cache, so
// it is written with non-temporal stores: that saves the read-for-ownership
// of every destination line (a reduction then moves 3 bytes of memory traffic
// per result byte instead of 4, a copy 2 instead of 3).
constexpr std::uint64_t kStreamBytes = 16u << 20;
constexpr std::uint64_t kBlockBytes = 8u << 10;  // stays in L1

#if defined(__x86_64__)
__attribute__((target("avx2"))) void stream_block(std::byte* dst, const std::byte* src,
                                                  std::uint64_t bytes) {
  for (std::uint64_t i = 0; i < bytes; i += 32)
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i),
                        _mm256_load_si256(reinterpret_cast<const __m256i*>(src + i)));
}

bool can_stream() {
  static const bool ok = __builtin_cpu_supports("avx2");
  return ok;
}

// Runs `fill(tmp, first_byte, bytes)` block by block into an L1 buffer and
// streams each block to dst. Handles an unaligned head and a short tail with
// ordinary stores. Ends with a store fence so that a later release store
// (the transport's "done" flag) orders the streamed data too.
template <class Fill>
void streamed(std::byte* dst, std::uint64_t total, std::size_t esize, Fill fill) {
  alignas(64) std::byte tmp[kBlockBytes];
  const std::uint64_t misalign = reinterpret_cast<std::uintptr_t>(dst) % 32;
  std::uint64_t head = misalign ? 32 - misalign : 0;
  if (head % esize != 0) head = total;  // element straddles the boundary: no streaming
  head = std::min(head, total);
  if (head) fill(dst, 0, head);
  std::uint64_t pos = head;
  for (; pos + kBlockBytes <= total; pos += kBlockBytes) {
    fill(tmp, pos, kBlockBytes);
    stream_block(dst + pos, tmp, kBlockBytes);
  }
  const std::uint64_t rest = (total - pos) / 32 * 32;
  if (rest) {
    fill(tmp, pos, rest);
    stream_block(dst + pos, tmp, rest);
    pos += rest;
  }
  if (pos < total) fill(dst + pos, pos, total - pos);
  _mm_sfence();
}
#endif

}  // namespace

void reduce(void* dst, const void* a, const void* b, std::uint64_t count, DataType t, ReduceOp op) {
  const std::size_t es = dtype_size(t);
#if defined(__x86_64__)
  if (count * es >= kStreamBytes && can_stream() && kBlockBytes % es == 0) {
    const auto* pa = static_cast<const std::byte*>(a);
    const auto* pb = static_cast<const std::byte*>(b);
    streamed(static_cast<std::byte*>(dst), count * es, es,
             [&](std::byte* out, std::uint64_t at, std::uint64_t bytes) {
               kKernels.reduce(out, pa + at, pb + at, bytes / es, t, op);
             });
    return;
  }
#endif
  kKernels.reduce(dst, a, b, count, t, op);
}

void copy_bytes(void* dst, const void* src, std::uint64_t bytes) {
  if (dst == src) return;
#if defined(__x86_64__)
  if (bytes >= kStreamBytes && can_stream()) {
    const auto* ps = static_cast<const std::byte*>(src);
    streamed(
        static_cast<std::byte*>(dst), bytes, 1,
        [&](std::byte* out, std::uint64_t at, std::uint64_t n) { std::memcpy(out, ps + at, n); });
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

void finalize_avg(void* buf, std::uint64_t count, DataType t, int divisor) {
  kKernels.divide(buf, count, t, divisor);
}

}  // namespace cclab::coll
