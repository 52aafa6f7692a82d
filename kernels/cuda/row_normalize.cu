// RowNormalize (L2 normalization, standardization): entry points and dispatch. Structured like
// RowSoftmax: rows of up to detail::kResidentMaxCols columns in one kernel (<kind>.rows), each
// row held in registers; longer rows in two kernels per batch of rows, chained with PDL:
//  1. statistics: per segment (a row, or a slice of a long row when there are few rows) the
//     moments {n, mean, m2} (standardize: Welford within a thread, Chan merges across threads
//     and segments) or the sum of squares (L2), written to the workspace;
//  2. normalization: merges the row's segment statistics and writes (x - shift) / scale.
// Rows are mapped by detail::PlanRows. The workspace holds detail::StatCapacity(16) statistics,
// so larger shapes run as several batches reusing it. With PDL the statistics kernel of batch
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

namespace gpupipe::kernels::cuda {
namespace {

using detail::ComputeOf;
using detail::kRowBlockMinBlocksPerSm;
using detail::kRowThreads;
using detail::kRowUnroll;
using detail::kVecElems;
using detail::kWarpSize;
using detail::MomentStat;
using detail::NormalizeMergeOp;


template <typename C>
__device__ __forceinline__ void Push(RowNormalizeKind kind, MomentStat<C>& st, C x) {
  if (kind == RowNormalizeKind::kL2Normalize) {
    st.m2 = detail::MathFma(x, x, st.m2);
  } else {
    detail::PushMoment(st, x);
  }
}

template <typename C, int N>
__device__ __forceinline__ void PushVec(RowNormalizeKind kind, MomentStat<C>& st,
                                        const C (&x)[N]) {
  if (kind == RowNormalizeKind::kL2Normalize) {
    C ss = C(0);
#pragma unroll
    for (int k = 0; k < N; ++k) ss = detail::MathFma(x[k], x[k], ss);
    st.m2 += ss;
  } else {
    detail::PushMomentVec(st, x);
  }
}

// y = (x - shift) / scale. A true division (not a multiply by 1 / scale): one rounding, and a
// zero scale gives 0 / 0 = NaN for a zero or constant row, as the reference.
template <typename C>
struct Affine {
  C shift;
  C scale;
};

template <typename C>
__device__ __forceinline__ Affine<C> RowAffine(RowNormalizeKind kind, MomentStat<C> st,
                                               int64_t cols) {
  if (kind == RowNormalizeKind::kL2Normalize) return {C(0), detail::MathSqrt(st.m2)};
  return {st.mean, detail::MathSqrt(st.m2 / static_cast<C>(cols))};
}

template <typename C>
__device__ __forceinline__ C Normalize(Affine<C> a, C x) {
  return (x - a.shift) / a.scale;
}

// ---- single pass (rows that fit in registers) --------------------------------------------------
// The row's values stay in registers. L2: sum of squares. Standardize: two exact passes over
// the registers, the mean of the deviations from the row's first element x0 (so a constant row
// has a mean of exactly x0 and m2 exactly 0, hence 0 / 0 = NaN as the reference), then
// m2 = sum (x - mean)^2 (no E[x^2] - E[x]^2 cancellation).
// The row's affine map from this thread's K values: in_row(k) tells which belong to the row,
// reduce(v) sums v over the row's threads (all of them call it), first() is the row's first
// value after the prologue.
template <int K, typename C, typename InRow, typename Reduce, typename First>
__device__ __forceinline__ Affine<C> ResidentRowAffine(RowNormalizeKind kind, const C (&x)[K],
                                                       int cols, InRow&& in_row,
                                                       Reduce&& reduce, First&& first) {
  if (kind == RowNormalizeKind::kL2Normalize) {
    C ss = C(0);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      if (in_row(k)) ss = detail::MathFma(x[k], x[k], ss);
    }
    return {C(0), detail::MathSqrt(reduce(ss))};
  }
  const C x0 = first();
  C d = C(0);
#pragma unroll
  for (int k = 0; k < K; ++k) {
    if (in_row(k)) d += x[k] - x0;
  }
  const C mean = x0 + reduce(d) / static_cast<C>(cols);
  C m2 = C(0);
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const C dev = x[k] - mean;
    if (in_row(k)) m2 = detail::MathFma(dev, dev, m2);
  }
  return {mean, detail::MathSqrt(reduce(m2) / static_cast<C>(cols))};
}

