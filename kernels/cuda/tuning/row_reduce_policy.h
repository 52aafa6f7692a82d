// Tuning of RowReduce and RowArgmax beyond the shared row plan (kernels/cuda/row_reduce.cu), for
// sm_90. Values only; the figures live in the bench/results section the provenance line names.
#pragma once

#include <cstdint>

#include "kernels/cuda/tuning/row_policy.h"

namespace gpupipe::kernels::cuda::tuning {

// Provenance: bench/results/kernels-h200.md, "Tuning notes: row reduce".
struct RowReducePolicy {
  // Occupancy floor (__launch_bounds__) of the block reduction with the direct strategy on
  // 4-byte types. Six blocks an SM cap a thread at 40 registers, which those instances fit
  // without spilling, and keep half again as many loads in flight as the row default. The
  // 8-byte and float16 instances spill at that cap, argmax too, and the staged strategies are
  // bounded by their stage buffers first: they all keep RowPlanPolicy::kBlockMinBlocksPerSm.
  static constexpr int kDirectNarrowMinBlocksPerSm = 6;
  // Occupancy floor of the plain float32 sum (no prologue program, direct loads): without the
  // program interpreter and the run-time reduction kind it fits 32 registers without spilling,
  // so it runs full occupancy. (int32 would fit too; it keeps the general instance until it is
  // measured.)
  static constexpr int kPlainSumMinBlocksPerSm = 8;
  // Few long rows split into this many segments an SM, handed out to the resident blocks as
  // they finish (a block per segment)...
  static constexpr int kSegmentsPerSm = RowPlanPolicy::kTargetBlocksPerSm;
  // ...and inputs of at least kLargeInputBytes into this many: a large input takes more,
  // shorter segments, so no SM waits on another's last long one; a smaller one takes fewer, so
  // the blocks' ramp-up and the merge stay small against the whole.
  static constexpr int kSegmentsPerSmLarge = 24;
  static constexpr int64_t kLargeInputBytes = int64_t{1} << 30;
  // Rows split into more partials than this merge with a block per row: a warp would load over
  // four partials a lane, in dependent rounds of L2 latency.
  static constexpr int64_t kWarpCombineMaxSplits = 4 * 32;
};

}  // namespace gpupipe::kernels::cuda::tuning
