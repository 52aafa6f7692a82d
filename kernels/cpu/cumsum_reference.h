// CPU reference of cumsum: np.cumsum(x, axis=-1) per row, the oracle of the CUDA RowCumsum
// (kernels/cuda/cumsum.h) and the CPU backend's implementation.
//
// Input types and outputs (NumPy's, with float16 accumulated wider as the CUDA kernel does):
//   float32 -> float32, float64 -> float64, float16 -> float16, int32 -> int64.
// Accumulation: float32 and float16 inputs accumulate in double and round each output once
// (at least as accurate as any GPU order); float64 in double, sequentially; int32 in int64,
// exact (wrapping as two's complement on overflow, as NumPy's int64 does).
//
// `carry` (nullable) holds one value per row, of the accumulator type of the CUDA kernel
// (double for float64, float for float32/float16, int64 for int32): it is added to every
// output of its row and then replaced by the row's running total, so that scanning a row in
// pieces with one carry equals scanning it whole. Thread-safe; `in` and `out` must not overlap.
#pragma once

#include <cstdint>

#include "kernels/common/element_type.h"

namespace gpupipe::kernels::cpu {

// False (and nothing written) for an input type cumsum does not accept or non-positive sizes.
bool RowCumsum(const void* in, ElementType in_type, void* out, int64_t rows, int64_t cols,
               void* carry = nullptr);

// The output type for `in_type` (int32 -> int64, others unchanged).
ElementType CumsumOutputType(ElementType in_type);

}  // namespace gpupipe::kernels::cpu
