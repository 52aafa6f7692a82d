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
// kDouble: HistogramBin for every value (wider ranges, other input types).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/common/histogram_bin.h"

namespace gpupipe::kernels {

enum class FloatBinPath : int32_t { kDouble = 0, kChecked = 1, kAdjacent = 2 };

// The limits on max(|lo|, |hi|) * bins / (hi - lo) for each float path (see above), and on
// max(|lo|, |hi|), which keeps lo and hi far inside float's range.
inline constexpr double kAdjacentMaxSpan = 1048576.0;          // 2^20
inline constexpr double kCheckedMaxSpan = 1099511627776.0;     // 2^40
inline constexpr double kFloatBinMaxAbs = 1.8446744073709552e19;  // 2^64

struct FloatBinning {
  FloatBinPath path;
  float lo;      // lo rounded to nearest: the estimate's origin
  float scale;   // bins / (hi - lo) rounded to nearest
  float last;    // bins - 1
  float min_in;  // the least float >= lo: x >= lo exactly when x >= min_in
  float max_in;  // the greatest float <= hi: x <= hi exactly when x <= max_in
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
// floor(e) for 0 <= e < 2^23. On the device by adding 2^23 rounding down, which leaves the
// integer in the low mantissa bits: cheaper than the conversion unit.
GPUPIPE_HISTOGRAM_HD inline int32_t FloorSmall(float e) {
#if defined(__CUDA_ARCH__)
  return __float_as_int(__fadd_rd(e, 8388608.0f)) - 0x4B000000;
#else
  return static_cast<int32_t>(std::floor(e));
#endif
}
}  // namespace detail

// Which float path a range takes, and its parameters. float_input: float32 or float16 values.
inline FloatBinning PlanFloatBinning(const HistogramBinning& b, bool float_input) {
  FloatBinning f{};
  const double abs_max = std::max(std::fabs(b.lo), std::fabs(b.hi));
  const double span = abs_max * b.scale;
  f.path = !float_input || abs_max > kFloatBinMaxAbs || !(span <= kCheckedMaxSpan)
               ? FloatBinPath::kDouble
           : span <= kAdjacentMaxSpan ? FloatBinPath::kAdjacent
                                      : FloatBinPath::kChecked;
  if (f.path == FloatBinPath::kDouble) return f;
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

// kAdjacent: the bin of x, or `outside` when x is outside [lo, hi] or NaN. No branch.
GPUPIPE_HISTOGRAM_HD inline int32_t AdjacentFloatBin(float x, const FloatBinning& f,
                                                     const FloatEdgePair* edges,
                                                     int32_t outside) {
  const int32_t i = FloatBinEstimate(x, f);
  const FloatEdgePair e = edges[i];
  const int32_t bin = i - (x < e.lo ? 1 : 0) + (x >= e.hi ? 1 : 0);
  return x >= f.min_in && x <= f.max_in ? bin : outside;
}

}  // namespace gpupipe::kernels
