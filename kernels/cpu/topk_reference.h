// CPU reference of top-k along the last axis: the k largest values of each row in descending
// order, np.sort(row)[::-1][:k] (NaN is larger than every number, so NaNs come first; -0 and +0
// are equal values). The oracle of the GPU top-k tests and the CPU backend's implementation.
//
// Types: float32, float64, float16 (IEEE binary16 bit patterns), int32; `out` has the input's
// type. Exact. Thread-safe; `out` must not overlap `in`.
#pragma once

#include <cstdint>

#include "kernels/common/element_type.h"

namespace gpupipe::kernels::cpu {

// Row r of `out` (k elements, rows packed) = the k largest values of row r of `in`,
// descending. rows >= 1, 1 <= k <= cols. Returns false (writing nothing) for invalid arguments
// or types.
bool RowTopk(const void* in, ElementType type, void* out, int64_t rows, int64_t cols, int32_t k);

}  // namespace gpupipe::kernels::cpu
