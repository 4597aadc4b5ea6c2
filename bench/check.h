// Correctness check of `cclab bench`, after nccl-tests: inputs are small
// integers chosen so that every reduction is exact in every type, and the
// expected outputs are derived serially here (int64 arithmetic over the same
// formula, one rounding into the type), independently of the collective.
//
// Element i of rank r's input is ((r*7 + i*3) % 5) + 1, in 1..5, for sum, avg,
// min and max, and ((r + i) % 4 == 0) ? 2 : 1 for prod. Why these are exact:
// every partial sum is at most 5n, an integer that bf16 (8 significant bits)
// holds up to n = 51 ranks and f16 (11 bits) up to n = 409; a product is 2^k
// with k <= ceil(n/4), finite in f16 up to n = 60. u8 sums and products wrap
// mod 256, as the collective's do. avg is the exact sum divided once: in the
// type for f32/f64, as a float rounded to the type for f16/bf16, truncating
// for integers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cclab/collectives/schedule.h"
#include "cclab/collectives/types.h"

namespace cclab::bench {

// Both formulas repeat in i (period 5 and 4), so every expected buffer is a
// repetition of a kPeriod-element pattern.
inline constexpr std::uint64_t kPeriod = 20;

// Element i of rank r's input.
std::int64_t input_value(int rank, std::uint64_t i, coll::ReduceOp op);

// The reduction over ranks 0..ranks-1 of input_value(r, i, op), as int64
// (before avg's division; u8 wrapping is applied by encode_reduced).
std::int64_t reduced_value(int ranks, std::uint64_t i, coll::ReduceOp op);

// Writes an integer as one element of type t (exact for the values above;
// integer types keep the low bits, so u8 wraps mod 256).
void encode_int(std::int64_t value, coll::DataType t, std::byte* out);
// Writes the expected result of reducing to `reduced` (avg divides by ranks).
void encode_reduced(std::int64_t reduced, int ranks, coll::ReduceOp op, coll::DataType t,
                    std::byte* out);
// bf16 bits of f, rounded to nearest even.
std::uint16_t float_to_bf16_bits(float f);

// Number of elements (elem_bytes each) in which a and b differ bitwise.
std::uint64_t count_mismatches(const std::byte* a, const std::byte* b, std::uint64_t count,
                               std::size_t elem_bytes);

// The expected inputs and outputs of every rank for one (ranks, type, op).
class Expectation {
 public:
  Expectation(int ranks, coll::DataType t, coll::ReduceOp op);

  // Writes elements [0, count) of `rank`'s input.
  void fill_input(int rank, std::byte* dst, std::uint64_t count) const;
  // Elements of `rank`'s output for `shape` that differ from the expected.
  std::uint64_t count_wrong(const coll::CollectiveShape& shape, int rank,
                            const std::byte* out) const;

 private:
  // Elements of `data` that differ from `pattern` repeated from element `phase` on.
  std::uint64_t pattern_mismatches(const std::byte* data, std::uint64_t count,
                                   const std::vector<std::byte>& pattern,
                                   std::uint64_t phase) const;

  std::size_t elem_bytes_;
  std::vector<std::vector<std::byte>> inputs_;  // per rank, kPeriod elements
  std::vector<std::byte> reduced_;              // kPeriod elements
};

}  // namespace cclab::bench