template <typename S, int K, bool kBlock>
__global__ void __launch_bounds__(kRowThreads)
    NormRowsKernel(const S* d_in, S* d_out, int64_t rows, int cols, int lanes,
                   RowNormalizeKind kind, EwProgram pre) {
  using C = ComputeOf<S>;
  __shared__ C scratch[kWarpSize];
  const detail::ResidentMap<kBlock> map(lanes);
  detail::WaitForPrimaryGrids();

  for (int64_t base = map.first; base < rows; base += map.step) {
    const int64_t row = base + map.sub;
    const bool valid = row < rows;
    const S* p = d_in + (valid ? row : 0) * cols;
    C x[K];
    detail::LoadResident(p, cols, valid, map.l, map.width, pre, x);
    // Every thread of the row reads x0 itself (one cached load) rather than waiting on a
    // broadcast; ApplyEw gives exactly the value ApplyEwN gave its owner.
    const Affine<C> a = ResidentRowAffine(
        kind, x, cols, [&](int k) { return valid && map.l + k * map.width < cols; },
        [&](C v) {
          return detail::RowAllReduce<kBlock>(v, detail::SumOp{}, C(0), map.width, scratch);
        },
        [&] { return valid ? ApplyEw(pre, detail::LoadElem(p)) : C(0); });
    if (valid) {
      S* out = d_out + row * cols;
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int i = map.l + k * map.width;
        if (i < cols) detail::StoreElem(out + i, Normalize(a, x[k]));
      }
    }
  }
  detail::AllowDependentGrids();
}

// ---- wide rows (detail/row_wide.cuh: one block per SM, the next row prefetched) -------------
template <typename S>
__global__ void __launch_bounds__(detail::kWideRowThreads, 1)
    NormWideRowsKernel(const S* d_in, S* d_out, int64_t rows, int cols, RowNormalizeKind kind,
                       EwProgram pre) {
  using C = ComputeOf<S>;
  __shared__ C scratch[kWarpSize];
  extern __shared__ uint4 wide_row[];
  detail::WaitForPrimaryGrids();
  detail::ForEachWideRow(d_in, rows, cols, pre, wide_row, [&](int64_t row, C (&x)[detail::kWidePerThread]) {
    const S* p = d_in + row * cols;
    const Affine<C> a = ResidentRowAffine(
        kind, x, cols, [&](int k) { return detail::WideInRow<S>(k, cols); },
        [&](C v) {
          return detail::RowAllReduce<true>(v, detail::SumOp{}, C(0), detail::kWideRowThreads,
                                            scratch);
        },
        [&] { return ApplyEw(pre, detail::LoadElem(p)); });
    detail::StoreWideRow(d_out + row * cols, cols, x, [a](C v) { return Normalize(a, v); });
  });
  detail::AllowDependentGrids();
}

// ---- shared-memory path (rows too long for registers, short enough for shared memory) -------
// As the single pass above, with the row in shared memory (detail::SmemRow) and the first
// statistic (sum of squares, or the sum of deviations from x0) folded into the load.
template <typename S>
__global__ void __launch_bounds__(detail::kSmemRowThreads, detail::kSmemRowMinBlocksPerSm)
    NormSmemRowsKernel(const S* d_in, S* d_out, int64_t rows, int cols, RowNormalizeKind kind,
                       EwProgram pre, bool out_vec) {
  using C = ComputeOf<S>;
  extern __shared__ int4 smem_row[];
  // One scratch array per reduction, alternating (see RowAllReduceAlternating); the row's
  // closing barrier (EndSmemRow) orders the next row's first reduction after this row's last.
  __shared__ C scratch_a[kWarpSize];
  __shared__ C scratch_b[kWarpSize];
  detail::WaitForPrimaryGrids();

  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const S* p = d_in + row * cols;
    detail::SmemRow<S> r(reinterpret_cast<C*>(smem_row), p, cols);
    Affine<C> a;
    if (kind == RowNormalizeKind::kL2Normalize) {
      C ss = C(0);
      r.Load(p, pre, [&](C x) { ss = detail::MathFma(x, x, ss); });
      ss = detail::RowAllReduceAlternating<true>(ss, detail::SumOp{}, C(0), blockDim.x,
                                                 scratch_a);
      a = {C(0), detail::MathSqrt(ss)};
    } else {
      const C x0 = ApplyEw(pre, detail::LoadElem(p));
      C d = C(0);
      r.Load(p, pre, [&](C x) { d += x - x0; });
      d = detail::RowAllReduceAlternating<true>(d, detail::SumOp{}, C(0), blockDim.x,
                                                scratch_a);
      const C mean = x0 + d / static_cast<C>(cols);
      C m2 = C(0);
      r.Visit([&](C x) {
        const C dev = x - mean;
        m2 = detail::MathFma(dev, dev, m2);
      });
      m2 = detail::RowAllReduceAlternating<true>(m2, detail::SumOp{}, C(0), blockDim.x,
                                                 scratch_b);
      a = {mean, detail::MathSqrt(m2 / static_cast<C>(cols))};
    }
    r.Store(d_out + row * cols, out_vec, [&](C x) { return Normalize(a, x); });
    detail::EndSmemRow();
  }
  detail::AllowDependentGrids();
}

