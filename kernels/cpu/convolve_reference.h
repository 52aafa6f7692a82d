// CPU reference of np.convolve(row, taps, mode) along the last axis: the oracle of the GPU
// convolution tests and the CPU backend's implementation. Plain loops written for obviousness.
//
// Types: float32, float64, float16 in and the same type out (`in`/`out` point at host arrays of
// that type; float16 as IEEE binary16 bit patterns). Taps are rounded to the compute type
// (float32 for float32/float16, double for float64) as the GPU does, then every product and
// sum is taken in double and rounded once to the output type, so the reference is at least as
// accurate as NumPy (which sums float32 in float32) and as any GPU order of summation.
// Geometry (full-convolution indices, NumPy's operand swap, modes): convolve_geometry.h.
// Thread-safe; `out` must not overlap `in`.
#pragma once

#include <cstdint>

#include "kernels/common/convolve_geometry.h"
#include "kernels/common/element_type.h"

namespace gpupipe::kernels::cpu {

// Row r of `out` (ConvolveOutputLength(cols, num_taps, mode) elements, rows packed) =
// np.convolve(row r of `in`, taps, mode). rows >= 1, cols >= 1, 1 <= num_taps <=
// kMaxConvolveTaps. Returns false (writing nothing) for invalid arguments or types.
bool RowConvolve(const void* in, ElementType type, void* out, int64_t rows, int64_t cols,
                 const double* taps, int32_t num_taps, ConvolveMode mode);

// One row's full outputs [window.out_begin, window.out_begin + window.out_count) into
// out[0 .. out_count), reading the row's elements [in_begin, in_begin + in_count) from
// in[0 .. in_count). Returns false for an invalid window (IsValidConvolveWindow) or type.
bool RowConvolveWindow(const void* in, ElementType type, void* out, const ConvolveWindow& window,
                       const double* taps, int32_t num_taps);

}  // namespace gpupipe::kernels::cpu
