#include "kernels/cpu/histogram_reference.h"

#include <cmath>

#include "kernels/common/histogram_bin.h"
#include "common/float16.h"

namespace gpupipe::kernels::cpu {
namespace {

template <typename T, typename ToDouble>
void Count(const T* in, int64_t* counts, int64_t rows, int64_t cols,
           const HistogramBinning& binning, ToDouble to_double) {
  for (int64_t r = 0; r < rows; ++r) {
    int64_t* row_counts = counts + r * binning.bins;
    for (int64_t c = 0; c < cols; ++c) {
      const int32_t bin = HistogramBin(to_double(in[r * cols + c]), binning);
      if (bin >= 0) ++row_counts[bin];
    }
  }
}

}  // namespace

bool RowHistogram(const void* in, ElementType in_type, int64_t* counts, int64_t rows,
                  int64_t cols, int32_t bins, double lo, double hi, bool accumulate) {
  if (rows < 1 || cols < 1 || bins < 1 || !std::isfinite(lo) || !std::isfinite(hi) ||
      !(lo < hi) || !std::isfinite(hi - lo)) {
    return false;
  }
  if (in_type == ElementType::kInt64) return false;
  if (!accumulate) {
    for (int64_t i = 0; i < rows * bins; ++i) counts[i] = 0;
  }
  const HistogramBinning binning = HistogramBinning::Make(bins, lo, hi);
  switch (in_type) {
    case ElementType::kFloat32:
      Count(static_cast<const float*>(in), counts, rows, cols, binning,
            [](float x) { return static_cast<double>(x); });
      return true;
    case ElementType::kFloat64:
      Count(static_cast<const double*>(in), counts, rows, cols, binning,
            [](double x) { return x; });
      return true;
    case ElementType::kFloat16:
      Count(static_cast<const uint16_t*>(in), counts, rows, cols, binning,
            [](uint16_t x) { return static_cast<double>(HalfToFloat(x)); });
      return true;
    case ElementType::kInt32:
      Count(static_cast<const int32_t*>(in), counts, rows, cols, binning,
            [](int32_t x) { return static_cast<double>(x); });
      return true;
    case ElementType::kInt64:
      return false;
  }
  return false;
}

}  // namespace gpupipe::kernels::cpu
