// The kernels of the row multipass ops, one per path, each templated on the op's policy Op
// (row_multipass.cuh says what an Op provides) and the storage type S; the dispatch that picks
// among them is row_multipass_dispatch.cuh.
//
// One kernel, the row read once: register-resident rows (Rows), wide rows in the registers of
// a 512-thread block (WideRows), rows held in shared memory (SmemRows). Two kernels per batch of
// rows, chained with PDL: statistics per segment (a row, or a slice of a long row when there
// are few rows) written to the workspace, then normalization, which merges the row's segment
// statistics and writes the map they define; segments are streamed (Group: lanes of a warp a
// row; Block: a block a segment) or, for ops that ask for it, held in registers (Segment).
// With PDL the statistics kernel of batch k + 1 may start while the normalization kernel of
// batch k still reads the statistics; it waits for that kernel (WaitForPrimaryGrids) before
// its first workspace write, and the normalization kernel waits for the statistics kernel
// before its first read, so each batch sees exactly its own statistics.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/common/elementwise_program.h"
#include "kernels/cuda/detail/element_access.cuh"
#include "kernels/cuda/detail/row_access.cuh"
#include "kernels/cuda/detail/row_multipass.cuh"
#include "kernels/cuda/detail/row_plan.cuh"
#include "kernels/cuda/detail/row_resident.cuh"
#include "kernels/cuda/detail/row_smem.cuh"
#include "kernels/cuda/detail/row_wide.cuh"
#include "kernels/cuda/detail/warp_reduce.cuh"

namespace gpupipe::kernels::cuda::detail {

// ---- single pass (rows that fit in registers) --------------------------------------------------
// The row's values stay in registers (detail/row_resident.cuh): read once, reduced as often as
// the op needs, written once. Two scratch arrays, so that the op may alternate its reductions
// (RowReducer).
template <typename Op, typename S, int K, bool kBlock>
__global__ void __launch_bounds__(kRowThreads)
    RowMultipassRowsKernel(const S* d_in, S* d_out, int64_t rows, int cols, int lanes,
                           typename Op::Param param, EwProgram pre) {
  using C = ComputeOf<S>;
  const Op op(param);
  __shared__ C scratch_a[kWarpSize];
  __shared__ C scratch_b[kWarpSize];
  const ResidentMap<kBlock> map(lanes);
  const RowReducer<kBlock, C> reduce{map.width, scratch_a, scratch_b};
  WaitForPrimaryGrids();

  for (int64_t base = map.first; base < rows; base += map.step) {
    const int64_t row = base + map.sub;
    const bool valid = row < rows;
    const S* p = d_in + (valid ? row : 0) * cols;
    C x[K];
    LoadResident(p, cols, valid, map.l, map.width, pre, x);
    // Every thread of the row reads the first value itself (one cached load) rather than
    // waiting on a broadcast; ApplyEw gives exactly the value ApplyEwN gave its owner.
    const auto y = op.ResidentRow(
        x, cols, [&](int k) { return valid && map.l + k * map.width < cols; },
        [&] { return valid ? ApplyEw(pre, LoadElem(p)) : C(0); }, reduce);
    if (valid) {
      S* out = d_out + row * cols;
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int i = map.l + k * map.width;
        if (i < cols) StoreElem(out + i, y(x[k]));
      }
    }
  }
  AllowDependentGrids();
}

// ---- wide rows (detail/row_wide.cuh: a 512-thread block a row, two blocks an SM) ------------
// The body of RowMultipassRowsKernel on the rows ForEachWideRow hands over.
template <typename Op, typename S>
__global__ void __launch_bounds__(kWideRowThreads, kWideBlocksPerSm)
    RowMultipassWideRowsKernel(const S* d_in, S* d_out, int64_t rows, int cols,
                               typename Op::Param param, EwProgram pre) {
  using C = ComputeOf<S>;
  const Op op(param);
  __shared__ C scratch_a[kWarpSize];
  __shared__ C scratch_b[kWarpSize];
  const RowReducer<true, C> reduce{kWideRowThreads, scratch_a, scratch_b};
  WaitForPrimaryGrids();
  ForEachWideRow(d_in, rows, cols, pre, [&](int64_t row, C (&x)[kWidePerThread]) {
    const S* p = d_in + row * cols;
    const auto y = op.ResidentRow(
        x, cols, [&](int k) { return WideInRow<S>(k, cols); },
        [&] { return ApplyEw(pre, LoadElem(p)); }, reduce);
    StoreWideRow(d_out + row * cols, cols, x, y);
  });
  AllowDependentGrids();
}

