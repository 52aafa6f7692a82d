// RowSoftmax: entry points and dispatch. Rows of up to detail::kResidentMaxCols columns: one
// kernel (softmax.rows) holding each row in registers. Longer rows: two kernels per batch of
// rows, chained with PDL:
//  1. statistics: an online softmax {max, sum of exp(x - max)} per segment (a row, or a
//     slice of a long row when there are few rows), written to the workspace;
//  2. normalization: merges the row's segment statistics and writes exp(x - m) / s.
// Rows are mapped as in RowReduce (detail::PlanRows). The workspace holds
// detail::StatCapacity(8) statistics, so a shape with more segments than that runs as several
// batches of both kernels, all reusing the workspace. With PDL the statistics kernel of batch
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
#include "kernels/cuda/detail/warp_reduce.cuh"
#include "kernels/cuda/ops.h"

namespace gpupipe::kernels::cuda {
namespace {

using detail::kRowBlockMinBlocksPerSm;
using detail::kRowThreads;
using detail::kRowUnroll;
using detail::kWarpSize;
using detail::SoftmaxStat;

// Floats of its first segment each normalization block asks L2 for before waiting on the
// statistics kernel (initial value, not yet measured on the H200).
constexpr int64_t kNormPrefetchFloats = 8192;
constexpr int kFloatsPerLine = 32;  // 128-byte lines

// 1 / s for the normalization. A +inf in the row leaves m = +inf with a finite s; the
// reference (exp(inf - inf) in the sum) gives NaN for the whole row, so match that.
__device__ __forceinline__ float InverseSum(SoftmaxStat st) {
  return st.m == INFINITY ? NAN : 1.0f / st.s;
}

// ---- single pass (rows that fit in registers) --------------------------------------------------
// The row's values stay in registers: exact max, then sum of exp(x - max) (one expf per
// element, no online rescaling), then the write. Same results as the two-kernel path up to
// float rounding: y = expf(x - m) * (1 / s), with an +inf (m = +inf) or a NaN making s, and so
// the row, NaN, and an all -inf row NaN (exp(-inf - -inf)), as the reference.
template <int K, bool kBlock>
__global__ void __launch_bounds__(kRowThreads)
    SoftmaxRowsKernel(const float* d_in, float* d_out, int64_t rows, int cols, int lanes,
                      EwProgram pre) {
  __shared__ float scratch[kWarpSize];
  const detail::ResidentMap<kBlock> map(lanes);
  detail::WaitForPrimaryGrids();

  for (int64_t base = map.first; base < rows; base += map.step) {
    const int64_t row = base + map.sub;
    const bool valid = row < rows;
    const float* p = d_in + (valid ? row : 0) * cols;
    float x[K];
    detail::LoadResident(p, cols, valid, map.l, map.width, pre, x);
    float m = -INFINITY;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      if (valid && map.l + k * map.width < cols) m = fmaxf(m, x[k]);
    }
    m = detail::RowAllReduce<kBlock>(m, detail::MaxOp{}, -INFINITY, map.width, scratch);
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      x[k] = expf(x[k] - m);
      if (valid && map.l + k * map.width < cols) s += x[k];
    }
    s = detail::RowAllReduce<kBlock>(s, detail::SumOp{}, 0.0f, map.width, scratch);
    const float inv = 1.0f / s;
    if (valid) {
      float* out = d_out + row * cols;
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int i = map.l + k * map.width;
        if (i < cols) out[i] = x[k] * inv;
      }
    }
  }
  detail::AllowDependentGrids();
}

// ---- group path (short rows) -----------------------------------------------------------------

