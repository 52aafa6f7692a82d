// The bin of a value in np.histogram(x, bins, range=(lo, hi)) with equal-width bins: shared
// by the CPU reference and the CUDA kernel so that both place every value identically.
//
// What this matches. NumPy (numpy/lib/_histograms_impl.py, the uniform-bins fast path) keeps
// lo <= x <= hi (NaN fails both), estimates f = (x - lo) / (hi - lo) * bins, truncates it,
// moves x == hi into the last bin, and then corrects the estimate against the bin edges
// edges = np.linspace(lo, hi, bins + 1), i.e. edge[i] = i * step + lo with
// step = (hi - lo) / bins and edge[bins] = hi: one bin down if x < edge[i], one bin up if
// x >= edge[i + 1] and i is not the last bin. The result is therefore defined by the edges
// (edge[i] <= x < edge[i + 1], the last bin closed) and not by the rounding of the estimate;
// we estimate with a multiplication by bins / (hi - lo) instead of NumPy's division, which
// moves the estimate by at most one bin and so gives the same corrected result.
// Everything is computed in double on the value converted to double exactly (int32, float16
// and float32 convert exactly), without fused multiply-adds, so the edges are NumPy's float64
// edges bit for bit. This equals NumPy for float64 and int32 input; for float32 and float16
// input it equals np.histogram(x.astype(np.float64), ...) — NumPy itself would use edges
// rounded to the input's precision, which can move a value within one float32 ulp of an edge
// into the neighbouring bin.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define GPUPIPE_HISTOGRAM_HD __host__ __device__
#else
#define GPUPIPE_HISTOGRAM_HD
#endif

namespace gpupipe::kernels {

struct HistogramBinning {
  double lo;
  double hi;
  double scale;  // bins / (hi - lo)
  double step;   // (hi - lo) / bins, as np.linspace computes it
  double last;   // bins - 1
  int32_t bins;

  static HistogramBinning Make(int32_t bins, double lo, double hi) {
    return {lo, hi, bins / (hi - lo), (hi - lo) / bins, static_cast<double>(bins - 1), bins};
  }
};

namespace detail {
// a * b + c rounded twice (never fused), on host and device alike.
GPUPIPE_HISTOGRAM_HD inline double MulAddNoFma(double a, double b, double c) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(__dmul_rn(a, b), c);
#else
  volatile double product = a * b;  // volatile: no contraction into an fma
  return product + c;
#endif
}
GPUPIPE_HISTOGRAM_HD inline double SubNoFma(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}
GPUPIPE_HISTOGRAM_HD inline double MulNoFma(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
}  // namespace detail

// The bin of x in [0, bins), or -1 when x is outside [lo, hi] or NaN.
GPUPIPE_HISTOGRAM_HD inline int32_t HistogramBin(double x, const HistogramBinning& b) {
  if (!(x >= b.lo && x <= b.hi)) return -1;
  // 0 <= f <= bins * (1 + a few ulp): the estimate, truncated as NumPy's astype(intp) does.
  const double f = detail::MulNoFma(detail::SubNoFma(x, b.lo), b.scale);
  int32_t i;
  double di;  // i as a double
#if defined(__CUDA_ARCH__)
  // floor(f) and its double without the 64-bit conversion instructions (a quarter of the
  // double-precision add rate on sm_90): adding 1.5 * 2^52 rounds f to an integer held in the
  // low word, subtracting it back gives that integer exactly; one step down if it rounded up.
  // Exact for 0 <= f < 2^31, so the same bin as the plain conversion below.
  constexpr double kMagic = 6755399441055744.0;
  const double t = __dadd_rn(f, kMagic);
  di = __dsub_rn(t, kMagic);
  i = __double2loint(t);
  if (di > f) {
    di = __dsub_rn(di, 1.0);
    --i;
  }
#else
  i = static_cast<int32_t>(f);
  di = static_cast<double>(i);
#endif
  if (i >= b.bins) {  // x == hi, or an estimate a rounding above it
    i = b.bins - 1;
    di = b.last;
  }
  if (x < detail::MulAddNoFma(di, b.step, b.lo)) return i > 0 ? i - 1 : 0;
  if (i + 1 < b.bins && x >= detail::MulAddNoFma(di + 1.0, b.step, b.lo)) return i + 1;
  return i;
}

}  // namespace gpupipe::kernels
