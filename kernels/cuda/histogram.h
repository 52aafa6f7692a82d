// Host API of the histogram kernels: np.histogram(row, bins, range=(lo, hi))[0] per row.
// The contract of kernels/cuda/ops.h applies (enqueue only on config.stream, no allocation,
// no synchronization, invalid arguments return cudaErrorInvalidValue and enqueue nothing,
// PDL on every launch with config.pdl). d_in needs only its element alignment.
//
// Input types: float32, float64, float16, int32. Counts are int64, `rows` x `bins`, exact.
// Bins are equal-width over [lo, hi], the last closed on the right; values outside [lo, hi]
// and NaN are not counted. Bin placement is kernels/common/histogram_bin.h (NumPy's edges and
// edge correction, computed in double: identical to the CPU reference for every value);
// float32 and float16 input place values in float arithmetic against a table of those edges
// rounded up to float, with the same bins (kernels/common/histogram_float_bin.h says why).
// With `accumulate` the counts are added to d_counts instead of overwriting it, so a long row
// may be counted in consecutive pieces.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/common/element_type.h"
#include "kernels/cuda/ops.h"

namespace gpupipe::kernels::cuda {

// The most bins RowHistogram takes.
inline constexpr int32_t kHistogramMaxBins = 65536;

// Workspace RowHistogram needs: none today (the counts themselves are the only global state);
// kept so the engine sizes it like every other op's.
size_t RowHistogramWorkspaceBytes(int64_t rows, int64_t cols, int32_t bins);

// Requires rows, cols >= 1, 1 <= bins <= kHistogramMaxBins, finite lo < hi with a finite
// hi - lo, d_counts 8-byte aligned. Kernels, by shape:
//   histogram.zero (unless `accumulate`, when blocks share a row's counts), then
//   histogram.rows:   one block counts whole rows into privatized shared-memory
//                     sub-histograms (several copies, one per group of warps, to cut atomic
//                     contention) and writes each bin once (many rows);
//   histogram.split:  several blocks share a row (few long rows), a persistent grid; each
//                     block adds its sub-histogram into the counts, one atomicAdd per bin;
//   histogram.global: bins too many for shared memory: atomicAdd into the counts per value.
cudaError_t RowHistogram(const void* d_in, ElementType in_type, int64_t* d_counts,
                         int64_t rows, int64_t cols, int32_t bins, double lo, double hi,
                         bool accumulate, void* d_workspace, size_t workspace_bytes,
                         const LaunchConfig& config, int* kernels = nullptr);

// What RowHistogram launches for these arguments (see ops.h, "launch descriptions").
std::vector<KernelLaunchInfo> DescribeRowHistogram(ElementType in_type, int64_t rows,
                                                   int64_t cols, int32_t bins, bool accumulate,
                                                   const LaunchConfig& config);

}  // namespace gpupipe::kernels::cuda
