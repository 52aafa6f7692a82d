// CPU reference implementation of every op: the semantics of the service and the oracle of the
// GPU tests. Plain loops written for obviousness, not speed. Sums accumulate in double and
// round once to float, so they are at least as accurate as any GPU order of summation.
//
// Layout: `rows` x `cols` row-major float32; row ops work along the last axis (NumPy axis=-1),
// rows >= 1, cols >= 1. Thread-safe (no shared state). Inputs and outputs must not overlap
// unless stated.
#pragma once

#include <cstdint>

#include "kernels/common/elementwise_program.h"
#include "kernels/common/row_ops.h"

namespace gpupipe::kernels::cpu {

// out[i] = ApplyEw(program, in[i]) for i < n. `in` may equal `out`.
void Elementwise(const float* in, float* out, int64_t n, const EwProgram& program);

// out[r] = reduction of row r (see RowReduceKind). Sum, mean and norm2 accumulate in double;
// min and max return NaN for a row holding a NaN.
void RowReduce(const float* in, float* out, int64_t rows, int64_t cols, RowReduceKind kind);

// RowReduce(kSum).
void RowSum(const float* in, float* out, int64_t rows, int64_t cols);

// out[r] = index in [0, cols) of the first maximum of row r (np.argmax: a NaN counts as the
// maximum, the first NaN wins; -0 and +0 tie).
void RowArgmax(const float* in, int64_t* out, int64_t rows, int64_t cols);

// out row r = exp(x - max) / sum(exp(x - max)) over row r (double internally).
void RowSoftmax(const float* in, float* out, int64_t rows, int64_t cols);

// out row r = row r normalized (see RowNormalizeKind), statistics and division in double.
void RowNormalize(const float* in, float* out, int64_t rows, int64_t cols,
                  RowNormalizeKind kind);

}  // namespace gpupipe::kernels::cpu
