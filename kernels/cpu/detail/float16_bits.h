// IEEE binary16 <-> float/double on the host, for the CPU references of ops that take float16
// (stored as uint16_t bit patterns, so no compiler half type is needed). Round to nearest even,
// subnormals, infinities and NaN (canonical quiet NaN 0x7e00) handled.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace gpupipe::kernels::cpu::f16bits {

inline float ToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t bits = 0;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {
    const float f = std::ldexp(static_cast<float>(mant), -24);  // subnormal: mant * 2^-24
    return sign != 0 ? -f : f;
  }
  float f = 0;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// One rounding from double, so FromDouble(x) of a float x equals the GPU's __float2half_rn(x).
inline uint16_t FromDouble(double v) {
  if (std::isnan(v)) return 0x7e00;
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const double a = std::fabs(v);
  if (a >= 65520.0) return sign | 0x7c00;  // 65504 is the largest half; 65520 rounds to inf
  if (a < 6.103515625e-05) {               // below 2^-14: subnormal, in units of 2^-24
    const double q = std::nearbyint(a * 16777216.0);  // 1024 becomes the smallest normal
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(q));
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
  return static_cast<uint16_t>(sign | (exp_field << 10) | (static_cast<int>(q) - 1024));
}

}  // namespace gpupipe::kernels::cpu::f16bits
