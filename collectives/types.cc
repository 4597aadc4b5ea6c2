#include "cclab/collectives/types.h"

#include <array>

#include <fmt/format.h>

#include "cclab/collectives/error.h"

namespace cclab::coll {
namespace {

constexpr std::array kDtypes = {DataType::kF32, DataType::kF64, DataType::kF16, DataType::kBF16,
                                DataType::kI32, DataType::kI64, DataType::kU8};
constexpr std::array kOps = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                             ReduceOp::kAvg};

}  // namespace

std::size_t dtype_size(DataType t) {
  switch (t) {
    case DataType::kF32:
      return 4;
    case DataType::kF64:
      return 8;
    case DataType::kF16:
      return 2;
    case DataType::kBF16:
      return 2;
    case DataType::kI32:
      return 4;
    case DataType::kI64:
      return 8;
    case DataType::kU8:
      return 1;
  }
  return 0;
}

std::string_view dtype_name(DataType t) {
  switch (t) {
    case DataType::kF32:
      return "f32";
    case DataType::kF64:
      return "f64";
    case DataType::kF16:
      return "f16";
    case DataType::kBF16:
      return "bf16";
    case DataType::kI32:
      return "i32";
    case DataType::kI64:
      return "i64";
    case DataType::kU8:
      return "u8";
  }
  return "?";
}

std::string_view op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kProd:
      return "prod";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kAvg:
      return "avg";
  }
  return "?";
}

std::span<const DataType> all_dtypes() { return kDtypes; }
std::span<const ReduceOp> all_ops() { return kOps; }

std::string dtype_names() {
  std::string s;
  for (auto t : kDtypes) s += fmt::format("{}{}", s.empty() ? "" : ", ", dtype_name(t));
  return s;
}

std::string op_names() {
  std::string s;
  for (auto op : kOps) s += fmt::format("{}{}", s.empty() ? "" : ", ", op_name(op));
  return s;
}

DataType parse_dtype(std::string_view name, std::string_view what) {
  for (auto t : kDtypes)
    if (dtype_name(t) == name) return t;
  throw InvalidArgument(
      fmt::format("{}: unknown data type '{}' (allowed: {})", what, name, dtype_names()));
}

ReduceOp parse_op(std::string_view name, std::string_view what) {
  for (auto op : kOps)
    if (op_name(op) == name) return op;
  throw InvalidArgument(
      fmt::format("{}: unknown reduction '{}' (allowed: {})", what, name, op_names()));
}

}  // namespace cclab::coll