__global__ void __launch_bounds__(kRowThreads)
    SoftmaxStatsGroupKernel(const float* d_in, SoftmaxStat* d_stats,
                            int64_t rows, int cols, int lanes, EwProgram pre) {
  const int lane = threadIdx.x % kWarpSize;
  const int rows_per_warp = kWarpSize / lanes;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / kWarpSize;
  // Before the first read of d_in and the first write of d_stats (see the top of the file).
  detail::WaitForPrimaryGrids();

  for (int64_t base = warp * rows_per_warp; base < rows; base += warps * rows_per_warp) {
    const int64_t row = base + lane / lanes;
    SoftmaxStat st = detail::EmptySoftmaxStat();
    if (row < rows) {
      detail::VisitShortRow<kRowUnroll>(d_in + row * cols, cols, lane % lanes, lanes,
                                        [&](int, float x) { PushSoftmax(st, ApplyEw(pre, x)); });
    }
    st = detail::WarpAllReduce(st, detail::SoftmaxMergeOp{}, lanes);
    if (row < rows && lane % lanes == 0) d_stats[row] = st;
  }
  detail::AllowDependentGrids();
}

__global__ void __launch_bounds__(kRowThreads)
    SoftmaxNormGroupKernel(const float* d_in, float* d_out,
                           const SoftmaxStat* d_stats, int64_t rows, int cols,
                           int lanes, EwProgram pre) {
  const int lane = threadIdx.x % kWarpSize;
  const int l = lane % lanes;
  const int rows_per_warp = kWarpSize / lanes;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / kWarpSize;

  // Prologue, independent of the statistics: pull this lane's first row slice towards L2.
  {
    const int64_t row = warp * rows_per_warp + lane / lanes;
    if (row < rows) {
      for (int i = l * kFloatsPerLine; i < cols; i += lanes * kFloatsPerLine) {
        detail::PrefetchL2(d_in + row * cols + i);
      }
    }
  }
  detail::WaitForPrimaryGrids();

  for (int64_t base = warp * rows_per_warp; base < rows; base += warps * rows_per_warp) {
    const int64_t row = base + lane / lanes;
    if (row >= rows) continue;  // no collectives below
    const SoftmaxStat st = detail::LoadThroughL2(&d_stats[row]);
    const float inv = InverseSum(st);
    float* out = d_out + row * cols;
    detail::VisitShortRow<kRowUnroll>(d_in + row * cols, cols, l, lanes, [&](int i, float x) {
      out[i] = expf(ApplyEw(pre, x) - st.m) * inv;
    });
  }
  detail::AllowDependentGrids();
}

// ---- block path (long rows, optionally split) --------------------------------------------------

__global__ void __launch_bounds__(kRowThreads, kRowBlockMinBlocksPerSm)
    SoftmaxStatsBlockKernel(const float* d_in, SoftmaxStat* d_stats,
                            int64_t rows, int64_t cols, int64_t splits, int64_t seg_len,
                            EwProgram pre) {
  __shared__ SoftmaxStat scratch[kWarpSize];
  const int64_t segments = rows * splits;
  // Before the first read of d_in and the first write of d_stats (see the top of the file).
  detail::WaitForPrimaryGrids();

  for (int64_t seg = blockIdx.x; seg < segments; seg += gridDim.x) {
    const int64_t row = seg / splits;
    const int64_t begin = (seg - row * splits) * seg_len;
    const int64_t len = min(seg_len, cols - begin);
    SoftmaxStat st = detail::EmptySoftmaxStat();
    detail::VisitSegment<kRowUnroll>(
        d_in + row * cols + begin, len, threadIdx.x, blockDim.x,
        [&](int64_t, float x) { PushSoftmax(st, ApplyEw(pre, x)); },
        [&](int64_t, float4 q) {
          PushSoftmax(st, ApplyEw(pre, q.x));
          PushSoftmax(st, ApplyEw(pre, q.y));
          PushSoftmax(st, ApplyEw(pre, q.z));
          PushSoftmax(st, ApplyEw(pre, q.w));
        });
    st = detail::BlockReduce(st, detail::SoftmaxMergeOp{}, detail::EmptySoftmaxStat(), scratch);
    if (threadIdx.x == 0) d_stats[seg] = st;
    __syncthreads();  // scratch is reused by the next segment
  }
  detail::AllowDependentGrids();
}

