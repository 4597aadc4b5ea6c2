// Conversions for the 16-bit float types. f16 uses the compiler's _Float16
// (IEEE binary16); bf16 is the upper half of an f32, rounded to nearest even.
#pragma once

#include <bit>
#include <cstdint>

namespace cclab::coll {

inline float f16_to_float(std::uint16_t h) {
  return static_cast<float>(std::bit_cast<_Float16>(h));
}
inline std::uint16_t float_to_f16(float f) {
  return std::bit_cast<std::uint16_t>(static_cast<_Float16>(f));
}

inline float bf16_to_float(std::uint16_t h) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}
inline std::uint16_t float_to_bf16(float f) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return static_cast<std::uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);                        // round to nearest, ties to even
  return static_cast<std::uint16_t>(u >> 16);
}

}  // namespace cclab::coll
