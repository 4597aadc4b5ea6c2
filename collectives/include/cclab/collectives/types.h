// Element types and reduction operators, with their names as printed and parsed
// by every cclab tool (the nccl-tests spellings).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace cclab::coll {

// f16 and bf16 are reduced by widening to f32 for each step and rounding the
// result back (round to nearest even), so a chain of k steps rounds k times.
enum class DataType : std::uint8_t { kF32, kF64, kF16, kBF16, kI32, kI64, kU8 };

// kAvg sums during the collective and divides by the rank count once, at the
// end; integer types divide with truncation toward zero.
enum class ReduceOp : std::uint8_t { kSum, kProd, kMin, kMax, kAvg };

std::size_t dtype_size(DataType t);
std::string_view dtype_name(DataType t);
std::string_view op_name(ReduceOp op);

// Parse a name ("f32", "bf16", "sum", ...); throws InvalidArgument naming
// `what` (the flag or field) and the allowed values.
DataType parse_dtype(std::string_view name, std::string_view what = "dtype");
ReduceOp parse_op(std::string_view name, std::string_view what = "op");

std::span<const DataType> all_dtypes();
std::span<const ReduceOp> all_ops();

// "f32, f64, ..." for error messages and --help.
std::string dtype_names();
std::string op_names();

}  // namespace cclab::coll