// ---- group path (short rows) -----------------------------------------------------------------

template <typename S>
__global__ void __launch_bounds__(kRowThreads)
    NormStatsGroupKernel(const S* d_in, MomentStat<ComputeOf<S>>* d_stats,
                         int64_t rows, int cols, int lanes, RowNormalizeKind kind,
                         EwProgram pre) {
  using C = ComputeOf<S>;
  const int lane = threadIdx.x % kWarpSize;
  const int rows_per_warp = kWarpSize / lanes;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / kWarpSize;
  // Before the first read of d_in and the first write of d_stats (see the top of the file).
  detail::WaitForPrimaryGrids();

  for (int64_t base = warp * rows_per_warp; base < rows; base += warps * rows_per_warp) {
    const int64_t row = base + lane / lanes;
    MomentStat<C> st = detail::EmptyMomentStat<C>();
    if (row < rows) {
      detail::VisitShortRow<kRowUnroll>(d_in + row * cols, cols, lane % lanes, lanes,
                                        [&](int, C x) { Push(kind, st, ApplyEw(pre, x)); });
    }
    st = detail::WarpAllReduce(st, NormalizeMergeOp<C>{kind}, lanes);
    if (row < rows && lane % lanes == 0) d_stats[row] = st;
  }
  detail::AllowDependentGrids();
}

template <typename S>
__global__ void __launch_bounds__(kRowThreads)
    NormApplyGroupKernel(const S* d_in, S* d_out,
                         const MomentStat<ComputeOf<S>>* d_stats, int64_t rows, int cols,
                         int lanes, RowNormalizeKind kind, EwProgram pre) {
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
    const Affine<C> a = RowAffine(kind, detail::LoadThroughL2(&d_stats[row]), cols);
    S* out = d_out + row * cols;
    detail::VisitShortRow<kRowUnroll>(d_in + row * cols, cols, l, lanes, [&](int i, C x) {
      detail::StoreElem(out + i, Normalize(a, ApplyEw(pre, x)));
    });
  }
  detail::AllowDependentGrids();
}

// ---- block path (long rows, optionally split) --------------------------------------------------

template <typename S>
__global__ void __launch_bounds__(kRowThreads, kRowBlockMinBlocksPerSm)
    NormStatsBlockKernel(const S* d_in, MomentStat<ComputeOf<S>>* d_stats,
                         int64_t rows, int64_t cols, int64_t splits, int64_t seg_len,
                         RowNormalizeKind kind, EwProgram pre) {
  using C = ComputeOf<S>;
  __shared__ MomentStat<C> scratch[kWarpSize];
  const int64_t segments = rows * splits;
  // Before the first read of d_in and the first write of d_stats (see the top of the file).
  detail::WaitForPrimaryGrids();

  for (int64_t seg = blockIdx.x; seg < segments; seg += gridDim.x) {
    const int64_t row = seg / splits;
    const int64_t begin = (seg - row * splits) * seg_len;
    const int64_t len = min(seg_len, cols - begin);
    MomentStat<C> st = detail::EmptyMomentStat<C>();
    detail::VisitSegment<kRowUnroll>(
        d_in + row * cols + begin, len, threadIdx.x, blockDim.x,
        [&](int64_t, C x) { Push(kind, st, ApplyEw(pre, x)); },
        [&](int64_t, C (&x)[kVecElems<S>]) {
          ApplyEwN(pre, x);
          PushVec(kind, st, x);
        });
    st = detail::BlockReduce(st, NormalizeMergeOp<C>{kind}, detail::EmptyMomentStat<C>(), scratch);
    if (threadIdx.x == 0) d_stats[seg] = st;
    __syncthreads();  // scratch is reused by the next segment
  }
  detail::AllowDependentGrids();
}

