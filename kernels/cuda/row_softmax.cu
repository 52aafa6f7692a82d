// RowSoftmax: entry points and dispatch. Rows of up to detail::kResidentMaxCols columns: one
// kernel (softmax.rows) holding each row in registers. Longer rows: two kernels per batch of
// rows, chained with PDL:
//  1. statistics: an online softmax {max, sum of exp(x - max)} per segment (a row, or a
//     slice of a long row when there are few rows), written to the workspace;
//  2. normalization: merges the row's segment statistics and writes exp(x - m) / s.
// Rows are mapped as in RowReduce (detail::PlanRows). When few rows are split into segments
// of at most kSegmentCols columns, each block holds its segment in registers: exact
// statistics per segment, and the normalization loads its segment before waiting. The
// workspace holds detail::StatCapacity(8) statistics, so a shape with more segments than that
// runs as several batches of both kernels, all reusing the workspace. With PDL the statistics kernel of batch
// k + 1 may start while the normalization kernel of batch k still reads the statistics; it
// waits for that kernel (WaitForPrimaryGrids) before its first workspace write, and the
// normalization kernel waits for the statistics kernel before its first read, so each batch
// sees exactly its own statistics.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cuda/detail/launch.cuh"
#include "kernels/cuda/detail/row_access.cuh"
#include "kernels/cuda/detail/row_plan.cuh"
#include "kernels/cuda/detail/row_resident.cuh"
#include "kernels/cuda/detail/row_smem.cuh"
#include "kernels/cuda/detail/row_wide.cuh"
#include "kernels/cuda/detail/warp_reduce.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/tuning/row_normalize_policy.h"

namespace gpupipe::kernels::cuda {
namespace {

using detail::ComputeOf;
using detail::kRowBlockMinBlocksPerSm;
using detail::kRowThreads;
using detail::kRowUnroll;
using detail::kVecElems;
using detail::kWarpSize;
using detail::SoftmaxStat;


// Block-per-row rows of at most kNarrowRowThreads * kResidentMidPerThread columns run with
// blocks of kNarrowRowThreads threads, so that each thread holds kResidentMidPerThread values
// (RowSoftmaxPolicy says why).
constexpr int kNarrowRowThreads = tuning::RowSoftmaxPolicy::kNarrowThreads;

// Split long rows whose segments fit in registers (kRowThreads * kSegmentPerThread columns):
// each block holds its segment, so the statistics are an exact max, then a sum of
// exp(x - max) (no online rescaling per element), and the normalization loads its segment
// before waiting on the statistics.
constexpr int kSegmentPerThread = tuning::RowSoftmaxPolicy::kSegmentPerThread;
constexpr int64_t kSegmentCols = int64_t{kRowThreads} * kSegmentPerThread;

// 1 / s for the normalization. A +inf in the row leaves m = +inf with a finite s; the
// reference (exp(inf - inf) in the sum) gives NaN for the whole row, so match that.
template <typename C>
__device__ __forceinline__ C InverseSum(SoftmaxStat<C> st) {
  return st.m == detail::Infinity<C>() ? C(NAN) : C(1) / st.s;
}

// ---- single pass (rows that fit in registers) --------------------------------------------------
// The row's values stay in registers: exact max, then sum of exp(x - max) (one expf per
// element, no online rescaling), then the write. Same results as the two-kernel path up to
// float rounding: y = exp(x - m) * (1 / s), with an +inf (m = +inf) or a NaN making s, and so
// the row, NaN, and an all -inf row NaN (exp(-inf - -inf)), as the reference.
template <typename S, int K, bool kBlock>
__global__ void __launch_bounds__(kRowThreads)
    SoftmaxRowsKernel(const S* d_in, S* d_out, int64_t rows, int cols, int lanes,
                      EwProgram pre) {
  using C = ComputeOf<S>;
  // One scratch array per reduction (see RowAllReduceAlternating).
  __shared__ C scratch_max[kWarpSize];
  __shared__ C scratch_sum[kWarpSize];
  const detail::ResidentMap<kBlock> map(lanes);
  detail::WaitForPrimaryGrids();

  for (int64_t base = map.first; base < rows; base += map.step) {
    const int64_t row = base + map.sub;
    const bool valid = row < rows;
    const S* p = d_in + (valid ? row : 0) * cols;
    C x[K];
    detail::LoadResident(p, cols, valid, map.l, map.width, pre, x);
    C m = -detail::Infinity<C>();
#pragma unroll
    for (int k = 0; k < K; ++k) {
      if (valid && map.l + k * map.width < cols) m = detail::MathMax(m, x[k]);
    }
    m = detail::RowAllReduceAlternating<kBlock>(m, detail::MaxOp{}, -detail::Infinity<C>(), map.width,
                                                scratch_max);
    C s = C(0);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      x[k] = detail::MathExp(x[k] - m);
      if (valid && map.l + k * map.width < cols) s += x[k];
    }
    s = detail::RowAllReduceAlternating<kBlock>(s, detail::SumOp{}, C(0), map.width,
                                                scratch_sum);
    const C inv = C(1) / s;
    if (valid) {
      S* out = d_out + row * cols;
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int i = map.l + k * map.width;
        if (i < cols) detail::StoreElem(out + i, x[k] * inv);
      }
    }
  }
  detail::AllowDependentGrids();
}

