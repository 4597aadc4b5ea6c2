#include "cclab/collectives/reduce.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "cclab/collectives/half.h"

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

TEST(Reduce, AvgDividesOnceAndIntegersTruncate) {
  std::vector<float> f{7.f, 8.f};
  finalize_avg(f.data(), 2, DataType::kF32, 3);
  EXPECT_EQ(f[0], 7.f / 3.f);
  std::vector<std::int32_t> i{7, -7};
  finalize_avg(i.data(), 2, DataType::kI32, 2);
  EXPECT_EQ(i[0], 3);
  EXPECT_EQ(i[1], -3);
}

}  // namespace
}  // namespace cclab::coll
