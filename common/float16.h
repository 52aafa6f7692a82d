// IEEE 754 binary16 (float16) on the host, as raw bits: the conversions the CPU reference and
// the client share, with the same rounding the GPU's __float2half_rn uses (to nearest, ties to
// even; overflow to inf; NaN stays NaN). Portable C++: no compiler _Float16 support and no CUDA
// headers needed.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace gpupipe {

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

// One rounding from double (to nearest, ties to even), so DoubleToHalf(x) of a float x equals
// FloatToHalf(x) and the GPU's __float2half_rn(x), and a result computed in double rounds once.
// Any NaN gives the quiet NaN 0x7e00.
inline HalfBits DoubleToHalf(double v) {
  if (std::isnan(v)) return 0x7e00;
  const HalfBits sign = std::signbit(v) ? 0x8000 : 0;
  const double a = std::fabs(v);
  if (a >= 65520.0) return sign | 0x7c00;  // 65504 is the largest half; 65520 rounds to inf
  if (a < 6.103515625e-05) {               // below 2^-14: subnormal, in units of 2^-24
    const double q = std::nearbyint(a * 16777216.0);  // 1024 becomes the smallest normal
    return static_cast<HalfBits>(sign | static_cast<HalfBits>(q));
  }
  int e = 0;
  const double m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  double q = std::nearbyint(m * 2048.0);
  if (q == 2048.0) {
    q = 1024.0;
    ++e;
  }
  const int exp_field = e - 1 + 15;
  if (exp_field >= 31) return sign | 0x7c00;
  return static_cast<HalfBits>(sign | (exp_field << 10) | (static_cast<int>(q) - 1024));
}

}  // namespace gpupipe
