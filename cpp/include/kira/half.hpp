// IEEE 754 half precision <-> float conversion (scalar, exact round-to-nearest-even),
// used for f16 storage on any CPU; the SIMD kernels use F16C instead.
#pragma once

#include <cstdint>
#include <cstring>

namespace kira {

inline float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ffu;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline std::uint16_t float_to_half(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) {  // inf or nan
    return static_cast<std::uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u));
  }
  if (absx >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // overflow
  if (absx < 0x38800000u) {  // subnormal half or zero
    if (absx < 0x33000000u) return sign;
    const std::uint32_t e = absx >> 23;
    const std::uint32_t m = (absx & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126 - e;  // 14..24
    std::uint32_t r = m >> shift;
    const std::uint32_t rem = m & ((1u << shift) - 1u);
    const std::uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return static_cast<std::uint16_t>(sign | r);
  }
  std::uint32_t r = ((absx >> 13) - ((127 - 15) << 10));
  const std::uint32_t rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return static_cast<std::uint16_t>(sign | r);
}

}  // namespace kira
