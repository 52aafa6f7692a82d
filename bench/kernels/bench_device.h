// kernels_bench's own device code: the input generator, the queue-ahead spin, the L2 flush and
// the result comparisons. Nothing here is timed.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/common/element_type.h"

namespace gpupipe::bench {

// d[i] = (2q - 255) / 256 with q = Hash32(i + Hash32(seed)) >> 24: odd multiples of 1/256 in
// (-1, 1), symmetric, mean zero, never zero (zeros hide unwritten outputs). Quantized on
// purpose: any partial sum of such values below 2^16 in magnitude is exact in float32, and the
// sums of 2^28 of them stay far below that (their standard deviation is about 9,500), so sums,
// row sums and cumsums of this input do not depend on summation order and peers can be
// compared exactly; products with taps of the form m / 64 and their sums are exact too
// (convolve, also in TF32). torch_peers.py builds the same input from the same seed.
cudaError_t FillQuantized(float* d, int64_t n, uint32_t seed, cudaStream_t stream);
uint32_t Hash32(uint32_t x);  // host twin of the device hash, for the seed mix

// The same values as `type` (float64, float16: exact; the quantization needs 9 significant
// bits, float16 has 11), or for int32 the integers 2q - 255 (256 times the float values): the
// input of the other-dtype sweep. Sums of 2^26 of them stay exact in every accumulator
// (float16 accumulates in float32).
cudaError_t FillQuantizedAs(void* d, kernels::ElementType type, int64_t n, uint32_t seed,
                            cudaStream_t stream);

// Reads `bytes` of `d_buffer` (more than the L2 holds) so that the next timed region starts
// with none of its data in L2 and no dirty lines of earlier writes left to write back.
cudaError_t FlushL2(const void* d_buffer, size_t bytes, void* d_sink, cudaStream_t stream);

// One thread that busy-waits `ns` nanoseconds, queued ahead of a timed region so that the host
// has enqueued the whole region before the device reaches it.
cudaError_t LaunchSpin(cudaStream_t stream, uint64_t ns);

// Result of comparing `n` values of `d_out` with `d_ref`.
struct CompareResult {
  double max_abs_err = 0;     // over positions where both are finite
  double max_abs_ref = 0;
  uint64_t bad = 0;           // |out - ref| > atol + rtol * |ref|, or finiteness differs
  bool ok() const { return bad == 0; }
};

// Comparison of `n` values of `type` (every ElementType; integers compare exactly when atol
// and rtol are 0, through double, which holds every int32 and every int64 below 2^53).
// `d_acc` must hold 4 x 8 bytes of device scratch; the call synchronizes `stream`.
cudaError_t CompareTyped(const void* d_out, const void* d_ref, kernels::ElementType type,
                         int64_t n, double atol, double rtol, void* d_acc, cudaStream_t stream,
                         CompareResult* result);
// Exact comparison of int64 results with an int64 (ref_is_int32 false) or int32 reference.
cudaError_t CompareInt(const int64_t* d_out, const void* d_ref, bool ref_is_int32, int64_t n,
                       void* d_acc, cudaStream_t stream, CompareResult* result);

}  // namespace gpupipe::bench