// ---- shared-memory path (rows too long for registers, short enough for shared memory) -------
// As the single pass above, with the row in shared memory (detail::SmemRow): one read of the
// input where the two-kernel path reads it twice. The row's closing barrier (EndSmemRow) also
// orders the next row's first reduction after this row's last.
template <typename Op, typename S>
__global__ void __launch_bounds__(kSmemRowThreads, kSmemRowMinBlocksPerSm)
    RowMultipassSmemRowsKernel(const S* d_in, S* d_out, int64_t rows, int cols,
                               typename Op::Param param, EwProgram pre, bool out_vec) {
  using C = ComputeOf<S>;
  const Op op(param);
  extern __shared__ int4 smem_row[];
  __shared__ C scratch_a[kWarpSize];
  __shared__ C scratch_b[kWarpSize];
  const RowReducer<true, C> reduce{kSmemRowThreads, scratch_a, scratch_b};
  WaitForPrimaryGrids();

  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const S* p = d_in + row * cols;
    SmemRow<S> r(reinterpret_cast<C*>(smem_row), p, cols);
    const auto y = op.SharedMemoryRow(r, p, pre, reduce);
    r.Store(d_out + row * cols, out_vec, y);
    EndSmemRow();
  }
  AllowDependentGrids();
}

// ---- group path (short rows: `lanes` lanes of a warp a row) ----------------------------------

template <typename Op, typename S>
__global__ void __launch_bounds__(kRowThreads)
    RowMultipassStatsGroupKernel(const S* d_in, typename Op::Stat* d_stats, int64_t rows,
                                 int cols, int lanes, typename Op::Param param,
                                 EwProgram pre) {
  using C = ComputeOf<S>;
  using Stat = typename Op::Stat;
  const Op op(param);
  const int lane = threadIdx.x % kWarpSize;
  const int rows_per_warp = kWarpSize / lanes;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / kWarpSize;
  // Before the first read of d_in and the first write of d_stats (see the top of the file).
  WaitForPrimaryGrids();

  for (int64_t base = warp * rows_per_warp; base < rows; base += warps * rows_per_warp) {
    const int64_t row = base + lane / lanes;
    Stat st = op.Empty();
    if (row < rows) {
      VisitShortRow<kRowUnroll>(d_in + row * cols, cols, lane % lanes, lanes,
                                [&](int, C x) { op.Push(st, ApplyEw(pre, x)); });
    }
    st = WarpAllReduce(st, [&](Stat a, Stat b) { return op.Merge(a, b); }, lanes);
    if (row < rows && lane % lanes == 0) d_stats[row] = st;
  }
  AllowDependentGrids();
}

template <typename Op, typename S>
__global__ void __launch_bounds__(kRowThreads)
    RowMultipassApplyGroupKernel(const S* d_in, S* d_out, const typename Op::Stat* d_stats,
                                 int64_t rows, int cols, int lanes, typename Op::Param param,
                                 EwProgram pre) {
  using C = ComputeOf<S>;
  const Op op(param);
  const int lane = threadIdx.x % kWarpSize;
  const int l = lane % lanes;
  const int rows_per_warp = kWarpSize / lanes;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / kWarpSize;

  // Prologue, independent of the statistics: this lane's first row slice towards L2.
  PrefetchRowSlice(d_in, rows, cols, warp * rows_per_warp + lane / lanes, l, lanes);
  WaitForPrimaryGrids();

  for (int64_t base = warp * rows_per_warp; base < rows; base += warps * rows_per_warp) {
    const int64_t row = base + lane / lanes;
    if (row >= rows) continue;  // no collectives below
    const auto y = op.Transform(op.Summarize(LoadThroughL2(&d_stats[row]), cols));
    S* out = d_out + row * cols;
    VisitShortRow<kRowUnroll>(d_in + row * cols, cols, l, lanes, [&](int i, C x) {
      StoreElem(out + i, y(ApplyEw(pre, x)));
    });
  }
  AllowDependentGrids();
}

// ---- block path (long rows, optionally split into streamed segments) ---------------------------

