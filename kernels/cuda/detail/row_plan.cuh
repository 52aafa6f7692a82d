// Host-side decomposition of a rows x cols row op into kernels, shared by every row op so they
// all split the same shapes the same way.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/detail/launch.cuh"
#include "kernels/cuda/tuning/row_policy.h"

namespace gpupipe::kernels::cuda::detail {

// The plan's tuning values, under the names the row kernels use (the reasons beside them in
// tuning/row_policy.h).
inline constexpr int kRowThreads = tuning::RowPlanPolicy::kThreads;
inline constexpr int64_t kGroupMaxCols = tuning::RowPlanPolicy::kGroupMaxCols;
inline constexpr int kGroupElemsPerLane = tuning::RowPlanPolicy::kGroupElemsPerLane;
inline constexpr int kRowTargetBlocksPerSm = tuning::RowPlanPolicy::kTargetBlocksPerSm;
inline constexpr int64_t kMinSegmentCols = tuning::RowPlanPolicy::kMinSegmentCols;
inline constexpr int kRowMaxBlocksPerSm = tuning::RowPlanPolicy::kMaxBlocksPerSm;
inline constexpr int kRowBlockMinBlocksPerSm = tuning::RowPlanPolicy::kBlockMinBlocksPerSm;
inline constexpr int kRowUnroll = tuning::RowPlanPolicy::kUnroll;

// Fixed workspace: per-segment partials of `stat_bytes` each (RowReduce: 4 or 8, RowSoftmax: 8
// or 16, RowArgmax: 16, RowNormalize: 16 or 32, by compute type). Any shape fits: the multipass ops process rows in batches of
// at most StatCapacity(stat_bytes) segments; the single-pass ops only split rows when there
// are few of them (rows * splits stays near the grid size), far below the capacity.
inline constexpr size_t kRowOpsWorkspaceBytes = size_t{2} << 20;
inline constexpr int64_t kMaxStatBytes = 32;
inline constexpr int64_t StatCapacity(int64_t stat_bytes) {
  return static_cast<int64_t>(kRowOpsWorkspaceBytes) / stat_bytes;
}

struct RowPlan {
  bool group = false;      // true: a group of `lanes` lanes per row; false: a block per segment
  int lanes = 32;          // group path: lanes per row, a power of two in [1, 32]
  int64_t splits = 1;      // block path: segments per row
  int64_t seg_len = 0;     // block path: columns per segment (the last may be shorter)
  int64_t batch_rows = 0;  // rows whose per-segment entries fit the workspace at once
};

// `min_segment_cols` lets an op with its own segment kernels ask for longer segments, and
// `target_blocks_per_sm` for another number of segments an SM when rows split (RowReduce takes
// more for large inputs: ReduceSegmentsPerSm in row_reduce.cu).
inline RowPlan PlanRows(int64_t rows, int64_t cols, int multiprocessors, int64_t stat_bytes,
                        int64_t min_segment_cols = kMinSegmentCols,
                        int target_blocks_per_sm = kRowTargetBlocksPerSm) {
  const int64_t capacity = StatCapacity(stat_bytes);
  RowPlan plan;
  if (cols <= kGroupMaxCols) {
    plan.group = true;
    const int64_t want = CeilDiv(cols, kGroupElemsPerLane);
    plan.lanes = 1;
    while (plan.lanes < 32 && plan.lanes < want) plan.lanes *= 2;
    plan.seg_len = cols;
  } else {
    const int64_t target = static_cast<int64_t>(multiprocessors) * target_blocks_per_sm;
    int64_t splits = 1;
    if (rows < target) {
      splits = std::min({CeilDiv(target, rows), CeilDiv(cols, min_segment_cols),
                         capacity / rows});
      splits = std::max<int64_t>(splits, 1);
    }
    // Segments a multiple of 4 columns long, and no empty segment after rounding.
    plan.seg_len = CeilDiv(CeilDiv(cols, splits), 4) * 4;
    plan.splits = CeilDiv(cols, plan.seg_len);
  }
  plan.batch_rows = capacity / plan.splits;
  return plan;
}

inline int CapGrid(int64_t blocks_wanted, int multiprocessors) {
  const int64_t cap = static_cast<int64_t>(multiprocessors) * kRowMaxBlocksPerSm;
  return static_cast<int>(std::max<int64_t>(1, std::min(blocks_wanted, cap)));
}

// Grid of a kernel that gives each item a block (a segment of a block-per-segment reduction, a
// row of the wide-row path): a block for each up to kSegmentGridMaxWaves times CapGrid, so the
// hardware hands out items as blocks finish; blocks loop over any items past the cap.
inline constexpr int kSegmentGridMaxWaves = tuning::RowPlanPolicy::kSegmentGridMaxWaves;
inline int64_t SegmentGrid(int64_t segments, int multiprocessors) {
  const int64_t cap =
      int64_t{kSegmentGridMaxWaves} * multiprocessors * kRowMaxBlocksPerSm;
  return std::max<int64_t>(1, std::min(segments, cap));
}

// Checks of a row op's shape and config: all that describing it needs.
inline cudaError_t ValidateRowShape(int64_t rows, int64_t cols, const LaunchConfig& config) {
  if (const cudaError_t err = ValidateShapeConfig(config); err != cudaSuccess) return err;
  if (rows < 1 || cols < 1) return cudaErrorInvalidValue;
  if (cols > INT64_MAX / 8 / rows) return cudaErrorInvalidValue;  // byte size must fit int64
  return cudaSuccess;
}

// Argument checks shared by the row ops.
// `out_type` is the type the op writes (d_out must be aligned to it).
inline cudaError_t ValidateRowArgs(const void* d_in, ElementType in_type, const void* d_out,
                                   ElementType out_type, int64_t rows, int64_t cols,
                                   const EwProgram& pre, const void* d_workspace,
                                   size_t workspace_bytes, const LaunchConfig& config) {
  if (const cudaError_t err = ValidateConfig(config); err != cudaSuccess) return err;
  if (const cudaError_t err = ValidateRowShape(rows, cols, config); err != cudaSuccess) {
    return err;
  }
  if (ValidateProgram(pre, in_type) != cudaSuccess) return cudaErrorInvalidValue;
  if (d_in == nullptr || d_out == nullptr || !IsAligned(d_in, 16)) return cudaErrorInvalidValue;
  if (ElementSize(out_type) == 0 || !IsAligned(d_out, ElementSize(out_type))) {
    return cudaErrorInvalidValue;
  }
  if (d_workspace == nullptr || !IsAligned(d_workspace, 16)) return cudaErrorInvalidValue;
  if (workspace_bytes < kRowOpsWorkspaceBytes) return cudaErrorInvalidValue;
  return cudaSuccess;
}

}  // namespace gpupipe::kernels::cuda::detail
