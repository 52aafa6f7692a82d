// Host API of the CUDA top-k: the k largest values of each row, in descending order, as
// np.sort(row)[::-1][:k] (a NaN counts as larger than every number, so NaNs come first; -0 and
// +0 are equal values and may come in either order). Values only, no indices.
// The contract of kernels/cuda/ops.h applies (stream-only enqueueing, no allocation or
// synchronization, cudaErrorInvalidValue for bad arguments with nothing enqueued, PDL on every
// launch with config.pdl, `*kernels` counts launches), with these differences:
//  - input types float32, float64, float16, int32; the output has the input's type;
//  - d_in and d_out need only the alignment of their element type; d_out (rows x k, packed)
//    must not overlap d_in;
//  - 1 <= k <= min(cols, kMaxTopk). Exact for every k. The top k of the concatenation of
//    per-chunk top ks of a row equals the row's top k, so the engine may combine chunks with a
//    second call.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/common/element_type.h"
#include "kernels/cuda/ops.h"

namespace gpupipe::kernels::cuda {

inline constexpr int32_t kMaxTopk = 1024;

// Workspace RowTopk needs for these arguments under any LaunchConfig (element-aligned): 0
// unless few long rows are split into segments (see below); then rows x segments x k values.
size_t RowTopkWorkspaceBytes(int64_t rows, int64_t cols, int32_t k, ElementType in_type);

// Row r of d_out (k elements) = the k largest values of row r of d_in, descending.
// k <= 32: one warp per row keeps a sorted register list per lane, then the warp merges;
// k > 32: one block per row finds the k-th largest by radix select, then sorts the larger
// values in shared memory. Few long rows are split into segments whose top ks go to the
// workspace, then a second kernel of the same kind takes each row's top k of those.
cudaError_t RowTopk(const void* d_in, ElementType in_type, void* d_out, int64_t rows,
                    int64_t cols, int32_t k, void* d_workspace, size_t workspace_bytes,
                    const LaunchConfig& config, int* kernels = nullptr);

// What RowTopk would launch (see Describe* in ops.h): "topk.warp" or "topk.radix", preceded
// by "topk.warp_partials" or "topk.radix_partials" when rows are split.
std::vector<KernelLaunchInfo> DescribeRowTopk(int64_t rows, int64_t cols, int32_t k,
                                              ElementType in_type, const LaunchConfig& config);

}  // namespace gpupipe::kernels::cuda
