#include "check.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace cclab::bench {
namespace {

using coll::DataType;
using coll::ReduceOp;

template <class T>
void store(T value, std::byte* out) {
  std::memcpy(out, &value, sizeof(T));
}

// Rounds the quotient into a floating type; the integer types never get here.
void encode_float(float value, DataType t, std::byte* out) {
  switch (t) {
    case DataType::kF16:
      store(static_cast<_Float16>(value), out);
      break;
    case DataType::kBF16:
      store(float_to_bf16_bits(value), out);
      break;
    default:
      store(value, out);
      break;
  }
}

// `line` holds `pattern` repeated from element `phase` on, kPeriod * kLineRepeats elements,
// so each block of a buffer can be compared with one memcmp.
constexpr std::uint64_t kLineRepeats = 64;

std::vector<std::byte> make_line(const std::vector<std::byte>& pattern, std::uint64_t phase,
                                 std::size_t elem) {
  std::vector<std::byte> line(kPeriod * kLineRepeats * elem);
  for (std::uint64_t k = 0; k < kPeriod * kLineRepeats; ++k)
    std::memcpy(&line[k * elem], &pattern[((phase + k) % kPeriod) * elem], elem);
  return line;
}

}  // namespace

std::int64_t input_value(int rank, std::uint64_t i, ReduceOp op) {
  const auto r = static_cast<std::uint64_t>(rank);
  if (op == ReduceOp::kProd) return (r + i) % 4 == 0 ? 2 : 1;
  return static_cast<std::int64_t>((r * 7 + i * 3) % 5) + 1;
}

std::int64_t reduced_value(int ranks, std::uint64_t i, ReduceOp op) {
  std::int64_t acc = input_value(0, i, op);
  for (int r = 1; r < ranks; ++r) {
    const std::int64_t v = input_value(r, i, op);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        acc += v;
        break;
      // Unsigned multiply: wraps instead of overflowing for huge rank counts.
      case ReduceOp::kProd:
        acc = static_cast<std::int64_t>(static_cast<std::uint64_t>(acc) * v);
        break;
      case ReduceOp::kMin:
        acc = std::min(acc, v);
        break;
      case ReduceOp::kMax:
        acc = std::max(acc, v);
        break;
    }
  }
  return acc;
}

std::uint16_t float_to_bf16_bits(float f) {
  const auto bits = std::bit_cast<std::uint32_t>(f);
  // Add half an ulp of bf16, plus one when the kept part is odd (ties to even).
  return static_cast<std::uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

void encode_int(std::int64_t value, DataType t, std::byte* out) {
  switch (t) {
    case DataType::kF32:
      store(static_cast<float>(value), out);
      break;
    case DataType::kF64:
      store(static_cast<double>(value), out);
      break;
    case DataType::kF16:
      store(static_cast<_Float16>(static_cast<float>(value)), out);
      break;
    case DataType::kBF16:
      store(float_to_bf16_bits(static_cast<float>(value)), out);
      break;
    case DataType::kI32:
      store(static_cast<std::int32_t>(value), out);
      break;
    case DataType::kI64:
      store(value, out);
      break;
    case DataType::kU8:
      store(static_cast<std::uint8_t>(value), out);
      break;
  }
}

void encode_reduced(std::int64_t reduced, int ranks, ReduceOp op, DataType t, std::byte* out) {
  if (op != ReduceOp::kAvg) return encode_int(reduced, t, out);
  switch (t) {
    case DataType::kF64:
      store(static_cast<double>(reduced) / static_cast<double>(ranks), out);
      break;
    case DataType::kF32:
    case DataType::kF16:
    case DataType::kBF16:
      encode_float(static_cast<float>(reduced) / static_cast<float>(ranks), t, out);
      break;
    // The u8 collective sums mod 256 before it divides.
    case DataType::kU8:
      encode_int((reduced & 0xFF) / ranks, t, out);
      break;
    default:
      encode_int(reduced / ranks, t, out);
      break;
  }
}

std::uint64_t count_mismatches(const std::byte* a, const std::byte* b, std::uint64_t count,
                               std::size_t elem_bytes) {
  constexpr std::uint64_t kBlock = 1024;  // elements per memcmp
  std::uint64_t wrong = 0;
  for (std::uint64_t first = 0; first < count; first += kBlock) {
    const std::uint64_t n = std::min(kBlock, count - first);
    const std::size_t offset = first * elem_bytes;
    if (std::memcmp(a + offset, b + offset, n * elem_bytes) == 0) continue;
    for (std::uint64_t i = 0; i < n; ++i) {
      const std::size_t at = offset + i * elem_bytes;
      wrong += std::memcmp(a + at, b + at, elem_bytes) != 0 ? 1 : 0;
    }
  }
  return wrong;
}

Expectation::Expectation(int ranks, DataType t, ReduceOp op)
    : elem_bytes_(coll::dtype_size(t)),
      inputs_(static_cast<std::size_t>(ranks), std::vector<std::byte>(kPeriod * elem_bytes_)),
      reduced_(kPeriod * elem_bytes_) {
  for (std::uint64_t i = 0; i < kPeriod; ++i) {
    for (int r = 0; r < ranks; ++r)
      encode_int(input_value(r, i, op), t, &inputs_[r][i * elem_bytes_]);
    encode_reduced(reduced_value(ranks, i, op), ranks, op, t, &reduced_[i * elem_bytes_]);
  }
}

void Expectation::fill_input(int rank, std::byte* dst, std::uint64_t count) const {
  const auto line = make_line(inputs_[rank], 0, elem_bytes_);
  const std::uint64_t line_count = kPeriod * kLineRepeats;
  for (std::uint64_t first = 0; first < count; first += line_count)
    std::memcpy(dst + first * elem_bytes_, line.data(),
                std::min(line_count, count - first) * elem_bytes_);
}

std::uint64_t Expectation::pattern_mismatches(const std::byte* data, std::uint64_t count,
                                              const std::vector<std::byte>& pattern,
                                              std::uint64_t phase) const {
  const auto line = make_line(pattern, phase, elem_bytes_);
  const std::uint64_t line_count = kPeriod * kLineRepeats;
  std::uint64_t wrong = 0;
  for (std::uint64_t first = 0; first < count; first += line_count)
    wrong += count_mismatches(data + first * elem_bytes_, line.data(),
                              std::min(line_count, count - first), elem_bytes_);
  return wrong;
}

std::uint64_t Expectation::count_wrong(const coll::CollectiveShape& shape, int rank,
                                       const std::byte* out) const {
  const std::uint64_t n = shape.count;
  switch (shape.kind) {
    case coll::CollectiveKind::kAllReduce:
      return pattern_mismatches(out, n, reduced_, 0);
    // Rank r keeps block r of the reduced buffer: global element r*n + j.
    case coll::CollectiveKind::kReduceScatter:
      return pattern_mismatches(out, n, reduced_, (static_cast<std::uint64_t>(rank) * n) % kPeriod);
    // Block j of the output is rank j's input.
    case coll::CollectiveKind::kAllGather: {
      std::uint64_t wrong = 0;
      for (std::size_t j = 0; j < inputs_.size(); ++j)
        wrong += pattern_mismatches(out + j * n * elem_bytes_, n, inputs_[j], 0);
      return wrong;
    }
    case coll::CollectiveKind::kBroadcast:
      return pattern_mismatches(out, n, inputs_[shape.root], 0);
  }
  return 0;
}

}  // namespace cclab::bench
