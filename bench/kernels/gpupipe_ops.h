// The one place where kernels_bench calls gpupipe's kernels (bench/kernels/gpupipe_ops.cu):
// when a host API changes, only that file follows. Ops whose header is not in this checkout
// report themselves as not built, so the bench builds on any branch.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "kernels/cuda/ops.h"

namespace gpupipe::bench {

enum class KernelOp {
  kAffine,       // y = 2x + 1 (Elementwise)
  kSum,          // RowSum: one float per row
  kSoftmax,      // RowSoftmax
  kCumsum,       // RowCumsum (float32 in and out)
  kHistogram,    // RowHistogram(bins, lo, hi): int64 counts, `bins` per row
  kConvolve,     // RowConvolve(taps, mode "same"): cols floats per row
  kTopk,         // RowTopk(k): k floats per row, descending
  kArgmax,       // RowArgmax: one int64 per row
  kStandardize,  // RowNormalize(kStandardize)
  kL2Normalize,  // RowNormalize(kL2Normalize)
};

struct KernelOpArgs {
  KernelOp op = KernelOp::kAffine;
  int64_t rows = 1;
  int64_t cols = 1;
  int32_t bins = 256;  // histogram
  double lo = 0, hi = 1;
  int32_t k = 16;      // topk
  std::vector<float> taps;  // convolve, np.convolve order (not flipped)
};

// One staging strategy of kernels::cuda::Staging as the bench measures it.
struct StagingVariant {
  kernels::cuda::Staging staging;
  const char* name;
  bool uses_stages;  // swept over kStageSweep; otherwise measured once (stages ignored)
};

// Every strategy the bench measures side by side, in one list: a new Staging value is one line.
const std::vector<StagingVariant>& StagingVariants();

// Stages measured for strategies that use them.
inline constexpr int kStageSweep[] = {1, 2, 4, 8};

// False when the op's kernel header is missing from this checkout.
bool KernelOpBuilt(KernelOp op);

// Output elements and their size in bytes (4 for float, 8 for int64).
int64_t KernelOpOutputElements(const KernelOpArgs& args);
int KernelOpOutputElementBytes(KernelOp op);

// Enqueues the op on config.stream: float32 input d_in (rows * cols), output d_out. `d_workspace`
// holds `workspace_bytes` (the bench passes one generous buffer; an op that needs more
// rejects the call with cudaErrorInvalidValue). `*kernels` receives the kernel count.
cudaError_t RunKernelOp(const KernelOpArgs& args, const float* d_in, void* d_out,
                        void* d_workspace, size_t workspace_bytes,
                        const kernels::cuda::LaunchConfig& config, int* kernels);

}  // namespace gpupipe::bench