template <typename Op, typename S>
__global__ void __launch_bounds__(kRowThreads, kRowBlockMinBlocksPerSm)
    RowMultipassStatsBlockKernel(const S* d_in, typename Op::Stat* d_stats, int64_t rows,
                                 int64_t cols, int64_t splits, int64_t seg_len,
                                 typename Op::Param param, EwProgram pre) {
  using C = ComputeOf<S>;
  using Stat = typename Op::Stat;
  const Op op(param);
  __shared__ Stat scratch[kWarpSize];
  const int64_t segments = rows * splits;
  // Before the first read of d_in and the first write of d_stats (see the top of the file).
  WaitForPrimaryGrids();

  for (int64_t seg = blockIdx.x; seg < segments; seg += gridDim.x) {
    const int64_t row = seg / splits;
    const int64_t begin = (seg - row * splits) * seg_len;
    const int64_t len = min(seg_len, cols - begin);
    Stat st = op.Empty();
    VisitSegment<kRowUnroll>(
        d_in + row * cols + begin, len, threadIdx.x, blockDim.x,
        [&](int64_t, C x) { op.Push(st, ApplyEw(pre, x)); },
        [&](int64_t, C (&x)[kVecElems<S>]) {
          ApplyEwN(pre, x);
          op.PushVec(st, x);
        });
    st = BlockReduce(st, [&](Stat a, Stat b) { return op.Merge(a, b); }, op.Empty(), scratch);
    if (threadIdx.x == 0) d_stats[seg] = st;
    __syncthreads();  // scratch is reused by the next segment
  }
  AllowDependentGrids();
}

template <typename Op, typename S>
__global__ void __launch_bounds__(kRowThreads, kRowBlockMinBlocksPerSm)
    RowMultipassApplyBlockKernel(const S* d_in, S* d_out, const typename Op::Stat* d_stats,
                                 int64_t rows, int64_t cols, int64_t splits, int64_t seg_len,
                                 typename Op::Param param, EwProgram pre, bool out_vec) {
  using C = ComputeOf<S>;
  using Stat = typename Op::Stat;
  const Op op(param);
  __shared__ typename Op::Summary row_summary;
  const int64_t segments = rows * splits;

  // Prologue, independent of the statistics: the start of this block's first segment towards
  // L2 while the statistics kernel drains.
  PrefetchFirstSegment(d_in, cols, splits, seg_len, segments);
  WaitForPrimaryGrids();

  for (int64_t seg = blockIdx.x; seg < segments; seg += gridDim.x) {
    const int64_t row = seg / splits;
    const int64_t begin = (seg - row * splits) * seg_len;
    const int64_t len = min(seg_len, cols - begin);

    // One warp merges the row's segment statistics (splits is at most a few hundred).
    if (threadIdx.x < kWarpSize) {
      Stat st = op.Empty();
      // Unrolled so several partials are in flight: splits reaches a few hundred.
#pragma unroll 4
      for (int64_t k = threadIdx.x; k < splits; k += kWarpSize) {
        st = op.Merge(st, LoadThroughL2(&d_stats[row * splits + k]));
      }
      st = WarpAllReduce(st, [&](Stat a, Stat b) { return op.Merge(a, b); });
      if (threadIdx.x == 0) row_summary = op.Summarize(st, cols);
    }
    __syncthreads();
    const auto y = op.Transform(row_summary);

    // out and in rows differ by the constant d_out - d_in, so out + i is 16-byte aligned for
    // every body vector exactly when out_vec says so.
    S* out = d_out + row * cols + begin;
    VisitSegment<kRowUnroll>(
        d_in + row * cols + begin, len, threadIdx.x, blockDim.x,
        [&](int64_t i, C x) { StoreElem(out + i, y(ApplyEw(pre, x))); },
        [&](int64_t i, C (&x)[kVecElems<S>]) {
          ApplyEwN(pre, x);
#pragma unroll
          for (int k = 0; k < kVecElems<S>; ++k) x[k] = y(x[k]);
          StoreVec<S>(out + i, x, out_vec);
        });
    __syncthreads();  // row_summary is rewritten for the next segment
  }
  AllowDependentGrids();
}

// ---- segment path (long rows split into register-resident segments; Op::kSegmentPerThread) ---
// Each block holds its segment of at most kRowThreads * Op::kSegmentPerThread columns in
// registers: exact statistics per segment, and the normalization loads its segment before
// waiting on them.

