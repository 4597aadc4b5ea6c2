// Shared test helpers: the parameter grid, input values whose results are
// exact in every type, and a serial reference written independently of the
// schedules (a plain loop over ranks in double/int64 arithmetic).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cclab/collectives/algorithms.h"
#include "cclab/collectives/half.h"
#include "cclab/collectives/schedule.h"
#include "cclab/collectives/types.h"

namespace cclab::coll::test {

inline bool reduced_grid() {
  const char* g = std::getenv("CCLAB_TEST_GRID");
  return g && std::string(g) == "reduced";
}

// Small integers: sums over 16 ranks stay below 2^8 (exact in bf16), and
// products use only 1s and 2s with at most four 2s per element.
inline int input_value(int rank, std::uint64_t i, ReduceOp op) {
  if (op == ReduceOp::kProd) return (rank + i) % 4 == 0 ? 2 : 1;
  return static_cast<int>((rank * 7 + i * 3) % 5) + 1;
}

// Stores v in element i of a buffer of type t.
inline void store(void* buf, std::uint64_t i, DataType t, double v) {
  auto* b = static_cast<unsigned char*>(buf);
  switch (t) {
    case DataType::kF32:
      reinterpret_cast<float*>(b)[i] = static_cast<float>(v);
      break;
    case DataType::kF64:
      reinterpret_cast<double*>(b)[i] = v;
      break;
    case DataType::kF16:
      reinterpret_cast<_Float16*>(b)[i] = static_cast<_Float16>(v);
      break;
    case DataType::kBF16:
      reinterpret_cast<std::uint16_t*>(b)[i] = float_to_bf16(static_cast<float>(v));
      break;
    case DataType::kI32:
      reinterpret_cast<std::int32_t*>(b)[i] = static_cast<std::int32_t>(v);
      break;
    case DataType::kI64:
      reinterpret_cast<std::int64_t*>(b)[i] = static_cast<std::int64_t>(v);
      break;
    case DataType::kU8:
      reinterpret_cast<std::uint8_t*>(b)[i] =
          static_cast<std::uint8_t>(static_cast<std::int64_t>(v));
      break;
  }
}

inline void fill_input(void* buf, std::uint64_t count, DataType t, ReduceOp op, int rank,
                       std::uint64_t first_index = 0) {
  for (std::uint64_t i = 0; i < count; ++i)
    store(buf, i, t, input_value(rank, first_index + i, op));
}

// The exact reduction of element i over ranks 0..n-1, then written in type t
// into `out` (avg: the exact sum divided once, in the type's own precision).
inline void reference_value(void* out, std::uint64_t i, DataType t, ReduceOp op, int n) {
  std::int64_t acc = input_value(0, i, op);
  for (int r = 1; r < n; ++r) {
    const std::int64_t v = input_value(r, i, op);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        acc += v;
        break;
      case ReduceOp::kProd:
        acc *= v;
        break;
      case ReduceOp::kMin:
        acc = v < acc ? v : acc;
        break;
      case ReduceOp::kMax:
        acc = v > acc ? v : acc;
        break;
    }
  }
  if (t == DataType::kU8) acc &= 0xff;  // u8 arithmetic wraps
  if (op != ReduceOp::kAvg) return store(out, 0, t, static_cast<double>(acc));
  switch (t) {
    case DataType::kF32:
    case DataType::kF16:
    case DataType::kBF16:
      return store(out, 0, t, static_cast<double>(static_cast<float>(acc) / static_cast<float>(n)));
    case DataType::kF64:
      return store(out, 0, t, static_cast<double>(acc) / n);
    default:
      return store(out, 0, t, static_cast<double>(acc / n));
  }
}

// Element i of rank r's output of the collective `s` over inputs from
// fill_input, into `out`.
inline void expected_output(void* out, const CollectiveShape& s, int r, std::uint64_t i, DataType t,
                            ReduceOp op) {
  switch (s.kind) {
    case CollectiveKind::kAllReduce:
      return reference_value(out, i, t, op, s.ranks);
    case CollectiveKind::kReduceScatter:  // rank r keeps block r of the reduced input
      return reference_value(out, s.count * r + i, t, op, s.ranks);
    case CollectiveKind::kAllGather:  // block j is rank j's input
      return store(out, 0, t, input_value(static_cast<int>(i / s.count), i % s.count, op));
    case CollectiveKind::kBroadcast:
      return store(out, 0, t, input_value(s.root, i, op));
  }
}

}  // namespace cclab::coll::test