__global__ void __launch_bounds__(kRowThreads, kRowBlockMinBlocksPerSm)
    SoftmaxNormBlockKernel(const float* d_in, float* d_out,
                           const SoftmaxStat* d_stats, int64_t rows, int64_t cols,
                           int64_t splits, int64_t seg_len, EwProgram pre, bool out_vec) {
  __shared__ SoftmaxStat row_stat;
  const int64_t segments = rows * splits;

  // Prologue, independent of the statistics: pull the start of this block's first segment
  // towards L2 while the statistics kernel drains.
  if (blockIdx.x < segments) {
    const int64_t row = blockIdx.x / splits;
    const int64_t begin = (blockIdx.x - row * splits) * seg_len;
    const int64_t len = min(min(seg_len, cols - begin), kNormPrefetchFloats);
    const float* p = d_in + row * cols + begin;
    for (int64_t i = static_cast<int64_t>(threadIdx.x) * kFloatsPerLine; i < len;
         i += static_cast<int64_t>(blockDim.x) * kFloatsPerLine) {
      detail::PrefetchL2(p + i);
    }
  }
  detail::WaitForPrimaryGrids();

  for (int64_t seg = blockIdx.x; seg < segments; seg += gridDim.x) {
    const int64_t row = seg / splits;
    const int64_t begin = (seg - row * splits) * seg_len;
    const int64_t len = min(seg_len, cols - begin);

    // One warp merges the row's segment statistics (splits is at most a few hundred).
    if (threadIdx.x < kWarpSize) {
      SoftmaxStat st = detail::EmptySoftmaxStat();
      // Unrolled so several partials are in flight: splits reaches a few hundred.
#pragma unroll 4
      for (int64_t k = threadIdx.x; k < splits; k += kWarpSize) {
        st = detail::MergeSoftmax(st, detail::LoadThroughL2(&d_stats[row * splits + k]));
      }
      st = detail::WarpAllReduce(st, detail::SoftmaxMergeOp{});
      if (threadIdx.x == 0) row_stat = st;
    }
    __syncthreads();
    const SoftmaxStat st = row_stat;
    const float inv = InverseSum(st);

    // out and in rows differ by the constant d_out - d_in, so out + i is 16-byte aligned for
    // every body vector exactly when out_vec says so.
    float* out = d_out + row * cols + begin;
    detail::VisitSegment<kRowUnroll>(
        d_in + row * cols + begin, len, threadIdx.x, blockDim.x,
        [&](int64_t i, float x) { out[i] = expf(ApplyEw(pre, x) - st.m) * inv; },
        [&](int64_t i, float4 q) {
          const float4 y = {expf(ApplyEw(pre, q.x) - st.m) * inv,
                            expf(ApplyEw(pre, q.y) - st.m) * inv,
                            expf(ApplyEw(pre, q.z) - st.m) * inv,
                            expf(ApplyEw(pre, q.w) - st.m) * inv};
          detail::StoreFloat4(out + i, y, out_vec);
        });
    __syncthreads();  // row_stat is rewritten for the next segment
  }
  detail::AllowDependentGrids();
}

