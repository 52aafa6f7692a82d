// CPU reference implementation of every op: the semantics of the service and the oracle of the
// GPU tests. Plain loops written for obviousness, not speed. Sums accumulate in a wider type
// (double for float32/float16, long double for float64, int64 for int32) and round once, so
// they are at least as accurate as any GPU order of summation.
//
// Layout: `rows` x `cols` row-major; row ops work along the last axis (NumPy axis=-1),
// rows >= 1, cols >= 1. Thread-safe (no shared state). Inputs and outputs must not overlap
// unless stated.
//
// Element types (kernels/common/element_type.h), as the CUDA host API: float32, float64 and
// float16 everywhere; int32 for Elementwise (integer opcodes only), RowReduce (kSum -> int64,
// kMin/kMax -> int32) and RowArgmax. float16 data is widened to float, run through the float32
// reference, and rounded once to float16 (the GPU computes in float32 and rounds once too).
// Unsupported types leave the output untouched and return false.
#pragma once

#include <cstdint>
#include <functional>

#include "kernels/common/element_type.h"
#include "kernels/common/elementwise_program.h"
#include "kernels/common/row_ops.h"

namespace gpupipe::kernels::cpu {

// out[i] = ApplyEw(program, in[i]) in the compute type for i < n; same type out. `in` may
// equal `out`.
bool Elementwise(const void* in, ElementType type, void* out, int64_t n,
                 const EwProgram& program);

// out[r] = reduction of row r (see RowReduceKind), of type RowReduceOutputType(type, kind).
// min and max return NaN for a row holding a NaN.
bool RowReduce(const void* in, ElementType type, void* out, int64_t rows, int64_t cols,
               RowReduceKind kind);

// out[r] = index in [0, cols) of the first maximum of row r (np.argmax: a NaN counts as the
// maximum, the first NaN wins; -0 and +0 tie).
bool RowArgmax(const void* in, ElementType type, int64_t* out, int64_t rows, int64_t cols);

// out row r = exp(x - max) / sum(exp(x - max)) over row r (wider type internally). Float types.
bool RowSoftmax(const void* in, ElementType type, void* out, int64_t rows, int64_t cols);

// out row r = row r normalized (see RowNormalizeKind), statistics and division in the wider
// type. Float types.
bool RowNormalize(const void* in, ElementType type, void* out, int64_t rows, int64_t cols,
                  RowNormalizeKind kind);

// A row op on ApplyEw(pre, x), as the CUDA row ops take their prologue: the prologue and the op
// run in the compute type, so float16 input is widened to float32 once, `op` runs on float32,
// and only its result is rounded to float16 (when out_type is float16; argmax's int64 stays).
// `op(x, type, y)` gets the prepared input, its type (float16 replaced by float32) and where to
// write: `out` itself, or a float32 scratch of out_count elements. `in` is not modified.
bool RunWithPrologue(const void* in, ElementType type, int64_t n, const EwProgram& pre,
                     void* out, ElementType out_type, int64_t out_count,
                     const std::function<bool(const void* x, ElementType type, void* y)>& op);

// float32 shorthands of the above.
void Elementwise(const float* in, float* out, int64_t n, const EwProgram& program);
void RowReduce(const float* in, float* out, int64_t rows, int64_t cols, RowReduceKind kind);
void RowSum(const float* in, float* out, int64_t rows, int64_t cols);
void RowArgmax(const float* in, int64_t* out, int64_t rows, int64_t cols);
void RowSoftmax(const float* in, float* out, int64_t rows, int64_t cols);
void RowNormalize(const float* in, float* out, int64_t rows, int64_t cols,
                  RowNormalizeKind kind);

}  // namespace gpupipe::kernels::cpu
