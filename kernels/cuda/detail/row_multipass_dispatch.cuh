// Host dispatch of the row multipass ops: the one sizing path, for launching and for
// describing, that picks a kernel of row_multipass_kernels.cuh for a rows x cols shape and
// sizes its grid. By shape:
//  - cols <= kResidentMaxCols: one kernel (<op>.rows), each row in registers, a group of lanes
//    a row for short rows, a block a row otherwise;
//  - 4-byte compute types, rows of whole 16-byte vectors up to kWideMaxCols, a row an SM at
//    least: one kernel (<op>.rows), a 512-thread block a row in registers (WideRowsApply);
//  - rows enough for a block each that fit in shared memory: one kernel (<op>.rows);
//  - otherwise two kernels per batch of rows (<op>.stats, <op>.normalize), mapped by
//    PlanRows, or, for an op that holds segments in registers (Op::kSegmentPerThread), the
//    segment kernels when few long rows split into segments that short anyway. The
//    workspace holds StatCapacity(sizeof(Op::Stat)) statistics, so larger shapes run as
//    several batches that all reuse it.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/common/elementwise_program.h"
#include "kernels/cuda/detail/launch.cuh"
#include "kernels/cuda/detail/row_multipass_kernels.cuh"
#include "kernels/cuda/detail/row_plan.cuh"
#include "kernels/cuda/detail/row_resident.cuh"
#include "kernels/cuda/detail/row_smem.cuh"
#include "kernels/cuda/detail/row_wide.cuh"