// ---- wide rows (detail/row_wide.cuh: one block per SM, the next row prefetched) -------------
// The body of SoftmaxRowsKernel on the rows ForEachWideRow hands over.
template <typename S>
__global__ void __launch_bounds__(detail::kWideRowThreads, 1)
    SoftmaxWideRowsKernel(const S* d_in, S* d_out, int64_t rows, int cols, EwProgram pre) {
  using C = ComputeOf<S>;
  __shared__ C scratch_max[kWarpSize];
  __shared__ C scratch_sum[kWarpSize];
  extern __shared__ uint4 wide_row[];
  detail::WaitForPrimaryGrids();
  detail::ForEachWideRow(d_in, rows, cols, pre, wide_row, [&](int64_t row, C (&x)[detail::kWidePerThread]) {
    C m = -detail::Infinity<C>();
#pragma unroll
    for (int k = 0; k < detail::kWidePerThread; ++k) {
      if (detail::WideInRow<S>(k, cols)) m = detail::MathMax(m, x[k]);
    }
    m = detail::RowAllReduceAlternating<true>(m, detail::MaxOp{}, -detail::Infinity<C>(),
                                              detail::kWideRowThreads, scratch_max);
    C s = C(0);
#pragma unroll
    for (int k = 0; k < detail::kWidePerThread; ++k) {
      x[k] = detail::MathExp(x[k] - m);
      if (detail::WideInRow<S>(k, cols)) s += x[k];
    }
    s = detail::RowAllReduceAlternating<true>(s, detail::SumOp{}, C(0), detail::kWideRowThreads,
                                              scratch_sum);
    const C inv = C(1) / s;
    detail::StoreWideRow(d_out + row * cols, cols, x, [inv](C v) { return v * inv; });
  });
  detail::AllowDependentGrids();
}

// ---- shared-memory path (rows too long for registers, short enough for shared memory) -------
// As the single pass above, with the row in shared memory (detail::SmemRow): the max is taken
// while loading, exp(x - max) replaces each value in place while summing, and the write
// multiplies by 1 / s, so the results are those of SoftmaxRowsKernel up to summation order.
// One read of the input where the two-kernel path reads it twice. The max is the only statistic
// taken while loading: the online statistics {max, sum of exp} folded into the load pass, with
// one reduction and the exp in the write, would put an exp and its branch in the load loop,
// which slows the loads more than the extra pass over shared memory costs.
template <typename S>
__global__ void __launch_bounds__(detail::kSmemRowThreads, detail::kSmemRowMinBlocksPerSm)
    SoftmaxSmemRowsKernel(const S* d_in, S* d_out, int64_t rows, int cols, EwProgram pre,
                          bool out_vec) {
  using C = ComputeOf<S>;
  extern __shared__ int4 smem_row[];
  __shared__ C scratch_max[kWarpSize];
  __shared__ C scratch_sum[kWarpSize];
  detail::WaitForPrimaryGrids();

  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const S* p = d_in + row * cols;
    detail::SmemRow<S> r(reinterpret_cast<C*>(smem_row), p, cols);
    C m = -detail::Infinity<C>();
    r.Load(p, pre, [&](C x) { m = detail::MathMax(m, x); });
    m = detail::RowAllReduceAlternating<true>(m, detail::MaxOp{}, -detail::Infinity<C>(),
                                              blockDim.x, scratch_max);
    C s = C(0);
    r.Update([&](C& x) {
      x = detail::MathExp(x - m);
      s += x;
    });
    s = detail::RowAllReduceAlternating<true>(s, detail::SumOp{}, C(0), blockDim.x,
                                              scratch_sum);
    const C inv = C(1) / s;
    r.Store(d_out + row * cols, out_vec, [&](C x) { return x * inv; });
    detail::EndSmemRow();
  }
  detail::AllowDependentGrids();
}

