// Shared by the GPU tests: skipping without a usable device, and one
// collective run on a GpuWorld checked element by element against the serial
// reference of test_util.h.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "../test_util.h"
#include "cclab/collectives/cuda.h"

// Skips the test, with CUDA's own error text, when no device is usable.
#define CCLAB_SKIP_WITHOUT_GPU()                                                 \
  do {                                                                           \
    if (const auto why = ::cclab::coll::cuda_unavailable_reason(); !why.empty()) \
      GTEST_SKIP() << why;                                                       \
  } while (0)

namespace cclab::coll::test {

struct GpuCase {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  AlgoConfig algo;
  std::uint64_t count = 0;
  DataType dtype = DataType::kF32;
  ReduceOp op = ReduceOp::kSum;
  bool in_place = false;
  int variant = -1;  // >= 0: run `run_variant` instead of the communicator's call
};

// Runs one collective on every rank of `world` (device buffers, known inputs,
// poisoned outputs) and returns the number of wrong output elements; `first`
// describes the first one.
template <class Call>
std::uint64_t run_and_check(GpuWorld& world, const GpuCase& c, std::string& first, Call&& call) {
  const int n = world.size();
  const CollectiveShape shape{c.kind, n, c.count, n / 2};
  const std::size_t es = dtype_size(c.dtype);
  std::vector<std::uint64_t> wrong(n, 0);
  std::vector<std::string> firsts(n);
  world.run([&](Communicator& comm) {
    const int r = comm.rank();
    const auto storage = std::max(shape.input_count(), shape.output_count()) * es;
    DeviceBuffer in(world.device(r), shape.input_count() * es), out(world.device(r), storage);
    std::vector<unsigned char> host(storage), want(es);
    fill_device(out.data(), 0xA5, storage);  // a call that writes nothing fails
    std::byte* send = in.data();
    std::byte* recv = out.data();
    if (c.in_place) {  // NCCL's offsets: the rank's block of the one storage
      send = out.data() + (c.kind == CollectiveKind::kAllGather ? c.count * r * es : 0);
      recv = out.data() + (c.kind == CollectiveKind::kReduceScatter ? c.count * r * es : 0);
    }
    fill_input(host.data(), shape.input_count(), c.dtype, c.op, r);
    copy_to_device(send, host.data(), shape.input_count() * es);
    call(comm, CollectiveCall{shape, c.dtype, c.op, send, recv, c.algo});
    copy_to_host(host.data(), recv, shape.output_count() * es);
    for (std::uint64_t i = 0; i < shape.output_count(); ++i) {
      expected_output(want.data(), shape, r, i, c.dtype, c.op);
      if (std::memcmp(host.data() + i * es, want.data(), es) != 0 && wrong[r]++ == 0)
        firsts[r] = fmt::format("rank {}: element {} of {} differs", r, i, shape.output_count());
    }
  });
  std::uint64_t total = 0;
  for (int r = 0; r < n; ++r) {
    total += wrong[r];
    if (first.empty()) first = firsts[r];
  }
  return total;
}

}  // namespace cclab::coll::test
