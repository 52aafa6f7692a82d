// CPU reference of histogram: np.histogram(row, bins, range=(lo, hi))[0] per row, the oracle
// of the CUDA RowHistogram (kernels/cuda/histogram.h) and the CPU backend's implementation.
// Bin placement: kernels/common/histogram_bin.h (equal-width bins, the last closed on the
// right; values outside [lo, hi] and NaN are not counted).
//
// Input types: float32, float64, float16, int32; counts are int64, `rows` x `bins`. With
// `accumulate` the counts are added to `counts` instead of overwriting it (a row scanned in
// pieces). Requires rows, cols, bins >= 1 and finite lo < hi; returns false (nothing written)
// otherwise or for an unsupported type. Thread-safe.
#pragma once

#include <cstdint>

#include "kernels/common/element_type.h"

namespace gpupipe::kernels::cpu {

bool RowHistogram(const void* in, ElementType in_type, int64_t* counts, int64_t rows,
                  int64_t cols, int32_t bins, double lo, double hi, bool accumulate);

}  // namespace gpupipe::kernels::cpu
