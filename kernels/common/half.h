// IEEE 754 binary16 (float16) on the host, as raw bits: the CPU reference's conversions, with
// the same rounding the GPU's __float2half_rn uses (to nearest, ties to even; overflow to inf;
// NaN stays NaN). Portable C++: no compiler _Float16 support and no CUDA headers needed.
#pragma once

#include <cstdint>
#include <cstring>

namespace gpupipe::kernels {

// The bits of a float16 value (what the device's __half holds).
using HalfBits = uint16_t;

inline float HalfToFloat(HalfBits h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf or NaN (payload kept)
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);  // 112 = 127 - 15
  } else if (mant == 0) {
    bits = sign;  // signed zero
  } else {
    // Subnormal: value = mant * 2^-24; normalize.
    int e = -1;
    do {
      mant <<= 1;
      ++e;
    } while ((mant & 0x400u) == 0);
    bits = sign | (static_cast<uint32_t>(112 - e) << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline HalfBits FloatToHalf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN
    return static_cast<HalfBits>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<HalfBits>(sign | 0x7c00u);  // rounds to inf
  if (abs < 0x38800000u) {
    // Below the smallest normal half (2^-14): subnormal or zero. The result is
    // round(|f| * 2^24) with ties to even.
    if (abs < 0x33000000u) return static_cast<HalfBits>(sign);  // < 2^-25: rounds to 0
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    // |f| = mant * 2^(exp - 150), so in units of 2^-24 it is mant >> (126 - exp), 14..24.
    const uint32_t shift = 126u - exp;
    uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return static_cast<HalfBits>(sign | q);
  }
  // Normal: rebias the exponent and round the mantissa from 23 to 10 bits.
  uint32_t h = ((abs - 0x38000000u) >> 13);  // 0x38000000 = 112 << 23
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry may reach inf: correct
  return static_cast<HalfBits>(sign | h);
}

}  // namespace gpupipe::kernels