namespace gpupipe::kernels::cuda::detail {

// Launches (or describes, see Launcher) Op(param) over rows x cols of storage type S from d_in
// to d_out, with d_workspace holding kRowOpsWorkspaceBytes. Never synchronizes or allocates.
template <typename Op, typename S>
cudaError_t DispatchRowMultipass(const S* d_in, S* d_out, int64_t rows, int64_t cols,
                                 typename Op::Param param, const EwProgram& pre,
                                 void* d_workspace, Launcher& launch) {
  using Stat = typename Op::Stat;
  static_assert(std::is_same_v<typename Op::Compute, ComputeOf<S>>, "Op<ComputeOf<S>>");
  static_assert(sizeof(Stat) <= kMaxStatBytes, "the workspace is sized for kMaxStatBytes");
  const Op op(param);
  const int mp = launch.config().multiprocessors;
  const RowPlan plan = PlanRows(rows, cols, mp, sizeof(Stat));
  const RowOpNames names = op.Names();
  auto* d_stats = static_cast<Stat*>(d_workspace);
  if (cols <= kResidentMaxCols) {
    const int c = static_cast<int>(cols);
    if (plan.group && cols <= int64_t{plan.lanes} * kResidentShortPerThread) {
      const int64_t grid = CapGrid(CeilDiv(rows, kRowThreads / plan.lanes), mp);
      return launch(names.rows, RowMultipassRowsKernel<Op, S, kResidentShortPerThread, false>,
                    grid, kRowThreads, d_in, d_out, rows, c, plan.lanes, param, pre);
    }
    // Longer rows: a block per row (many blocks, all of a row's loads in flight at once).
    const int64_t grid = CapGrid(rows, mp);
    if (cols <= kResidentMidMaxCols) {
      const int threads = cols <= int64_t{Op::kNarrowRowThreads} * kResidentMidPerThread
                              ? Op::kNarrowRowThreads
                              : kRowThreads;
      return launch(names.rows, RowMultipassRowsKernel<Op, S, kResidentMidPerThread, true>,
                    grid, threads, d_in, d_out, rows, c, threads, param, pre);
    }
    return launch(names.rows, RowMultipassRowsKernel<Op, S, kResidentPerThread, true>, grid,
                  kRowThreads, d_in, d_out, rows, c, kRowThreads, param, pre);
  }

  if constexpr (sizeof(ComputeOf<S>) == 4) {
    if (WideRowsApply(d_in, d_out, rows, cols, mp)) {
      return launch(names.rows, RowMultipassWideRowsKernel<Op, S>, SegmentGrid(rows, mp),
                    kWideRowThreads, d_in, d_out, rows, static_cast<int>(cols), param, pre);
    }
  }

  const bool out_vec =
      ((reinterpret_cast<uintptr_t>(d_out) - reinterpret_cast<uintptr_t>(d_in)) & 15) == 0;

  // Enough rows for a block each (PlanRows would not split them) that fit in shared memory:
  // one kernel, one read of the input.
  if (!plan.group && plan.splits == 1 && FitsSmemRow<S>(cols, launch.config())) {
    constexpr auto kKernel = RowMultipassSmemRowsKernel<Op, S>;
    if (!launch.describing()) {
      if (const cudaError_t err = OptInSmemRow<kKernel>(); err != cudaSuccess) return err;
    }
    return launch.WithSmem(names.rows, kKernel, CapGrid(rows, mp), kSmemRowThreads,
                           SmemRowBytes<S>(cols), d_in, d_out, rows, static_cast<int>(cols), param,
                           pre, out_vec);
  }

  // Few long rows: split into segments that fit in registers when that many segments are
  // wanted anyway; otherwise the streaming kernels over the plan's segments.
  if constexpr (Op::kSegmentPerThread > 0) {
    constexpr int64_t kSegmentCols = int64_t{kRowThreads} * Op::kSegmentPerThread;
    const RowPlan seg_plan = PlanRows(rows, cols, mp, sizeof(Stat), kSegmentCols);
    if (!seg_plan.group && seg_plan.seg_len <= kSegmentCols) {
      for (int64_t row0 = 0; row0 < rows; row0 += seg_plan.batch_rows) {
        const int64_t n_rows = std::min(seg_plan.batch_rows, rows - row0);
        const S* in = Advance(d_in, row0 * cols);
        S* out = Advance(d_out, row0 * cols);
        const int seg_len = static_cast<int>(seg_plan.seg_len);
        const int64_t grid = CapGrid(n_rows * seg_plan.splits, mp);
        cudaError_t err = launch(names.stats, RowMultipassStatsSegmentKernel<Op, S>, grid,
                                 kRowThreads, in, d_stats, n_rows, cols, seg_plan.splits,
                                 seg_len, param, pre);
        if (err != cudaSuccess) return err;
        err = launch(names.normalize, RowMultipassApplySegmentKernel<Op, S>, grid, kRowThreads,
                     in, out, static_cast<const Stat*>(d_stats), n_rows, cols, seg_plan.splits,
                     seg_len, param, pre);
        if (err != cudaSuccess) return err;
      }
      return cudaSuccess;
    }
  }

  for (int64_t row0 = 0; row0 < rows; row0 += plan.batch_rows) {
    const int64_t n_rows = std::min(plan.batch_rows, rows - row0);
    const S* in = Advance(d_in, row0 * cols);
    S* out = Advance(d_out, row0 * cols);
    cudaError_t err;
    if (plan.group) {
      const int64_t grid = CapGrid(CeilDiv(n_rows, kRowThreads / plan.lanes), mp);
      err = launch(names.stats, RowMultipassStatsGroupKernel<Op, S>, grid, kRowThreads, in,
                   d_stats, n_rows, static_cast<int>(cols), plan.lanes, param, pre);
      if (err != cudaSuccess) return err;
      err = launch(names.normalize, RowMultipassApplyGroupKernel<Op, S>, grid, kRowThreads, in,
                   out, static_cast<const Stat*>(d_stats), n_rows, static_cast<int>(cols),
                   plan.lanes, param, pre);
    } else {
      const int64_t grid = CapGrid(n_rows * plan.splits, mp);
      err = launch(names.stats, RowMultipassStatsBlockKernel<Op, S>, grid, kRowThreads, in,
                   d_stats, n_rows, cols, plan.splits, plan.seg_len, param, pre);
      if (err != cudaSuccess) return err;
      err = launch(names.normalize, RowMultipassApplyBlockKernel<Op, S>, grid, kRowThreads, in,
                   out, static_cast<const Stat*>(d_stats), n_rows, cols, plan.splits,
                   plan.seg_len, param, pre, out_vec);
    }
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace gpupipe::kernels::cuda::detail
