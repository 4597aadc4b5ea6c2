// Reduction kernels (and kAvg's final division) beside a plain memcpy of the
// same sizes, in one binary so the comparison is made side by side. Every
// benchmark counts the bytes of its destination (SetBytesProcessed), so their
// GB/s figures compare directly: a reduction reads two sources where memcpy
// reads one.
#include <cstddef>
#include <cstring>
#include <vector>

#include <benchmark/benchmark.h>

#include "cclab/collectives/reduce.h"
#include "cclab/collectives/types.h"

namespace {

using cclab::coll::DataType;

constexpr std::int64_t kSmallBytes = std::int64_t{1} << 20;
constexpr std::int64_t kLargeBytes = std::int64_t{128} << 20;

// Sources and destination at the largest size, allocated and touched once for
// all kernel benchmarks (first touch of fresh memory is far slower than a
// reduction). Zero is a valid, non-denormal value of every type.
struct KernelBuffers {
  std::vector<std::byte> a = std::vector<std::byte>(kLargeBytes);
  std::vector<std::byte> b = std::vector<std::byte>(kLargeBytes);
  std::vector<std::byte> dst = std::vector<std::byte>(kLargeBytes);
};

KernelBuffers& buffers() {
  static KernelBuffers instance;
  return instance;
}

void BM_ReduceSum(benchmark::State& state, DataType t) {
  const auto bytes = state.range(0);
  const auto count = static_cast<std::uint64_t>(bytes) / cclab::coll::dtype_size(t);
  auto& buf = buffers();
  for (auto _ : state) {
    cclab::coll::reduce(buf.dst.data(), buf.a.data(), buf.b.data(), count, t,
                        cclab::coll::ReduceOp::kSum);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * bytes);
}

// kAvg's last step, in place over the result (zeros stay zeros).
void BM_FinalizeAvg(benchmark::State& state, DataType t) {
  const auto bytes = state.range(0);
  const auto count = static_cast<std::uint64_t>(bytes) / cclab::coll::dtype_size(t);
  auto& buf = buffers();
  for (auto _ : state) {
    cclab::coll::finalize_avg(buf.dst.data(), count, t, 3);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * bytes);
}

void BM_Memcpy(benchmark::State& state) {
  const auto bytes = state.range(0);
  auto& buf = buffers();
  for (auto _ : state) {
    std::memcpy(buf.dst.data(), buf.a.data(), static_cast<std::size_t>(bytes));
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * bytes);
}

// 1 MiB stays in cache on most machines, 128 MiB streams from memory.
void kernel_sizes(benchmark::internal::Benchmark* b) {
  b->Arg(kSmallBytes)->Arg(kLargeBytes)->ArgName("bytes")->UseRealTime()->MinTime(0.2);
}

BENCHMARK(BM_Memcpy)->Apply(kernel_sizes);
BENCHMARK_CAPTURE(BM_ReduceSum, f32, DataType::kF32)->Apply(kernel_sizes);
BENCHMARK_CAPTURE(BM_ReduceSum, f16, DataType::kF16)->Apply(kernel_sizes);
BENCHMARK_CAPTURE(BM_ReduceSum, bf16, DataType::kBF16)->Apply(kernel_sizes);
BENCHMARK_CAPTURE(BM_ReduceSum, f64, DataType::kF64)->Apply(kernel_sizes);
BENCHMARK_CAPTURE(BM_ReduceSum, i32, DataType::kI32)->Apply(kernel_sizes);
BENCHMARK_CAPTURE(BM_FinalizeAvg, f32, DataType::kF32)->Apply(kernel_sizes);
BENCHMARK_CAPTURE(BM_FinalizeAvg, f16, DataType::kF16)->Apply(kernel_sizes);
BENCHMARK_CAPTURE(BM_FinalizeAvg, bf16, DataType::kBF16)->Apply(kernel_sizes);

}  // namespace