template <typename S>
__global__ void __launch_bounds__(kRowThreads, kRowBlockMinBlocksPerSm)
    NormApplyBlockKernel(const S* d_in, S* d_out,
                         const MomentStat<ComputeOf<S>>* d_stats, int64_t rows, int64_t cols,
                         int64_t splits, int64_t seg_len, RowNormalizeKind kind, EwProgram pre,
                         bool out_vec) {
  using C = ComputeOf<S>;
  __shared__ Affine<C> row_affine;
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
      const NormalizeMergeOp<C> merge{kind};
      MomentStat<C> st = detail::EmptyMomentStat<C>();
      // Unrolled so several partials are in flight: splits reaches a few hundred.
#pragma unroll 4
      for (int64_t k = threadIdx.x; k < splits; k += kWarpSize) {
        st = merge(st, detail::LoadThroughL2(&d_stats[row * splits + k]));
      }
      st = detail::WarpAllReduce(st, merge);
      if (threadIdx.x == 0) row_affine = RowAffine(kind, st, cols);
    }
    __syncthreads();
    const Affine<C> a = row_affine;

    // out and in rows differ by the constant d_out - d_in, so out + i is 16-byte aligned for
    // every body vector exactly when out_vec says so.
    S* out = d_out + row * cols + begin;
    detail::VisitSegment<kRowUnroll>(
        d_in + row * cols + begin, len, threadIdx.x, blockDim.x,
        [&](int64_t i, C x) { detail::StoreElem(out + i, Normalize(a, ApplyEw(pre, x))); },
        [&](int64_t i, C (&x)[kVecElems<S>]) {
          ApplyEwN(pre, x);
#pragma unroll
          for (int k = 0; k < kVecElems<S>; ++k) x[k] = Normalize(a, x[k]);
          detail::StoreVec<S>(out + i, x, out_vec);
        });
    __syncthreads();  // row_affine is rewritten for the next segment
  }
  detail::AllowDependentGrids();
}

// ---- dispatch --------------------------------------------------------------------------------

struct NormalizeNames {
  const char* rows;
  const char* stats;
  const char* normalize;
};

NormalizeNames NamesOf(RowNormalizeKind kind) {
  return kind == RowNormalizeKind::kL2Normalize
             ? NormalizeNames{"l2normalize.rows", "l2normalize.stats", "l2normalize.normalize"}
             : NormalizeNames{"standardize.rows", "standardize.stats", "standardize.normalize"};
}

