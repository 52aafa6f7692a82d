// The histogram bin of a float32 or float16 value in float arithmetic: how the CUDA kernel
// places such values, with the result of HistogramBin (histogram_bin.h, double arithmetic)
// for every value. Host and device, so that the CPU tests check the float placement against
// HistogramBin value by value.
//
// Both float paths estimate e = (x - lo) * bins / (hi - lo) in float and look the estimate's
// bin up in a table of edge pairs: edges[i] = (the least float >= edge i, the least float >=
// edge i + 1), +inf for the last bin's upper edge, where edge i is HistogramBin's double edge.
// A float x satisfies edge i <= x < edge i + 1 exactly when edges[i].lo <= x < edges[i].hi.
//
// kAdjacent, for ranges with max(|lo|, |hi|) * bins / (hi - lo) <= 2^20: the estimate is within
// one bin of the answer, so the pair of the estimated bin alone decides it, without a branch.
//   Why: with A = max(|lo|, |hi|), S = bins / (hi - lo) and u = 2^-24, x - lo rounded in float
//   (from lo rounded to float) is off by at most 3uA, and the two float roundings of the
//   product (and of S) add at most 2u * bins <= 4uAS (bins <= 2AS since hi - lo <= 2A); the
//   estimate is thus within 7uAS <= 7/16 of a bin of (x - lo) * S. HistogramBin's double edges
//   are within a few ulp of the exact lo + i (hi - lo) / bins, far below a bin, so the floor
//   of the estimate is the answer j, or j - 1 or j + 1; clamped to [0, bins - 1] it stays so.
//   If it is j + 1, x < edge j + 1, so x < edges[j + 1].lo and one down gives j; if j - 1,
//   x >= edge j, so x >= edges[j - 1].hi and one up gives j; the double edges increase
//   strictly (a bin is wider than 2^-20 A, far above an ulp of A), so never both.
// kChecked, for ranges up to max(|lo|, |hi|) * bins / (hi - lo) <= 2^40: the estimate is accepted
//   when its pair brackets x, and HistogramBin decides the rare rest (values within float
//   rounding of an edge). Both agree: the double estimate is within a tiny fraction of a bin of
//   the exact one, so HistogramBin's one-step correction lands in the unique bin whose edges
//   bracket x, the bin the test accepted.
// kPow2, for ranges whose bin width is a power of two 2^-m and whose lo is a whole number k of
//   widths (256 bins over [0, 1), 256 over [0, 256), 64 over [-2, 2), ...), with |k| + bins <=
//   2^21: every edge (k + i) 2^-m is a double and a float, HistogramBin's edges are exactly
//   those, and x * 2^m is exact in float for every float x in [lo, hi] (short of underflow), so
//   floor(x * 2^m) - k is the bin without any table: no estimate, no correction. Taken before
//   the two paths above whenever it applies.
// kDouble: HistogramBin for every value (wider ranges, other input types).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/common/histogram_bin.h"