template <typename Op, typename S>
__global__ void __launch_bounds__(kRowThreads, kRowBlockMinBlocksPerSm)
    RowMultipassStatsSegmentKernel(const S* d_in, typename Op::Stat* d_stats, int64_t rows,
                                   int64_t cols, int64_t splits, int seg_len,
                                   typename Op::Param param, EwProgram pre) {
  using C = ComputeOf<S>;
  using Stat = typename Op::Stat;
  const Op op(param);
  __shared__ C scratch_a[kWarpSize];
  __shared__ C scratch_b[kWarpSize];
  const RowReducer<true, C> reduce{kRowThreads, scratch_a, scratch_b};
  const int64_t segments = rows * splits;
  // Before the first read of d_in and the first write of d_stats (see the top of the file).
  WaitForPrimaryGrids();
  // Triggered right after the wait so that the normalization kernel's launch, and its
  // prologue loads, overlap this kernel. The order matters: the normalization kernel reads
  // d_in before its own wait, which is sound only because every block of this kernel has
  // passed its wait (so every kernel before this one has completed and d_in is final) before
  // its trigger, and the dependent cannot start before all blocks have triggered.
  AllowDependentGrids();

  for (int64_t seg = blockIdx.x; seg < segments; seg += gridDim.x) {
    const int64_t row = seg / splits;
    const int64_t begin = (seg - row * splits) * seg_len;
    const int len = static_cast<int>(min(static_cast<int64_t>(seg_len), cols - begin));
    C x[Op::kSegmentPerThread];
    LoadResident(d_in + row * cols + begin, len, true, threadIdx.x, blockDim.x, pre, x);
    const Stat st = op.SegmentStat(
        x, [&](int k) { return threadIdx.x + k * blockDim.x < len; }, reduce);
    if (threadIdx.x == 0) d_stats[seg] = st;
  }
}

template <typename Op, typename S>
__global__ void __launch_bounds__(kRowThreads, kRowBlockMinBlocksPerSm)
    RowMultipassApplySegmentKernel(const S* d_in, S* d_out, const typename Op::Stat* d_stats,
                                   int64_t rows, int64_t cols, int64_t splits, int seg_len,
                                   typename Op::Param param, EwProgram pre) {
  using C = ComputeOf<S>;
  const Op op(param);
  __shared__ typename Op::Summary row_summary;
  const int64_t segments = rows * splits;
  C x[Op::kSegmentPerThread];
  auto load = [&](int64_t seg) {
    const int64_t row = seg / splits;
    const int64_t begin = (seg - row * splits) * seg_len;
    const int len = static_cast<int>(min(static_cast<int64_t>(seg_len), cols - begin));
    LoadResident(d_in + row * cols + begin, len, true, threadIdx.x, blockDim.x, pre, x);
  };

  // Prologue: this block's first segment, read before the wait. The exception to the
  // wait-before-reading rule (detail::LaunchKernel) holds only here: the primary is the
  // statistics kernel, which never writes d_in and triggers only after its own wait (see
  // there), so d_in is final once this grid runs. Writes still come after the wait.
  if (blockIdx.x < segments) load(blockIdx.x);
  WaitForPrimaryGrids();

  for (int64_t seg = blockIdx.x; seg < segments; seg += gridDim.x) {
    const int64_t row = seg / splits;
    const int64_t begin = (seg - row * splits) * seg_len;
    const int len = static_cast<int>(min(static_cast<int64_t>(seg_len), cols - begin));
    if (seg != blockIdx.x) load(seg);

    // One warp merges the row's statistics.
    if (threadIdx.x < kWarpSize) {
      const typename Op::Stat st = op.MergeSegmentStats(d_stats + row * splits, splits);
      if (threadIdx.x == 0) row_summary = op.Summarize(st, cols);
    }
    __syncthreads();
    const auto y = op.Transform(row_summary);
    S* out = d_out + row * cols + begin;
#pragma unroll
    for (int k = 0; k < Op::kSegmentPerThread; ++k) {
      const int i = threadIdx.x + k * blockDim.x;
      if (i < len) StoreElem(out + i, y(x[k]));
    }
    __syncthreads();  // row_summary is rewritten for the next segment
  }
  AllowDependentGrids();
}

}  // namespace gpupipe::kernels::cuda::detail