// ---- group path (short rows) -----------------------------------------------------------------

template <typename S>
__global__ void __launch_bounds__(kRowThreads)
    SoftmaxStatsGroupKernel(const S* d_in, SoftmaxStat<ComputeOf<S>>* d_stats,
                            int64_t rows, int cols, int lanes, EwProgram pre) {
  using C = ComputeOf<S>;
  const int lane = threadIdx.x % kWarpSize;
  const int rows_per_warp = kWarpSize / lanes;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / kWarpSize;
  // Before the first read of d_in and the first write of d_stats (see the top of the file).
  detail::WaitForPrimaryGrids();

  for (int64_t base = warp * rows_per_warp; base < rows; base += warps * rows_per_warp) {
    const int64_t row = base + lane / lanes;
    SoftmaxStat<C> st = detail::EmptySoftmaxStat<C>();
    if (row < rows) {
      detail::VisitShortRow<kRowUnroll>(d_in + row * cols, cols, lane % lanes, lanes,
                                        [&](int, C x) { PushSoftmax(st, ApplyEw(pre, x)); });
    }
    st = detail::WarpAllReduce(st, detail::SoftmaxMergeOp{}, lanes);
    if (row < rows && lane % lanes == 0) d_stats[row] = st;
  }
  detail::AllowDependentGrids();
}

template <typename S>
__global__ void __launch_bounds__(kRowThreads)
    SoftmaxNormGroupKernel(const S* d_in, S* d_out,
                           const SoftmaxStat<ComputeOf<S>>* d_stats, int64_t rows, int cols,
                           int lanes, EwProgram pre) {
  using C = ComputeOf<S>;
  const int lane = threadIdx.x % kWarpSize;
  const int l = lane % lanes;
  const int rows_per_warp = kWarpSize / lanes;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / kWarpSize;

  // Prologue, independent of the statistics: this lane's first row slice towards L2.
  detail::PrefetchRowSlice(d_in, rows, cols, warp * rows_per_warp + lane / lanes, l, lanes);
  detail::WaitForPrimaryGrids();

  for (int64_t base = warp * rows_per_warp; base < rows; base += warps * rows_per_warp) {
    const int64_t row = base + lane / lanes;
    if (row >= rows) continue;  // no collectives below
    const SoftmaxStat<C> st = detail::LoadThroughL2(&d_stats[row]);
    const C inv = InverseSum(st);
    S* out = d_out + row * cols;
    detail::VisitShortRow<kRowUnroll>(d_in + row * cols, cols, l, lanes, [&](int i, C x) {
      detail::StoreElem(out + i, detail::MathExp(ApplyEw(pre, x) - st.m) * inv);
    });
  }
  detail::AllowDependentGrids();
}

// ---- block path (long rows, optionally split) --------------------------------------------------

template <typename S>
__global__ void __launch_bounds__(kRowThreads, kRowBlockMinBlocksPerSm)
    SoftmaxStatsBlockKernel(const S* d_in, SoftmaxStat<ComputeOf<S>>* d_stats,
                            int64_t rows, int64_t cols, int64_t splits, int64_t seg_len,
                            EwProgram pre) {
  using C = ComputeOf<S>;
  __shared__ SoftmaxStat<C> scratch[kWarpSize];
  const int64_t segments = rows * splits;
  // Before the first read of d_in and the first write of d_stats (see the top of the file).
  detail::WaitForPrimaryGrids();

  for (int64_t seg = blockIdx.x; seg < segments; seg += gridDim.x) {
    const int64_t row = seg / splits;
    const int64_t begin = (seg - row * splits) * seg_len;
    const int64_t len = min(seg_len, cols - begin);
    SoftmaxStat<C> st = detail::EmptySoftmaxStat<C>();
    detail::VisitSegment<kRowUnroll>(
        d_in + row * cols + begin, len, threadIdx.x, blockDim.x,
        [&](int64_t, C x) { PushSoftmax(st, ApplyEw(pre, x)); },
        [&](int64_t, C (&x)[kVecElems<S>]) {
          ApplyEwN(pre, x);
#pragma unroll
          for (int k = 0; k < kVecElems<S>; ++k) PushSoftmax(st, x[k]);
        });
    st = detail::BlockReduce(st, detail::SoftmaxMergeOp{}, detail::EmptySoftmaxStat<C>(), scratch);
    if (threadIdx.x == 0) d_stats[seg] = st;
    __syncthreads();  // scratch is reused by the next segment
  }
  detail::AllowDependentGrids();
}