namespace gpupipe::kernels {

enum class FloatBinPath : int32_t { kDouble = 0, kChecked = 1, kAdjacent = 2, kPow2 = 3 };

// The limits on max(|lo|, |hi|) * bins / (hi - lo) for each float path (see above), and on
// max(|lo|, |hi|), which keeps lo and hi far inside float's range.
inline constexpr double kAdjacentMaxSpan = 1048576.0;          // 2^20
inline constexpr double kCheckedMaxSpan = 1099511627776.0;     // 2^40
inline constexpr double kFloatBinMaxAbs = 1.8446744073709552e19;  // 2^64
// And on bins / (hi - lo), which the float paths multiply by in float: narrower bins (a range
// of a few floats' spacing near zero, say) would make it infinite there.
inline constexpr double kFloatBinMaxScale = 1.7014118346046923e38;  // 2^127
// kPow2: |k| + bins at most 2^21 keeps every k + i, and x * 2^m for x in [lo, hi], well inside
// (-2^22, 2^22), where the floor below is exact; the width's exponent stays far from float's
// limits, so lo, hi and 2^m are normal floats.
inline constexpr double kPow2MaxIndex = 2097152.0;  // 2^21
inline constexpr int kPow2MaxExponent = 100;

struct FloatBinning {
  FloatBinPath path;
  float lo;      // lo rounded to nearest: the estimate's origin
  float scale;   // bins / (hi - lo) rounded to nearest
  float last;    // bins - 1
  float min_in;  // the least float >= lo: x >= lo exactly when x >= min_in
  float max_in;  // the greatest float <= hi: x <= hi exactly when x <= max_in
  // kPow2: scale is 2^m exactly; the bin is the floor's float bits minus pow2_bias (see
  // Pow2FloatBin), which folds in k = lo * 2^m.
  int32_t pow2_bias;
};

// One bin's edges rounded up to float; 8-byte aligned so that the device reads it in one load.
struct alignas(8) FloatEdgePair {
  float lo;
  float hi;
};

namespace detail {
// The least float >= d, for |d| far inside float's range.
GPUPIPE_HISTOGRAM_HD inline float FloatAtLeast(double d) {
#if defined(__CUDA_ARCH__)
  return __double2float_ru(d);
#else
  const float r = static_cast<float>(d);
  return static_cast<double>(r) < d ? std::nextafter(r, INFINITY) : r;
#endif
}
// The greatest float <= d, host only (planning).
inline float FloatAtMost(double d) {
  const float r = static_cast<float>(d);
  return static_cast<double>(r) > d ? std::nextafter(r, -INFINITY) : r;
}
// The float bits of 1.5 * 2^23: a float in [2^23, 2^24) holds the integer it equals, plus 2^23,
// in its low mantissa bits, so adding 1.5 * 2^23 rounding down to e in (-2^22, 2^22) leaves
// floor(e) + 0x4B400000 in the sum's bits.
inline constexpr int32_t kFloorBias = 0x4B400000;
// floor(e) for 0 <= e < 2^23. On the device by adding 2^23 rounding down, which leaves the
// integer in the low mantissa bits: cheaper than the conversion unit.
GPUPIPE_HISTOGRAM_HD inline int32_t FloorSmall(float e) {
#if defined(__CUDA_ARCH__)
  return __float_as_int(__fadd_rd(e, 8388608.0f)) - 0x4B000000;
#else
  return static_cast<int32_t>(std::floor(e));
#endif
}
// Whether the range takes kPow2 (see the top): the width is 2^-m, lo = k 2^-m and hi = (k +
// bins) 2^-m exactly, within the limits above. Sets *k.
inline bool IsPow2Binning(const HistogramBinning& b, int32_t* k) {
  int exp = 0;
  if (!(std::frexp(b.step, &exp) == 0.5) || std::abs(exp - 1) > kPow2MaxExponent) return false;
  const int m = 1 - exp;                          // step = 2^-m
  const double lo_index = std::ldexp(b.lo, m);    // exact: a scaling by a power of two
  if (lo_index != std::floor(lo_index) || std::fabs(lo_index) + b.bins > kPow2MaxIndex ||
      std::ldexp(lo_index + b.bins, -m) != b.hi) {
    return false;
  }
  *k = static_cast<int32_t>(lo_index);
  return true;
}
}  // namespace detail

// Which float path a range takes, and its parameters. float_input: float32 or float16 values.
inline FloatBinning PlanFloatBinning(const HistogramBinning& b, bool float_input) {
  FloatBinning f{};
  const double abs_max = std::max(std::fabs(b.lo), std::fabs(b.hi));
  const double span = abs_max * b.scale;
  int32_t k = 0;
  f.path = !float_input ? FloatBinPath::kDouble
           : detail::IsPow2Binning(b, &k) ? FloatBinPath::kPow2
           : abs_max > kFloatBinMaxAbs || !(span <= kCheckedMaxSpan) ||
                   !(b.scale <= kFloatBinMaxScale)
               ? FloatBinPath::kDouble
           : span <= kAdjacentMaxSpan ? FloatBinPath::kAdjacent
                                      : FloatBinPath::kChecked;
  if (f.path == FloatBinPath::kDouble) return f;
  f.pow2_bias = f.path == FloatBinPath::kPow2 ? detail::kFloorBias + k : 0;
  f.lo = static_cast<float>(b.lo);
  f.scale = static_cast<float>(b.scale);
  f.last = static_cast<float>(b.bins - 1);
  f.min_in = detail::FloatAtLeast(b.lo);
  f.max_in = detail::FloatAtMost(b.hi);
  return f;
}

// The edge pair of bin i (0 <= i < bins) for the table both float paths read.
GPUPIPE_HISTOGRAM_HD inline FloatEdgePair MakeFloatEdgePair(int32_t i, const HistogramBinning& b) {
  const float lo = detail::FloatAtLeast(detail::MulAddNoFma(static_cast<double>(i), b.step, b.lo));
  const float hi =
      i + 1 < b.bins
          ? detail::FloatAtLeast(detail::MulAddNoFma(static_cast<double>(i + 1), b.step, b.lo))
          : INFINITY;
  return {lo, hi};
}

// The estimated bin of x, clamped to [0, bins - 1] so that it always indexes the table (NaN
// and values below lo give 0, values above hi bins - 1).
GPUPIPE_HISTOGRAM_HD inline int32_t FloatBinEstimate(float x, const FloatBinning& f) {
  return detail::FloorSmall(fminf(fmaxf((x - f.lo) * f.scale, 0.0f), f.last));
}

// kAdjacent: the bin of x, or `outside` when x is outside [lo, hi] or NaN. No branch: x is
// clamped into [min_in, max_in] first (NaN to min_in), which places the values inside as they
// are and keeps every estimate inside the table; x is inside exactly when the clamp left it.
GPUPIPE_HISTOGRAM_HD inline int32_t AdjacentFloatBin(float x, const FloatBinning& f,
                                                     const FloatEdgePair* edges,
                                                     int32_t outside) {
  const float c = fminf(fmaxf(x, f.min_in), f.max_in);
  const int32_t i = detail::FloorSmall(fminf((c - f.lo) * f.scale, f.last));
  const FloatEdgePair e = edges[i];
  const int32_t bin = i - (c < e.lo ? 1 : 0) + (c >= e.hi ? 1 : 0);
  return c == x ? bin : outside;
}

// kPow2: the bin of x, or `outside` when x is outside [lo, hi] or NaN; `last` is bins - 1. No
// branch, no table: x is clamped into [lo, hi] (NaN to lo; lo and hi are floats here), scaled
// by 2^m (exact for every float in range; rounded down, so that a product that underflows
// still floors to the right integer), floored (kFloorBias) and shifted by k; x == hi lands one
// past the last bin and is moved into it.
GPUPIPE_HISTOGRAM_HD inline int32_t Pow2FloatBin(float x, const FloatBinning& f, int32_t last,
                                                 int32_t outside) {
  const float c = fminf(fmaxf(x, f.min_in), f.max_in);
#if defined(__CUDA_ARCH__)
  const int32_t i = __float_as_int(__fadd_rd(__fmul_rd(c, f.scale), 12582912.0f)) - f.pow2_bias;
#else
  // The exact product in double, floored: what the device's rounded-down float product floors to.
  const int32_t i = static_cast<int32_t>(std::floor(static_cast<double>(c) * f.scale)) -
                    (f.pow2_bias - detail::kFloorBias);
#endif
  const int32_t bin = i < last ? i : last;
  return c == x ? bin : outside;
}

}  // namespace gpupipe::kernels