// The one sizing/dispatch path, for launching and for describing.
template <typename S>
cudaError_t DispatchRowNormalize(const S* d_in, S* d_out, int64_t rows, int64_t cols,
                                 RowNormalizeKind kind, const EwProgram& pre, void* d_workspace,
                                 detail::Launcher& launch) {
  using C = ComputeOf<S>;
  const int mp = launch.config().multiprocessors;
  const detail::RowPlan plan = detail::PlanRows(rows, cols, mp, sizeof(MomentStat<C>));
  const NormalizeNames names = NamesOf(kind);
  auto* d_stats = static_cast<MomentStat<C>*>(d_workspace);
  if (cols <= detail::kResidentMaxCols) {
    const int c = static_cast<int>(cols);
    if (plan.group && cols <= int64_t{plan.lanes} * detail::kResidentShortPerThread) {
      const int64_t grid = detail::CapGrid(detail::CeilDiv(rows, kRowThreads / plan.lanes), mp);
      return launch(names.rows, NormRowsKernel<S, detail::kResidentShortPerThread, false>, grid,
                    kRowThreads, d_in, d_out, rows, c, plan.lanes, kind, pre);
    }
    // Longer rows: a block per row (many blocks, all of a row's loads in flight at once).
    const int64_t grid = detail::CapGrid(rows, mp);
    if (cols <= detail::kResidentMidMaxCols) {
      return launch(names.rows, NormRowsKernel<S, detail::kResidentMidPerThread, true>, grid,
                    kRowThreads, d_in, d_out, rows, c, kRowThreads, kind, pre);
    }
    return launch(names.rows, NormRowsKernel<S, detail::kResidentPerThread, true>, grid,
                  kRowThreads, d_in, d_out, rows, c, kRowThreads, kind, pre);
  }

  if constexpr (sizeof(C) == 4) {
    if (detail::WideRowsApply(d_in, d_out, rows, cols, mp)) {
      return detail::LaunchWideRows<NormWideRowsKernel<S>, S>(
          launch, names.rows, rows, cols, d_in, d_out, rows, static_cast<int>(cols), kind, pre);
    }
  }

  const bool out_vec =
      ((reinterpret_cast<uintptr_t>(d_out) - reinterpret_cast<uintptr_t>(d_in)) & 15) == 0;

  // Enough rows for a block each (PlanRows would not split them) that fit in shared memory:
  // one kernel, one read of the input.
  if (!plan.group && plan.splits == 1 && detail::FitsSmemRow<S>(cols, launch.config())) {
    constexpr auto kKernel = NormSmemRowsKernel<S>;
    if (!launch.describing()) {
      if (const cudaError_t err = detail::OptInSmemRow<kKernel>(); err != cudaSuccess) return err;
    }
    return launch.WithSmem(names.rows, kKernel, detail::CapGrid(rows, mp),
                           detail::kSmemRowThreads, detail::SmemRowBytes<S>(cols), d_in, d_out,
                           rows, static_cast<int>(cols), kind, pre, out_vec);
  }

  for (int64_t row0 = 0; row0 < rows; row0 += plan.batch_rows) {
    const int64_t n_rows = std::min(plan.batch_rows, rows - row0);
    const S* in = detail::Advance(d_in, row0 * cols);
    S* out = detail::Advance(d_out, row0 * cols);
    cudaError_t err;
    if (plan.group) {
      const int64_t grid =
          detail::CapGrid(detail::CeilDiv(n_rows, kRowThreads / plan.lanes), mp);
      err = launch(names.stats, NormStatsGroupKernel<S>, grid, kRowThreads, in, d_stats, n_rows,
                   static_cast<int>(cols), plan.lanes, kind, pre);
      if (err != cudaSuccess) return err;
      err = launch(names.normalize, NormApplyGroupKernel<S>, grid, kRowThreads, in, out,
                   static_cast<const MomentStat<C>*>(d_stats), n_rows, static_cast<int>(cols),
                   plan.lanes, kind, pre);
    } else {
      const int64_t grid = detail::CapGrid(n_rows * plan.splits, mp);
      err = launch(names.stats, NormStatsBlockKernel<S>, grid, kRowThreads, in, d_stats, n_rows,
                   cols, plan.splits, plan.seg_len, kind, pre);
      if (err != cudaSuccess) return err;
      err = launch(names.normalize, NormApplyBlockKernel<S>, grid, kRowThreads, in, out,
                   static_cast<const MomentStat<C>*>(d_stats), n_rows, cols, plan.splits,
                   plan.seg_len, kind, pre, out_vec);
    }
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

// The op's dtype dispatch: float32, float64, float16.
cudaError_t DispatchRowNormalizeType(const void* d_in, ElementType type, void* d_out,
                                     int64_t rows, int64_t cols, RowNormalizeKind kind,
                                     const EwProgram& pre, void* d_workspace,
                                     detail::Launcher& launch) {
  return detail::DispatchType<true, true, false>(type, [&](auto tag) {
    using S = decltype(tag);
    return DispatchRowNormalize<S>(static_cast<const S*>(d_in), static_cast<S*>(d_out), rows,
                                   cols, kind, pre, d_workspace, launch);
  });
}

}  // namespace

cudaError_t RowNormalize(const void* d_in, ElementType in_type, void* d_out, int64_t rows,
                         int64_t cols, RowNormalizeKind kind, const EwProgram& pre,
                         void* d_workspace, size_t workspace_bytes, const LaunchConfig& config,
                         int* kernels) {
  detail::Launcher launch(config, kernels);
  if (!IsFloatingPoint(in_type) || !IsValidRowNormalizeKind(kind)) return cudaErrorInvalidValue;
  if (const cudaError_t err =
          detail::ValidateRowArgs(d_in, in_type, d_out, in_type, rows, cols, pre, d_workspace,
                                  workspace_bytes, config);
      err != cudaSuccess) {
    return err;
  }
  return DispatchRowNormalizeType(d_in, in_type, d_out, rows, cols, kind, pre, d_workspace,
                                  launch);
}

std::vector<KernelLaunchInfo> DescribeRowNormalize(int64_t rows, int64_t cols, ElementType type,
                                                   RowNormalizeKind kind,
                                                   const LaunchConfig& config) {
  std::vector<KernelLaunchInfo> out;
  if (detail::ValidateRowShape(rows, cols, config) != cudaSuccess ||
      !IsValidRowNormalizeKind(kind)) {
    return out;
  }
  detail::Launcher launch(config, &out);
  (void)DispatchRowNormalizeType(nullptr, type, nullptr, rows, cols, kind, EwProgram{}, nullptr,
                                 launch);
  return out;
}

}  // namespace gpupipe::kernels::cuda