template <typename S>
__global__ void __launch_bounds__(kRowThreads, kRowBlockMinBlocksPerSm)
    SoftmaxNormBlockKernel(const S* d_in, S* d_out,
                           const SoftmaxStat<ComputeOf<S>>* d_stats, int64_t rows, int64_t cols,
                           int64_t splits, int64_t seg_len, EwProgram pre, bool out_vec) {
  using C = ComputeOf<S>;
  __shared__ SoftmaxStat<C> row_stat;
  const int64_t segments = rows * splits;

  // Prologue, independent of the statistics: the start of this block's first segment towards
  // L2 while the statistics kernel drains.
  detail::PrefetchFirstSegment(d_in, cols, splits, seg_len, segments);
  detail::WaitForPrimaryGrids();

  for (int64_t seg = blockIdx.x; seg < segments; seg += gridDim.x) {
    const int64_t row = seg / splits;
    const int64_t begin = (seg - row * splits) * seg_len;
    const int64_t len = min(seg_len, cols - begin);

    // One warp merges the row's segment statistics (splits is at most a few hundred).
    if (threadIdx.x < kWarpSize) {
      SoftmaxStat<C> st = detail::EmptySoftmaxStat<C>();
      // Unrolled so several partials are in flight: splits reaches a few hundred.
#pragma unroll 4
      for (int64_t k = threadIdx.x; k < splits; k += kWarpSize) {
        st = detail::MergeSoftmax(st, detail::LoadThroughL2(&d_stats[row * splits + k]));
      }
      st = detail::WarpAllReduce(st, detail::SoftmaxMergeOp{});
      if (threadIdx.x == 0) row_stat = st;
    }
    __syncthreads();
    const SoftmaxStat<C> st = row_stat;
    const C inv = InverseSum(st);

    // out and in rows differ by the constant d_out - d_in, so out + i is 16-byte aligned for
    // every body vector exactly when out_vec says so.
    S* out = d_out + row * cols + begin;
    detail::VisitSegment<kRowUnroll>(
        d_in + row * cols + begin, len, threadIdx.x, blockDim.x,
        [&](int64_t i, C x) { detail::StoreElem(out + i, detail::MathExp(ApplyEw(pre, x) - st.m) * inv); },
        [&](int64_t i, C (&x)[kVecElems<S>]) {
          ApplyEwN(pre, x);
#pragma unroll
          for (int k = 0; k < kVecElems<S>; ++k) x[k] = detail::MathExp(x[k] - st.m) * inv;
          detail::StoreVec<S>(out + i, x, out_vec);
        });
    __syncthreads();  // row_stat is rewritten for the next segment
  }
  detail::AllowDependentGrids();
}

// ---- segment path (long rows split into register-resident segments) ---------------------------

