// The one place where kernels_bench calls gpupipe's kernels (bench/kernels/gpupipe_ops.cu):
// when a host API changes, only that file follows. Ops whose header is not in this checkout
// report themselves as not built, so the bench builds on any branch.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "kernels/common/element_type.h"
#include "kernels/cuda/ops.h"

namespace gpupipe::bench {

enum class KernelOp {
  kAffine,       // y = 2x + 1 (Elementwise); int32: y = x + 1 (kAffine is add there)
  kSum,          // RowSum: one value per row (int64 for int32 input)
  kMin,          // RowReduce(kMin): one value per row, the input's type
  kMax,          // RowReduce(kMax): likewise
  kSoftmax,      // RowSoftmax
  kCumsum,       // RowCumsum (int64 out for int32 input)
  kHistogram,    // RowHistogram(bins, lo, hi): int64 counts, `bins` per row
  kConvolve,     // RowConvolve(taps, mode "same"): cols values per row
  kTopk,         // RowTopk(k): k values per row, descending
  kArgmax,       // RowArgmax: one int64 per row
  kStandardize,  // RowNormalize(kStandardize)
  kL2Normalize,  // RowNormalize(kL2Normalize)
};

struct KernelOpArgs {
  KernelOp op = KernelOp::kAffine;
  kernels::ElementType type = kernels::ElementType::kFloat32;  // of the input
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

// Whether the op takes input of `type` (the kernels' own rules: int32 for elementwise, sum,
// min, max, argmax, cumsum, histogram and topk; every op for the float types).
bool KernelOpAccepts(KernelOp op, kernels::ElementType type);

// Output elements, their type (NumPy's rules, as the kernels write them) and size in bytes.
int64_t KernelOpOutputElements(const KernelOpArgs& args);
kernels::ElementType KernelOpOutputType(const KernelOpArgs& args);
int KernelOpOutputElementBytes(const KernelOpArgs& args);

// Enqueues the op on config.stream: input d_in (rows * cols of args.type), output d_out. `d_workspace`
// holds `workspace_bytes` (the bench passes one generous buffer; an op that needs more
// rejects the call with cudaErrorInvalidValue). `*kernels` receives the kernel count.
cudaError_t RunKernelOp(const KernelOpArgs& args, const void* d_in, void* d_out,
                        void* d_workspace, size_t workspace_bytes,
                        const kernels::cuda::LaunchConfig& config, int* kernels);

}  // namespace gpupipe::bench
