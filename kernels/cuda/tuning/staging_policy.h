// Tuning of the staged load loops shared by every staging strategy
// (kernels/cuda/detail/staging/), for sm_90. Values only; the figures live in the bench/results
// section the provenance line names.
#pragma once

namespace gpupipe::kernels::cuda::tuning {

// Provenance: bench/results/kernels-h200.md, "Tuning notes: staging".
struct StagingPolicy {
  // Shared-memory staging budget of one block, split into `stages` tiles: fewer stages mean
  // bigger tiles, so every stage count keeps about the same bytes in flight per block. 32 KiB
  // leaves room for six staging blocks in an sm_90 SM's 228 KiB of shared memory. One budget for
  // every strategy: the value has not been swept per strategy.
  static constexpr int kBudgetBytes = 32 * 1024;
};

}  // namespace gpupipe::kernels::cuda::tuning