// Statistics {max, sum of exp(x - max)} of each segment of at most kSegmentCols columns.
// -inf elements contribute exactly 0, so an all -inf segment gives {-inf, 0} (not NaN) and
// drops out of the row's merge; a NaN element makes s NaN.
template <typename S>
__global__ void __launch_bounds__(kRowThreads, kRowBlockMinBlocksPerSm)
    SoftmaxStatsSegmentKernel(const S* d_in, SoftmaxStat<ComputeOf<S>>* d_stats, int64_t rows,
                              int64_t cols, int64_t splits, int seg_len, EwProgram pre) {
  using C = ComputeOf<S>;
  __shared__ C scratch_max[kWarpSize];
  __shared__ C scratch_sum[kWarpSize];
  const int64_t segments = rows * splits;
  // Before the first read of d_in and the first write of d_stats (see the top of the file).
  detail::WaitForPrimaryGrids();
  // Triggered right after the wait so that the normalization kernel's launch, and its
  // prologue loads, overlap this kernel. The order matters: the normalization kernel reads
  // d_in before its own wait, which is sound only because every block of this kernel has
  // passed its wait (so every kernel before this one has completed and d_in is final) before
  // its trigger, and the dependent cannot start before all blocks have triggered.
  detail::AllowDependentGrids();

  for (int64_t seg = blockIdx.x; seg < segments; seg += gridDim.x) {
    const int64_t row = seg / splits;
    const int64_t begin = (seg - row * splits) * seg_len;
    const int len = static_cast<int>(min(static_cast<int64_t>(seg_len), cols - begin));
    C x[kSegmentPerThread];
    detail::LoadResident(d_in + row * cols + begin, len, true, threadIdx.x, blockDim.x, pre, x);
    C m = -detail::Infinity<C>();
#pragma unroll
    for (int k = 0; k < kSegmentPerThread; ++k) {
      if (threadIdx.x + k * blockDim.x < len) m = detail::MathMax(m, x[k]);
    }
    m = detail::RowAllReduceAlternating<true>(m, detail::MaxOp{}, -detail::Infinity<C>(), blockDim.x,
                                              scratch_max);
    C s = C(0);
#pragma unroll
    for (int k = 0; k < kSegmentPerThread; ++k) {
      if (threadIdx.x + k * blockDim.x < len && x[k] != -detail::Infinity<C>()) s += detail::MathExp(x[k] - m);
    }
    s = detail::RowAllReduceAlternating<true>(s, detail::SumOp{}, C(0), blockDim.x,
                                              scratch_sum);
    if (threadIdx.x == 0) d_stats[seg] = {m, s};
  }
}

template <typename S>
__global__ void __launch_bounds__(kRowThreads, kRowBlockMinBlocksPerSm)
    SoftmaxNormSegmentKernel(const S* d_in, S* d_out, const SoftmaxStat<ComputeOf<S>>* d_stats,
                             int64_t rows, int64_t cols, int64_t splits, int seg_len,
                             EwProgram pre) {
  using C = ComputeOf<S>;
  __shared__ SoftmaxStat<C> row_stat;
  const int64_t segments = rows * splits;
  C x[kSegmentPerThread];
  auto load = [&](int64_t seg) {
    const int64_t row = seg / splits;
    const int64_t begin = (seg - row * splits) * seg_len;
    const int len = static_cast<int>(min(static_cast<int64_t>(seg_len), cols - begin));
    detail::LoadResident(d_in + row * cols + begin, len, true, threadIdx.x, blockDim.x, pre, x);
  };

  // Prologue: this block's first segment, read before the wait. The exception to the
  // wait-before-reading rule (detail::LaunchKernel) holds only here: the primary is the
  // statistics kernel, which never writes d_in and triggers only after its own wait (see
  // there), so d_in is final once this grid runs. Writes still come after the wait.
  if (blockIdx.x < segments) load(blockIdx.x);
  detail::WaitForPrimaryGrids();

  for (int64_t seg = blockIdx.x; seg < segments; seg += gridDim.x) {
    const int64_t row = seg / splits;
    const int64_t begin = (seg - row * splits) * seg_len;
    const int len = static_cast<int>(min(static_cast<int64_t>(seg_len), cols - begin));
    if (seg != blockIdx.x) load(seg);

    // One warp merges the row's statistics: the max first, then the rescaled sums, so the
    // expf calls are independent rather than a chain of pairwise merges.
    if (threadIdx.x < kWarpSize) {
      const SoftmaxStat<C>* st = d_stats + row * splits;
      C m = -detail::Infinity<C>();
#pragma unroll 4
      for (int64_t k = threadIdx.x; k < splits; k += kWarpSize) {
        m = detail::MathMax(m, detail::LoadThroughL2(&st[k]).m);
      }
      m = detail::WarpAllReduce(m, detail::MaxOp{});
      C s = C(0);
#pragma unroll 4
      for (int64_t k = threadIdx.x; k < splits; k += kWarpSize) {
        const SoftmaxStat<C> p = detail::LoadThroughL2(&st[k]);
        // An empty ({-inf, 0}) segment adds 0, even when m is -inf too (exp would give NaN).
        s += p.s == C(0) ? C(0) : p.s * detail::MathExp(p.m - m);
      }
      s = detail::WarpAllReduce(s, detail::SumOp{});
      if (threadIdx.x == 0) row_stat = {m, s};
    }
    __syncthreads();
    const SoftmaxStat<C> st = row_stat;
    const C inv = InverseSum(st);
    S* out = d_out + row * cols + begin;
#pragma unroll
    for (int k = 0; k < kSegmentPerThread; ++k) {
      const int i = threadIdx.x + k * blockDim.x;
      if (i < len) detail::StoreElem(out + i, detail::MathExp(x[k] - st.m) * inv);
    }
    __syncthreads();  // row_stat is rewritten for the next segment
  }
  detail::AllowDependentGrids();
}

