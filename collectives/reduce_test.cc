#include "cclab/collectives/reduce.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "cclab/collectives/half.h"
#include "reduce_detail.h"

namespace cclab::coll {
namespace {

TEST(Reduce, FloatOpsMatchPlainArithmetic) {
  // Odd length so the vector loop's tail runs too.
  std::vector<float> a(1003), b(1003), d(1003);
  for (int i = 0; i < 1003; ++i) a[i] = 0.5f * i - 100, b[i] = 3.0f - 0.25f * i;
  for (auto op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax}) {
    reduce(d.data(), a.data(), b.data(), d.size(), DataType::kF32, op);
    for (int i = 0; i < 1003; ++i) {
      const float want = op == ReduceOp::kSum    ? a[i] + b[i]
                         : op == ReduceOp::kProd ? a[i] * b[i]
                         : op == ReduceOp::kMin  ? std::fmin(a[i], b[i])
                                                 : std::fmax(a[i], b[i]);
      ASSERT_EQ(d[i], want) << op_name(op) << " at " << i;
    }
  }
}

TEST(Reduce, InPlaceAliasingIsAllowed) {
  std::vector<std::int64_t> a{1, 2, 3}, b{10, 20, 30};
  reduce(a.data(), a.data(), b.data(), 3, DataType::kI64, ReduceOp::kSum);
  EXPECT_EQ(a, (std::vector<std::int64_t>{11, 22, 33}));
}

TEST(Reduce, U8Wraps) {
  std::uint8_t a = 200, b = 100, d = 0;
  reduce(&d, &a, &b, 1, DataType::kU8, ReduceOp::kSum);
  EXPECT_EQ(d, 44);  // 300 mod 256
}

TEST(Reduce, HalfTypesAccumulateInFloatAndRoundBack) {
  // 2048 + 1 is not representable in f16 (11-bit significand): round to even
  // gives 2048; 2048 + 3 rounds to 2052.
  const std::uint16_t big = float_to_f16(2048.f), one = float_to_f16(1.f),
                      three = float_to_f16(3.f);
  std::uint16_t d;
  reduce(&d, &big, &one, 1, DataType::kF16, ReduceOp::kSum);
  EXPECT_EQ(f16_to_float(d), 2048.f);
  reduce(&d, &big, &three, 1, DataType::kF16, ReduceOp::kSum);
  EXPECT_EQ(f16_to_float(d), 2052.f);
  // bf16 keeps 8 significant bits: 256 + 1 -> 256 (tie to even), 256 + 3 -> 260.
  const std::uint16_t b256 = float_to_bf16(256.f), b1 = float_to_bf16(1.f), b3 = float_to_bf16(3.f);
  reduce(&d, &b256, &b1, 1, DataType::kBF16, ReduceOp::kSum);
  EXPECT_EQ(bf16_to_float(d), 256.f);
  reduce(&d, &b256, &b3, 1, DataType::kBF16, ReduceOp::kSum);
  EXPECT_EQ(bf16_to_float(d), 260.f);
}

// Every 16-bit pattern as a, a scrambled one as b (NaNs, infinities,
// subnormals, overflow, ties), plus a tail shorter than a vector: the result of
// each element must be the one half.h's scalar conversions give (in this file
// compiled for the baseline ISA: the compiler's software conversions, not the
// AVX2/F16C set's intrinsics; the baseline set shares these conversions, so
// for it the test checks its loops and NaN handling), bit for bit; where it is NaN, a quiet NaN
// (which operand's payload an operation on two NaNs keeps is the compiler's choice).
struct HalfType {
  DataType t;
  float (*load)(std::uint16_t);
  std::uint16_t (*store)(float);
};
const HalfType kHalfTypes[] = {{DataType::kF16, f16_to_float, float_to_f16},
                               {DataType::kBF16, bf16_to_float, float_to_bf16}};

::testing::AssertionResult same_half(const HalfType& h, std::uint16_t got, std::uint16_t want) {
  const std::uint16_t quiet = h.t == DataType::kF16 ? 0x7e00 : 0x7fc0;
  const bool ok = std::isnan(h.load(want)) ? (got & quiet) == quiet : got == want;
  if (ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << got << ", want " << want;
}

std::vector<std::uint16_t> every_pattern(std::uint32_t scramble) {
  std::vector<std::uint16_t> v(65536 + 5);
  for (std::uint32_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<std::uint16_t>((i % 65536) * scramble + 12345 * (scramble != 1));
  return v;
}

// Every kernel set this CPU can run (reduce() uses the last), so the baseline
// kernels are checked here too.
const std::vector<detail::ReduceKernels>& kernel_sets() {
  static const auto sets = detail::reduce_kernel_sets();
  return sets;
}

TEST(Reduce, KernelSetsAreTheBaselineAndWhatTheCpuHas) {
  ASSERT_FALSE(kernel_sets().empty());
  EXPECT_EQ(kernel_sets().front().name, "baseline");
#if defined(__x86_64__)
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  EXPECT_EQ(kernel_sets().size(), avx2 ? 2u : 1u);
#endif
}

TEST(Reduce, HalfTypesMatchTheScalarDefinitionForEveryPattern) {
  const auto a = every_pattern(1), b = every_pattern(40503);
  std::vector<std::uint16_t> d(a.size());
  for (const auto& k : kernel_sets()) {
    for (const auto& h : kHalfTypes) {
      for (auto op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax}) {
        k.reduce(d.data(), a.data(), b.data(), d.size(), h.t, op);
        for (std::size_t i = 0; i < d.size(); ++i) {
          const float p = h.load(a[i]), q = h.load(b[i]);
          const float r = op == ReduceOp::kSum    ? p + q
                          : op == ReduceOp::kProd ? p * q
                          : op == ReduceOp::kMin  ? (q < p ? q : p)
                                                  : (p < q ? q : p);
          ASSERT_TRUE(same_half(h, d[i], h.store(r)))
              << k.name << " " << dtype_name(h.t) << " " << op_name(op) << " at " << i << ": "
              << a[i] << ", " << b[i] << " (a, b)";
        }
      }
    }
  }
}

TEST(Reduce, HalfTypesReduceInPlaceOnTheVectorPath) {
  for (const auto& k : kernel_sets()) {
    for (const auto& h : kHalfTypes) {
      std::vector<std::uint16_t> a(37), b(37);
      for (int i = 0; i < 37; ++i) a[i] = h.store(0.5f * i), b[i] = h.store(100.f - i);
      const auto before = a;
      k.reduce(a.data(), a.data(), b.data(), a.size(), h.t, ReduceOp::kSum);
      for (int i = 0; i < 37; ++i)
        ASSERT_EQ(a[i], h.store(h.load(before[i]) + h.load(b[i])))
            << k.name << " " << dtype_name(h.t) << " at " << i;
    }
  }
}

TEST(Reduce, HalfTypesAverageLikeTheScalarDefinition) {
  for (const auto& k : kernel_sets()) {
    for (const auto& h : kHalfTypes) {
      for (int divisor : {3, 7}) {
        auto v = every_pattern(1);
        const auto before = v;
        k.divide(v.data(), v.size(), h.t, divisor);
        for (std::size_t i = 0; i < v.size(); ++i) {
          ASSERT_TRUE(same_half(h, v[i], h.store(h.load(before[i]) / static_cast<float>(divisor))))
              << k.name << " " << dtype_name(h.t) << " / " << divisor << " at " << i;
        }
      }
    }
  }
}

TEST(Reduce, AvgDividesOnceAndIntegersTruncate) {
  std::vector<float> f{7.f, 8.f};
  finalize_avg(f.data(), 2, DataType::kF32, 3);
  EXPECT_EQ(f[0], 7.f / 3.f);
  std::vector<std::int32_t> i{7, -7};
  finalize_avg(i.data(), 2, DataType::kI32, 2);
  EXPECT_EQ(i[0], 3);
  EXPECT_EQ(i[1], -3);
}

TEST(Reduce, AvgOfU8OverMoreRanksThanItsRangeTruncatesToZero) {
  for (const auto& k : kernel_sets()) {
    std::vector<std::uint8_t> v{255, 200, 7};
    k.divide(v.data(), v.size(), DataType::kU8, 256);  // was a division by zero
    EXPECT_EQ(v, (std::vector<std::uint8_t>{0, 0, 0})) << k.name;
    v = {255, 200, 7};
    k.divide(v.data(), v.size(), DataType::kU8, 100);
    EXPECT_EQ(v, (std::vector<std::uint8_t>{2, 2, 0})) << k.name;
  }
  std::vector<std::uint8_t> v{255};
  finalize_avg(v.data(), v.size(), DataType::kU8, 256);  // and through the dispatcher
  EXPECT_EQ(v[0], 0);
}

}  // namespace
}  // namespace cclab::coll
