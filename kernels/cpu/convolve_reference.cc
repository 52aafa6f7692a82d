#include "kernels/cpu/convolve_reference.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "common/float16.h"

namespace gpupipe::kernels::cpu {
namespace {

double Load(const void* p, ElementType type, int64_t i) {
  switch (type) {
    case ElementType::kFloat32: return static_cast<const float*>(p)[i];
    case ElementType::kFloat64: return static_cast<const double*>(p)[i];
    case ElementType::kFloat16: return HalfToFloat(static_cast<const uint16_t*>(p)[i]);
    default: return 0;
  }
}

void Store(void* p, ElementType type, int64_t i, double v) {
  switch (type) {
    case ElementType::kFloat32: static_cast<float*>(p)[i] = static_cast<float>(v); return;
    case ElementType::kFloat64: static_cast<double*>(p)[i] = v; return;
    case ElementType::kFloat16: static_cast<uint16_t*>(p)[i] = DoubleToHalf(v); return;
    default: return;
  }
}

bool IsConvolveType(ElementType type) { return IsFloatingPoint(type); }

// The taps as the GPU multiplies them: rounded to float32 unless the data is float64.
std::vector<double> ComputeTaps(const double* taps, int32_t num_taps, ElementType type) {
  std::vector<double> out(taps, taps + num_taps);
  if (type != ElementType::kFloat64) {
    for (double& t : out) t = static_cast<float>(t);
  }
  return out;
}

// The validated core: full outputs of `w` from the window's input.
void ConvolveWindowUnchecked(const void* in, ElementType type, void* out,
                             const ConvolveWindow& w, const std::vector<double>& taps) {
  const int64_t m = static_cast<int64_t>(taps.size());
  for (int64_t o = 0; o < w.out_count; ++o) {
    const int64_t n = w.out_begin + o;
    // x[n - j] exists for 0 <= n - j < row_length.
    const int64_t j_lo = std::max<int64_t>(0, n - (w.row_length - 1));
    const int64_t j_hi = std::min<int64_t>(m - 1, n);
    double acc = 0;
    for (int64_t j = j_lo; j <= j_hi; ++j) acc += taps[j] * Load(in, type, n - j - w.in_begin);
    Store(out, type, o, acc);
  }
}

}  // namespace

bool RowConvolve(const void* in, ElementType type, void* out, int64_t rows, int64_t cols,
                 const double* taps, int32_t num_taps, ConvolveMode mode) {
  if (!IsConvolveType(type) || rows < 1 || cols < 1 || num_taps < 1 ||
      num_taps > kMaxConvolveTaps || in == nullptr || out == nullptr || taps == nullptr) {
    return false;
  }
  const std::vector<double> t = ComputeTaps(taps, num_taps, type);
  ConvolveWindow w;
  w.row_length = cols;
  w.in_begin = 0;
  w.in_count = cols;
  ConvolveOutputRange(cols, num_taps, mode, &w.out_begin, &w.out_count);
  const size_t elem = ElementSize(type);
  for (int64_t r = 0; r < rows; ++r) {
    ConvolveWindowUnchecked(static_cast<const char*>(in) + r * cols * elem, type,
                            static_cast<char*>(out) + r * w.out_count * elem, w, t);
  }
  return true;
}

bool RowConvolveWindow(const void* in, ElementType type, void* out, const ConvolveWindow& window,
                       const double* taps, int32_t num_taps) {
  if (!IsConvolveType(type) || !IsValidConvolveWindow(window, num_taps) || taps == nullptr ||
      (window.out_count > 0 && out == nullptr) || (window.in_count > 0 && in == nullptr)) {
    return false;
  }
  ConvolveWindowUnchecked(in, type, out, window, ComputeTaps(taps, num_taps, type));
  return true;
}

}  // namespace gpupipe::kernels::cpu