// The one sizing/dispatch path, for launching and for describing.
template <typename S>
cudaError_t DispatchRowSoftmax(const S* d_in, S* d_out, int64_t rows, int64_t cols,
                               const EwProgram& pre, void* d_workspace,
                               detail::Launcher& launch) {
  using C = ComputeOf<S>;
  const int mp = launch.config().multiprocessors;
  const detail::RowPlan plan = detail::PlanRows(rows, cols, mp, sizeof(SoftmaxStat<C>));
  auto* d_stats = static_cast<SoftmaxStat<C>*>(d_workspace);
  if (cols <= detail::kResidentMaxCols) {
    const int c = static_cast<int>(cols);
    if (plan.group && cols <= int64_t{plan.lanes} * detail::kResidentShortPerThread) {
      const int64_t grid = detail::CapGrid(detail::CeilDiv(rows, kRowThreads / plan.lanes), mp);
      return launch("softmax.rows", SoftmaxRowsKernel<S, detail::kResidentShortPerThread, false>, grid,
                    kRowThreads, d_in, d_out, rows, c, plan.lanes, pre);
    }
    // Longer rows: a block per row (many blocks, all of a row's loads in flight at once).
    const int64_t grid = detail::CapGrid(rows, mp);
    if (cols <= detail::kResidentMidMaxCols) {
      const int threads = cols <= int64_t{kNarrowRowThreads} * detail::kResidentMidPerThread
                              ? kNarrowRowThreads
                              : kRowThreads;
      return launch("softmax.rows", SoftmaxRowsKernel<S, detail::kResidentMidPerThread, true>, grid,
                    threads, d_in, d_out, rows, c, threads, pre);
    }
    return launch("softmax.rows", SoftmaxRowsKernel<S, detail::kResidentPerThread, true>, grid,
                  kRowThreads, d_in, d_out, rows, c, kRowThreads, pre);
  }

  if constexpr (sizeof(C) == 4) {
    if (detail::WideRowsApply(d_in, d_out, rows, cols, mp)) {
      return detail::LaunchWideRows<SoftmaxWideRowsKernel<S>, S>(
          launch, "softmax.rows", rows, cols, d_in, d_out, rows, static_cast<int>(cols), pre);
    }
  }

  const bool out_vec =
      ((reinterpret_cast<uintptr_t>(d_out) - reinterpret_cast<uintptr_t>(d_in)) & 15) == 0;

  // Enough rows for a block each (PlanRows would not split them) that fit in shared memory:
  // one kernel, one read of the input.
  if (!plan.group && plan.splits == 1 && detail::FitsSmemRow<S>(cols, launch.config())) {
    constexpr auto kKernel = SoftmaxSmemRowsKernel<S>;
    if (!launch.describing()) {
      if (const cudaError_t err = detail::OptInSmemRow<kKernel>(); err != cudaSuccess) return err;
    }
    return launch.WithSmem("softmax.rows", kKernel, detail::CapGrid(rows, mp),
                           detail::kSmemRowThreads, detail::SmemRowBytes<S>(cols), d_in, d_out,
                           rows, static_cast<int>(cols), pre, out_vec);
  }

  // Few long rows: split into segments that fit in registers when that many segments are
  // wanted anyway; otherwise the streaming kernels over the plan's segments.
  const detail::RowPlan seg_plan =
      detail::PlanRows(rows, cols, mp, sizeof(SoftmaxStat<C>), kSegmentCols);
  if (!seg_plan.group && seg_plan.seg_len <= kSegmentCols) {
    for (int64_t row0 = 0; row0 < rows; row0 += seg_plan.batch_rows) {
      const int64_t n_rows = std::min(seg_plan.batch_rows, rows - row0);
      const S* in = detail::Advance(d_in, row0 * cols);
      S* out = detail::Advance(d_out, row0 * cols);
      const int seg_len = static_cast<int>(seg_plan.seg_len);
      const int64_t grid = detail::CapGrid(n_rows * seg_plan.splits, mp);
      cudaError_t err = launch("softmax.stats", SoftmaxStatsSegmentKernel<S>, grid, kRowThreads, in,
                               d_stats, n_rows, cols, seg_plan.splits, seg_len, pre);
      if (err != cudaSuccess) return err;
      err = launch("softmax.normalize", SoftmaxNormSegmentKernel<S>, grid, kRowThreads, in, out,
                   static_cast<const SoftmaxStat<C>*>(d_stats), n_rows, cols, seg_plan.splits,
                   seg_len, pre);
      if (err != cudaSuccess) return err;
    }
    return cudaSuccess;
  }

  for (int64_t row0 = 0; row0 < rows; row0 += plan.batch_rows) {
    const int64_t n_rows = std::min(plan.batch_rows, rows - row0);
    const S* in = detail::Advance(d_in, row0 * cols);
    S* out = detail::Advance(d_out, row0 * cols);
    cudaError_t err;
    if (plan.group) {
      const int64_t grid =
          detail::CapGrid(detail::CeilDiv(n_rows, kRowThreads / plan.lanes), mp);
      err = launch("softmax.stats", SoftmaxStatsGroupKernel<S>, grid, kRowThreads, in, d_stats,
                   n_rows, static_cast<int>(cols), plan.lanes, pre);
      if (err != cudaSuccess) return err;
      err = launch("softmax.normalize", SoftmaxNormGroupKernel<S>, grid, kRowThreads, in, out,
                   static_cast<const SoftmaxStat<C>*>(d_stats), n_rows, static_cast<int>(cols),
                   plan.lanes, pre);
    } else {
      const int64_t grid = detail::CapGrid(n_rows * plan.splits, mp);
      err = launch("softmax.stats", SoftmaxStatsBlockKernel<S>, grid, kRowThreads, in, d_stats,
                   n_rows, cols, plan.splits, plan.seg_len, pre);
      if (err != cudaSuccess) return err;
      err = launch("softmax.normalize", SoftmaxNormBlockKernel<S>, grid, kRowThreads, in, out,
                   static_cast<const SoftmaxStat<C>*>(d_stats), n_rows, cols, plan.splits,
                   plan.seg_len, pre, out_vec);
    }
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

// The op's dtype dispatch: float32, float64, float16.
cudaError_t DispatchRowSoftmaxType(const void* d_in, ElementType type, void* d_out,
                                   int64_t rows, int64_t cols, const EwProgram& pre,
                                   void* d_workspace, detail::Launcher& launch) {
  return detail::DispatchType<true, true, false>(type, [&](auto tag) {
    using S = decltype(tag);
    return DispatchRowSoftmax<S>(static_cast<const S*>(d_in), static_cast<S*>(d_out), rows,
                                 cols, pre, d_workspace, launch);
  });
}

}  // namespace

cudaError_t RowSoftmax(const void* d_in, ElementType in_type, void* d_out, int64_t rows,
                       int64_t cols, const EwProgram& pre, void* d_workspace,
                       size_t workspace_bytes, const LaunchConfig& config, int* kernels) {
  detail::Launcher launch(config, kernels);
  if (!IsFloatingPoint(in_type)) return cudaErrorInvalidValue;
  if (const cudaError_t err =
          detail::ValidateRowArgs(d_in, in_type, d_out, in_type, rows, cols, pre, d_workspace,
                                  workspace_bytes, config);
      err != cudaSuccess) {
    return err;
  }
  return DispatchRowSoftmaxType(d_in, in_type, d_out, rows, cols, pre, d_workspace, launch);
}

std::vector<KernelLaunchInfo> DescribeRowSoftmax(int64_t rows, int64_t cols, ElementType type,
                                                 const LaunchConfig& config) {
  std::vector<KernelLaunchInfo> out;
  if (detail::ValidateRowShape(rows, cols, config) != cudaSuccess) return out;
  detail::Launcher launch(config, &out);
  (void)DispatchRowSoftmaxType(nullptr, type, nullptr, rows, cols, EwProgram{}, nullptr,
                               launch);
  return out;
}

}  // namespace gpupipe::kernels::cuda
