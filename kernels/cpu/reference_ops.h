// CPU reference implementation of every op: the semantics of the service and the oracle of the
// GPU tests. Plain loops written for obviousness, not speed. Reductions accumulate in double
// and round once to float, so they are at least as accurate as any GPU order of summation.
//
// Layout: `rows` x `cols` row-major float32; row ops work along the last axis (NumPy axis=-1).
// Thread-safe (no shared state). Inputs and outputs must not overlap unless stated.
#pragma once

#include <cstdint>

#include "kernels/common/elementwise_program.h"

namespace gpupipe::kernels::cpu {

// out[i] = ApplyEw(program, in[i]) for i < n. `in` may equal `out`.
void Elementwise(const float* in, float* out, int64_t n, const EwProgram& program);

// out[r] = sum of row r (double accumulation). rows >= 1, cols >= 1.
void RowSum(const float* in, float* out, int64_t rows, int64_t cols);

// out row r = exp(x - max) / sum(exp(x - max)) over row r (double internally).
void RowSoftmax(const float* in, float* out, int64_t rows, int64_t cols);

}  // namespace gpupipe::kernels::cpu