// The one sizing/dispatch path, for launching and for describing.
cudaError_t DispatchRowSoftmax(const float* d_in, float* d_out, int64_t rows, int64_t cols,
                               const EwProgram& pre, void* d_workspace,
                               detail::Launcher& launch) {
  const int mp = launch.config().multiprocessors;
  const detail::RowPlan plan = detail::PlanRows(rows, cols, mp, sizeof(SoftmaxStat));
  auto* d_stats = static_cast<SoftmaxStat*>(d_workspace);
  if (cols <= detail::kResidentMaxCols) {
    const int c = static_cast<int>(cols);
    if (plan.group && cols <= int64_t{plan.lanes} * detail::kResidentShortPerThread) {
      const int64_t grid = detail::CapGrid(detail::CeilDiv(rows, kRowThreads / plan.lanes), mp);
      return launch("softmax.rows", SoftmaxRowsKernel<detail::kResidentShortPerThread, false>, grid,
                    kRowThreads, d_in, d_out, rows, c, plan.lanes, pre);
    }
    // Longer rows: a block per row (many blocks, all of a row's loads in flight at once).
    const int64_t grid = detail::CapGrid(rows, mp);
    if (cols <= detail::kResidentMidMaxCols) {
      return launch("softmax.rows", SoftmaxRowsKernel<detail::kResidentMidPerThread, true>, grid,
                    kRowThreads, d_in, d_out, rows, c, kRowThreads, pre);
    }
    return launch("softmax.rows", SoftmaxRowsKernel<detail::kResidentPerThread, true>, grid,
                  kRowThreads, d_in, d_out, rows, c, kRowThreads, pre);
  }

  const bool out_vec =
      ((reinterpret_cast<uintptr_t>(d_out) - reinterpret_cast<uintptr_t>(d_in)) & 15) == 0;

  for (int64_t row0 = 0; row0 < rows; row0 += plan.batch_rows) {
    const int64_t n_rows = std::min(plan.batch_rows, rows - row0);
    const float* in = detail::Advance(d_in, row0 * cols);
    float* out = detail::Advance(d_out, row0 * cols);
    cudaError_t err;
    if (plan.group) {
      const int64_t grid =
          detail::CapGrid(detail::CeilDiv(n_rows, kRowThreads / plan.lanes), mp);
      err = launch("softmax.stats", SoftmaxStatsGroupKernel, grid, kRowThreads, in, d_stats,
                   n_rows, static_cast<int>(cols), plan.lanes, pre);
      if (err != cudaSuccess) return err;
      err = launch("softmax.normalize", SoftmaxNormGroupKernel, grid, kRowThreads, in, out,
                   static_cast<const SoftmaxStat*>(d_stats), n_rows, static_cast<int>(cols),
                   plan.lanes, pre);
    } else {
      const int64_t grid = detail::CapGrid(n_rows * plan.splits, mp);
      err = launch("softmax.stats", SoftmaxStatsBlockKernel, grid, kRowThreads, in, d_stats,
                   n_rows, cols, plan.splits, plan.seg_len, pre);
      if (err != cudaSuccess) return err;
      err = launch("softmax.normalize", SoftmaxNormBlockKernel, grid, kRowThreads, in, out,
                   static_cast<const SoftmaxStat*>(d_stats), n_rows, cols, plan.splits,
                   plan.seg_len, pre, out_vec);
    }
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace

cudaError_t RowSoftmax(const float* d_in, float* d_out, int64_t rows, int64_t cols,
                       const EwProgram& pre, void* d_workspace, size_t workspace_bytes,
                       const LaunchConfig& config, int* kernels) {
  detail::Launcher launch(config, kernels);
  if (const cudaError_t err = detail::ValidateRowArgs(d_in, d_out, rows, cols, pre, d_workspace,
                                                      workspace_bytes, config);
      err != cudaSuccess) {
    return err;
  }
  return DispatchRowSoftmax(d_in, d_out, rows, cols, pre, d_workspace, launch);
}

std::vector<KernelLaunchInfo> DescribeRowSoftmax(int64_t rows, int64_t cols,
                                                 const LaunchConfig& config) {
  std::vector<KernelLaunchInfo> out;
  if (detail::ValidateRowShape(rows, cols, config) != cudaSuccess) return out;
  detail::Launcher launch(config, &out);
  (void)DispatchRowSoftmax(nullptr, nullptr, rows, cols, EwProgram{}, nullptr, launch);
  return out;
}

}  // namespace gpupipe::kernels::cuda
