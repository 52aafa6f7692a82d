// Tuning shared by every row op (RowReduce, RowArgmax, RowSoftmax, RowNormalize): how
// detail::PlanRows (kernels/cuda/detail/row_plan.cuh) maps rows x cols onto warps and blocks,
// and how large the row kernels' grids get. For sm_90; values only, the figures live in the
// bench/results section the provenance line names.
#pragma once

#include <cstdint>

namespace gpupipe::kernels::cuda::tuning {

// Provenance: bench/results/kernels-h200.md, "Tuning notes: row plan".
struct RowPlanPolicy {
  // Threads per block of every row kernel.
  static constexpr int kThreads = 256;
  // Rows up to this many columns are handled by a group of <= 32 lanes of one warp; longer rows
  // by whole blocks.
  static constexpr int64_t kGroupMaxCols = 1024;
  // A group is sized so each lane owns about this many elements of its row.
  static constexpr int kGroupElemsPerLane = 4;
  // Block-path rows are split when there are fewer rows than this many blocks an SM...
  static constexpr int kTargetBlocksPerSm = 4;
  // ...but never into segments shorter than this, so a segment's fixed cost stays small. 2048
  // columns (8 floats a thread) let one row of 2^20 spread over 512 blocks, about the target's
  // four an SM; 8192 would give it 128, under one an SM.
  static constexpr int64_t kMinSegmentCols = 2048;
  // Grids are capped at this many blocks an SM (the resident limit for 256-thread blocks at full
  // occupancy); kernels loop over any remaining work.
  static constexpr int kMaxBlocksPerSm = 8;
  // Occupancy floor given to ptxas for the block-path kernels (__launch_bounds__): without it
  // ptxas squeezes them to 32 registers for full occupancy and spills.
  static constexpr int kBlockMinBlocksPerSm = 4;
  // Independent 16-byte loads in flight per thread in the block path.
  static constexpr int kUnroll = 4;
  // A block-per-segment reduction launches a block for each segment up to this many times the
  // capped grid, so the hardware hands out segments as blocks finish. A grid capped at one wave
  // that strides over the rows instead gives each block the same share of rows only when the
  // row count divides evenly by the grid; otherwise its last round runs part empty, and with
  // few rows a block that round is a large part of the whole.
  static constexpr int kSegmentGridMaxWaves = 16;
};

}  // namespace gpupipe::kernels::cuda::tuning
