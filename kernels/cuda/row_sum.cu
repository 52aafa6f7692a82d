// RowSum: entry points and dispatch. Shapes are mapped by detail::PlanRows:
//  - cols <= kGroupMaxCols: a group of 1..32 lanes per row, one kernel writing d_out;
//  - long rows, enough of them: a block per row, one kernel writing d_out;
//  - few long rows: each row split into segments over several blocks, which write partial sums
//    to the workspace, then a combine kernel (warp per row) chained with PDL.
#include <cstdint>

#include "kernels/cuda/detail/launch.cuh"
#include "kernels/cuda/detail/row_access.cuh"
#include "kernels/cuda/detail/row_plan.cuh"
#include "kernels/cuda/detail/warp_reduce.cuh"
#include "kernels/cuda/ops.h"

namespace gpupipe::kernels::cuda {
namespace {

using detail::kRowBlockMinBlocksPerSm;
using detail::kRowThreads;
using detail::kRowUnroll;
using detail::kWarpSize;

// A group of `lanes` lanes (power of two <= 32) per row; warp-uniform loop bounds so the
// full-warp shuffles see every lane.
__global__ void __launch_bounds__(kRowThreads)
    RowSumGroupKernel(const float* __restrict__ d_in, float* __restrict__ d_out, int64_t rows,
                      int cols, int lanes, EwProgram pre) {
  const int lane = threadIdx.x % kWarpSize;
  const int rows_per_warp = kWarpSize / lanes;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / kWarpSize;

  for (int64_t base = warp * rows_per_warp; base < rows; base += warps * rows_per_warp) {
    const int64_t row = base + lane / lanes;
    float acc = 0.0f;
    if (row < rows) {
      detail::VisitShortRow<kRowUnroll>(d_in + row * cols, cols, lane % lanes, lanes,
                                        [&](int, float x) { acc += ApplyEw(pre, x); });
    }
    acc = detail::WarpAllReduce(acc, detail::SumOp{}, lanes);
    if (row < rows && lane % lanes == 0) d_out[row] = acc;
  }
}

// A block per segment (row r, split s) of seg_len columns; writes d_dst[r * splits + s], which
// is d_out itself when splits == 1.
__global__ void __launch_bounds__(kRowThreads, kRowBlockMinBlocksPerSm)
    RowSumBlockKernel(const float* __restrict__ d_in, float* __restrict__ d_dst, int64_t rows,
                      int64_t cols, int64_t splits, int64_t seg_len, EwProgram pre) {
  __shared__ float scratch[kWarpSize];
  const int64_t segments = rows * splits;
  for (int64_t seg = blockIdx.x; seg < segments; seg += gridDim.x) {
    const int64_t row = seg / splits;
    const int64_t begin = (seg - row * splits) * seg_len;
    const int64_t len = min(seg_len, cols - begin);
    float acc = 0.0f;
    detail::VisitSegment<kRowUnroll>(
        d_in + row * cols + begin, len, threadIdx.x, blockDim.x,
        [&](int64_t, float x) { acc += ApplyEw(pre, x); },
        [&](int64_t, float4 q) {
          acc += (ApplyEw(pre, q.x) + ApplyEw(pre, q.y)) + (ApplyEw(pre, q.z) + ApplyEw(pre, q.w));
        });
    acc = detail::BlockReduce(acc, detail::SumOp{}, 0.0f, scratch);
    if (threadIdx.x == 0) d_dst[seg] = acc;
    __syncthreads();  // scratch is reused by the next segment
  }
  // Partials written: let the combine kernel's blocks get scheduled.
  detail::AllowDependentGrids();
}

// Warp per row: sums the row's `splits` partials. PDL secondary of RowSumBlockKernel.
__global__ void __launch_bounds__(kRowThreads)
    RowSumCombineKernel(const float* __restrict__ d_partials, float* __restrict__ d_out,
                        int64_t rows, int64_t splits) {
  // Prologue (independent of the partials): only index math here.
  const int lane = threadIdx.x % kWarpSize;
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / kWarpSize;

  detail::WaitForPrimaryGrids();

  for (int64_t row = first; row < rows; row += warps) {
    float acc = 0.0f;
    for (int64_t k = lane; k < splits; k += kWarpSize) acc += d_partials[row * splits + k];
    acc = detail::WarpAllReduce(acc, detail::SumOp{});
    if (lane == 0) d_out[row] = acc;
  }
}

}  // namespace

size_t RowOpsWorkspaceBytes() { return detail::kRowOpsWorkspaceBytes; }

cudaError_t RowSum(const float* d_in, float* d_out, int64_t rows, int64_t cols,
                   const EwProgram& pre, void* d_workspace, size_t workspace_bytes,
                   const LaunchConfig& config, int* kernels) {
  detail::KernelCounter counter(kernels);
  if (const cudaError_t err = detail::ValidateRowArgs(d_in, d_out, rows, cols, pre, d_workspace,
                                                      workspace_bytes, config);
      err != cudaSuccess) {
    return err;
  }
  const int mp = config.multiprocessors;
  const detail::RowPlan plan = detail::PlanRows(rows, cols, mp);

  if (plan.group) {
    const int rows_per_block = kRowThreads / plan.lanes;
    const int grid = detail::CapGrid(detail::CeilDiv(rows, rows_per_block), mp);
    const cudaError_t err = detail::LaunchKernel(
        RowSumGroupKernel, dim3(grid), dim3(kRowThreads), config.stream, /*pdl=*/false, d_in,
        d_out, rows, static_cast<int>(cols), plan.lanes, pre);
    if (err == cudaSuccess) counter.Add();
    return err;
  }

  // plan.splits > 1 implies rows * splits <= kRowStatCapacity: no batching needed.
  float* d_partials = plan.splits == 1 ? d_out : static_cast<float*>(d_workspace);
  const int grid = detail::CapGrid(rows * plan.splits, mp);
  cudaError_t err = detail::LaunchKernel(RowSumBlockKernel, dim3(grid), dim3(kRowThreads),
                                         config.stream, /*pdl=*/false, d_in, d_partials, rows,
                                         cols, plan.splits, plan.seg_len, pre);
  if (err != cudaSuccess) return err;
  counter.Add();
  if (plan.splits == 1) return cudaSuccess;

  const int combine_grid =
      detail::CapGrid(detail::CeilDiv(rows, kRowThreads / kWarpSize), mp);
  err = detail::LaunchKernel(RowSumCombineKernel, dim3(combine_grid), dim3(kRowThreads),
                             config.stream, config.pdl, static_cast<const float*>(d_partials),
                             d_out, rows, plan.splits);
  if (err == cudaSuccess) counter.Add();
  return err;
}

}  // namespace gpupipe::kernels::cuda
