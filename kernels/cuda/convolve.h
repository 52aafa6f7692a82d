// Host API of the CUDA convolution: np.convolve(row, taps, mode) along the last axis.
// The contract of kernels/cuda/ops.h applies (stream-only enqueueing, no allocation or
// synchronization, cudaErrorInvalidValue for bad arguments with nothing enqueued, PDL on every
// launch with config.pdl, `*kernels` counts launches), with these differences:
//  - input types float32, float64, float16; the output has the input's type. float32 and
//    float16 multiply and accumulate in float32 (taps rounded to float32), float64 in double;
//    the order of summation differs from NumPy's, so results agree with it to rounding;
//  - d_in and d_out need only the alignment of their element type (any offset into a buffer
//    works: the kernels use 16-byte loads where the address allows and scalar loads at the
//    edges); d_out must not overlap d_in;
//  - `taps` (1..kMaxConvolveTaps values) is HOST memory read during the call only: the taps are
//    passed by value in the kernel parameters, so nothing is allocated or copied per job;
//  - no workspace is needed (ConvolveWorkspaceBytes returns 0; d_workspace may be null).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/common/convolve_geometry.h"
#include "kernels/common/element_type.h"
#include "kernels/cuda/ops.h"

namespace gpupipe::kernels::cuda {

using kernels::ConvolveMode;
using kernels::ConvolveWindow;

// Always 0 today; kept so callers size workspaces the same way for every op.
size_t ConvolveWorkspaceBytes(int64_t rows, int64_t cols, int32_t num_taps,
                              ElementType in_type);

// Row r of d_out (ConvolveOutputLength(cols, num_taps, mode) elements, rows packed) =
// np.convolve(row r of d_in, taps, mode). rows >= 1, cols >= 1.
cudaError_t RowConvolve(const void* d_in, ElementType in_type, void* d_out, int64_t rows,
                        int64_t cols, const double* taps, int32_t num_taps, ConvolveMode mode,
                        void* d_workspace, size_t workspace_bytes, const LaunchConfig& config,
                        int* kernels = nullptr);

// One row's full outputs [window.out_begin, window.out_begin + window.out_count) written to
// d_out[0 .. out_count), reading the row's elements [window.in_begin, window.in_begin +
// window.in_count) from d_in[0 .. in_count) (see ConvolveWindow in convolve_geometry.h for
// validity). Computing a row's outputs in several windows gives exactly the values of one call
// (each output is computed by the same code in the same order). out_count == 0 enqueues nothing.
cudaError_t RowConvolveWindow(const void* d_in, ElementType in_type, void* d_out,
                              const ConvolveWindow& window, const double* taps,
                              int32_t num_taps, void* d_workspace, size_t workspace_bytes,
                              const LaunchConfig& config, int* kernels = nullptr);

// What RowConvolve / RowConvolveWindow would launch (see Describe* in ops.h): one kernel,
// "convolve.tiles".
std::vector<KernelLaunchInfo> DescribeRowConvolve(int64_t rows, int64_t cols, int32_t num_taps,
                                                  ConvolveMode mode, ElementType in_type,
                                                  const LaunchConfig& config);
std::vector<KernelLaunchInfo> DescribeRowConvolveWindow(const ConvolveWindow& window,
                                                        int32_t num_taps, ElementType in_type,
                                                        const LaunchConfig& config);

}  // namespace gpupipe::kernels::cuda
