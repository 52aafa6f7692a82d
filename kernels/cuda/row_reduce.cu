// RowReduce (sum, min, max, mean, norm2) and RowArgmax: entry points and dispatch. Shapes are
// mapped by detail::PlanRows:
//  - cols <= kGroupMaxCols: a group of 1..32 lanes per row, one kernel writing d_out;
//  - long rows, enough of them: a block per row, one kernel writing d_out;
//  - few long rows: each row split into segments over several blocks, which write partial
//    results to the workspace, then a combine kernel (warp per row) merges them.
// The reduction kind is a kernel argument (see detail::ReduceOp), so all kinds share kernels.
// PDL: every kernel waits for its predecessor before its first global access (the previous op
// may still read d_out or, for the partials kernel, the shared workspace) and triggers its
// dependent after its last store.
#include <cstdint>

#include "kernels/cuda/detail/launch.cuh"
#include "kernels/cuda/detail/row_access.cuh"
#include "kernels/cuda/detail/row_plan.cuh"
#include "kernels/cuda/detail/staging/segment.cuh"
#include "kernels/cuda/detail/warp_reduce.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/tuning/staging_table.h"

namespace gpupipe::kernels::cuda {
namespace {

using detail::ArgmaxStat;
using detail::kRowBlockMinBlocksPerSm;
using detail::kRowThreads;
using detail::kRowUnroll;
using detail::kWarpSize;
using detail::ReduceOp;

// ---- RowReduce ---------------------------------------------------------------------------------

// A group of `lanes` lanes (power of two <= 32) per row; warp-uniform loop bounds so the
// full-warp shuffles see every lane.
__global__ void __launch_bounds__(kRowThreads)
    ReduceGroupKernel(const float* d_in, float* d_out, int64_t rows,
                      int cols, int lanes, RowReduceKind kind, EwProgram pre) {
  const ReduceOp op{kind};
  const int lane = threadIdx.x % kWarpSize;
  const int rows_per_warp = kWarpSize / lanes;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / kWarpSize;
  detail::WaitForPrimaryGrids();

  for (int64_t base = warp * rows_per_warp; base < rows; base += warps * rows_per_warp) {
    const int64_t row = base + lane / lanes;
    float acc = op.Identity();
    if (row < rows) {
      detail::VisitShortRow<kRowUnroll>(d_in + row * cols, cols, lane % lanes, lanes,
                                        [&](int, float x) { acc = op.Push(acc, ApplyEw(pre, x)); });
    }
    acc = detail::WarpAllReduce(acc, op, lanes);
    if (row < rows && lane % lanes == 0) d_out[row] = op.Finalize(acc, cols);
  }
  detail::AllowDependentGrids();
}

// A block per segment (row r, split s) of seg_len columns; writes d_dst[r * splits + s]: the
// raw partial, or, when splits == 1 (d_dst is d_out), the row's final result. Loads follow the
// staging strategy S (detail::SegmentLoader; `stages` is for the staged ones).
template <Staging S>
__global__ void __launch_bounds__(kRowThreads, kRowBlockMinBlocksPerSm)
    ReduceBlockKernel(const float* d_in, float* d_dst, int64_t rows,
                      int64_t cols, int64_t splits, int64_t seg_len, RowReduceKind kind,
                      EwProgram pre, int stages) {
  __shared__ float scratch[kWarpSize];
  const ReduceOp op{kind};
  const int64_t segments = rows * splits;
  detail::SegmentLoader<S, kRowUnroll> loader(stages);
  detail::WaitForPrimaryGrids();

  for (int64_t seg = blockIdx.x; seg < segments; seg += gridDim.x) {
    const int64_t row = seg / splits;
    const int64_t begin = (seg - row * splits) * seg_len;
    const int64_t len = min(seg_len, cols - begin);
    float acc = op.Identity();
    loader.Visit(
        d_in + row * cols + begin, len,
        [&](int64_t, float x) { acc = op.Push(acc, ApplyEw(pre, x)); },
        [&](int64_t, float4 q) { acc = op.Push4(acc, detail::ApplyEw4(pre, q)); });
    acc = detail::BlockReduce(acc, op, op.Identity(), scratch);
    if (threadIdx.x == 0) d_dst[seg] = splits == 1 ? op.Finalize(acc, cols) : acc;
    __syncthreads();  // scratch is reused by the next segment
  }
  loader.Quit();
  detail::AllowDependentGrids();
}

// Warp per row: merges the row's `splits` partials and finalizes.
__global__ void __launch_bounds__(kRowThreads)
    ReduceCombineKernel(const float* d_partials, float* d_out,
                        int64_t rows, int64_t cols, int64_t splits, RowReduceKind kind) {
  const ReduceOp op{kind};
  const int lane = threadIdx.x % kWarpSize;
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / kWarpSize;
  detail::WaitForPrimaryGrids();

  for (int64_t row = first; row < rows; row += warps) {
    float acc = op.Identity();
    // Unrolled so several partials are in flight: splits reaches a few hundred.
#pragma unroll 4
    for (int64_t k = lane; k < splits; k += kWarpSize) {
      acc = op(acc, detail::LoadThroughL2(&d_partials[row * splits + k]));
    }
    acc = detail::WarpAllReduce(acc, op);
    if (lane == 0) d_out[row] = op.Finalize(acc, cols);
  }
  detail::AllowDependentGrids();
}

// ---- RowArgmax ---------------------------------------------------------------------------------

__device__ __forceinline__ void PushArgmax(ArgmaxStat& st, float x, int64_t i) {
  st = detail::MergeArgmax(st, {x, i});
}

__global__ void __launch_bounds__(kRowThreads)
    ArgmaxGroupKernel(const float* d_in, int64_t* d_out, int64_t rows,
                      int cols, int lanes, EwProgram pre) {
  const int lane = threadIdx.x % kWarpSize;
  const int rows_per_warp = kWarpSize / lanes;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / kWarpSize;
  detail::WaitForPrimaryGrids();

  for (int64_t base = warp * rows_per_warp; base < rows; base += warps * rows_per_warp) {
    const int64_t row = base + lane / lanes;
    ArgmaxStat st = detail::EmptyArgmaxStat();
    if (row < rows) {
      detail::VisitShortRow<kRowUnroll>(d_in + row * cols, cols, lane % lanes, lanes,
                                        [&](int i, float x) {
                                          PushArgmax(st, ApplyEw(pre, x), i);
                                        });
    }
    st = detail::WarpAllReduce(st, detail::ArgmaxMergeOp{}, lanes);
    if (row < rows && lane % lanes == 0) d_out[row] = st.i;
  }
  detail::AllowDependentGrids();
}

// Block per segment; with splits == 1 writes the index to d_out, otherwise the segment's
// candidate to d_partials[seg].
__global__ void __launch_bounds__(kRowThreads, kRowBlockMinBlocksPerSm)
    ArgmaxBlockKernel(const float* d_in, int64_t* d_out,
                      ArgmaxStat* d_partials, int64_t rows, int64_t cols,
                      int64_t splits, int64_t seg_len, EwProgram pre) {
  __shared__ ArgmaxStat scratch[kWarpSize];
  const int64_t segments = rows * splits;
  detail::WaitForPrimaryGrids();

  for (int64_t seg = blockIdx.x; seg < segments; seg += gridDim.x) {
    const int64_t row = seg / splits;
    const int64_t begin = (seg - row * splits) * seg_len;
    const int64_t len = min(seg_len, cols - begin);
    ArgmaxStat st = detail::EmptyArgmaxStat();
    detail::VisitSegment<kRowUnroll>(
        d_in + row * cols + begin, len, threadIdx.x, blockDim.x,
        [&](int64_t i, float x) { PushArgmax(st, ApplyEw(pre, x), begin + i); },
        [&](int64_t i, float4 q) {
          const float4 y = detail::ApplyEw4(pre, q);
          PushArgmax(st, y.x, begin + i);
          PushArgmax(st, y.y, begin + i + 1);
          PushArgmax(st, y.z, begin + i + 2);
          PushArgmax(st, y.w, begin + i + 3);
        });
    st = detail::BlockReduce(st, detail::ArgmaxMergeOp{}, detail::EmptyArgmaxStat(), scratch);
    if (threadIdx.x == 0) {
      if (splits == 1) {
        d_out[row] = st.i;
      } else {
        d_partials[seg] = st;
      }
    }
    __syncthreads();  // scratch is reused by the next segment
  }
  detail::AllowDependentGrids();
}

__global__ void __launch_bounds__(kRowThreads)
    ArgmaxCombineKernel(const ArgmaxStat* d_partials, int64_t* d_out,
                        int64_t rows, int64_t splits) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / kWarpSize;
  detail::WaitForPrimaryGrids();

  for (int64_t row = first; row < rows; row += warps) {
    ArgmaxStat st = detail::EmptyArgmaxStat();
    // Unrolled so several partials are in flight: splits reaches a few hundred.
#pragma unroll 4
    for (int64_t k = lane; k < splits; k += kWarpSize) {
      st = detail::MergeArgmax(st, detail::LoadThroughL2(&d_partials[row * splits + k]));
    }
    st = detail::WarpAllReduce(st, detail::ArgmaxMergeOp{});
    if (lane == 0) d_out[row] = st.i;
  }
  detail::AllowDependentGrids();
}

// ---- dispatch --------------------------------------------------------------------------------

struct ReduceNames {
  const char* rows;
  const char* partials;
  const char* combine;
};

// The block kernel of strategy `staging` (never kAuto).
using ReduceBlockFn = void (*)(const float*, float*, int64_t, int64_t, int64_t, int64_t,
                               RowReduceKind, EwProgram, int);
ReduceBlockFn ReduceBlockKernelFor(Staging staging) {
  switch (staging) {
    case Staging::kPipeline: return ReduceBlockKernel<Staging::kPipeline>;
    case Staging::kPipelineThread: return ReduceBlockKernel<Staging::kPipelineThread>;
    case Staging::kPrimitives: return ReduceBlockKernel<Staging::kPrimitives>;
    case Staging::kBulk: return ReduceBlockKernel<Staging::kBulk>;
    case Staging::kDirect:
    case Staging::kAuto: break;
  }
  return ReduceBlockKernel<Staging::kDirect>;
}

ReduceNames NamesOf(RowReduceKind kind) {
  switch (kind) {
    case RowReduceKind::kSum: return {"sum.rows", "sum.partials", "sum.combine"};
    case RowReduceKind::kMin: return {"min.rows", "min.partials", "min.combine"};
    case RowReduceKind::kMax: return {"max.rows", "max.partials", "max.combine"};
    case RowReduceKind::kMean: return {"mean.rows", "mean.partials", "mean.combine"};
    case RowReduceKind::kNorm2: return {"norm2.rows", "norm2.partials", "norm2.combine"};
  }
  return {"?", "?", "?"};
}

int64_t CombineGrid(int64_t rows, int mp) {
  return detail::CapGrid(detail::CeilDiv(rows, kRowThreads / kWarpSize), mp);
}

// The one sizing/dispatch path of RowReduce, for launching and for describing.
cudaError_t DispatchRowReduce(const float* d_in, float* d_out, int64_t rows, int64_t cols,
                              RowReduceKind kind, const EwProgram& pre, void* d_workspace,
                              detail::Launcher& launch) {
  const int mp = launch.config().multiprocessors;
  const detail::RowPlan plan = detail::PlanRows(rows, cols, mp, sizeof(float));
  const ReduceNames names = NamesOf(kind);

  if (plan.group) {
    const int64_t grid = detail::CapGrid(detail::CeilDiv(rows, kRowThreads / plan.lanes), mp);
    return launch(names.rows, ReduceGroupKernel, grid, kRowThreads, d_in, d_out, rows,
                  static_cast<int>(cols), plan.lanes, kind, pre);
  }

  // plan.splits > 1 only for rows < the grid target, so rows * splits is far below the
  // workspace capacity: no batching.
  const bool split = plan.splits > 1;
  float* d_partials = split ? static_cast<float*>(d_workspace) : d_out;
  const int64_t grid = detail::CapGrid(rows * plan.splits, mp);
  const tuning::StagingChoice staging =
      tuning::ResolveStaging(launch.config(), tuning::StagingFamily::kRowReduce,
                             ElementType::kFloat32, rows, cols);
  cudaError_t err = launch(split ? names.partials : names.rows,
                           ReduceBlockKernelFor(staging.staging), grid, kRowThreads, d_in,
                           d_partials, rows, cols, plan.splits, plan.seg_len, kind, pre,
                           staging.stages);
  if (err != cudaSuccess || !split) return err;
  return launch(names.combine, ReduceCombineKernel, CombineGrid(rows, mp), kRowThreads,
                static_cast<const float*>(d_partials), d_out, rows, cols, plan.splits, kind);
}

cudaError_t DispatchRowArgmax(const float* d_in, int64_t* d_out, int64_t rows, int64_t cols,
                              const EwProgram& pre, void* d_workspace,
                              detail::Launcher& launch) {
  const int mp = launch.config().multiprocessors;
  const detail::RowPlan plan = detail::PlanRows(rows, cols, mp, sizeof(ArgmaxStat));

  if (plan.group) {
    const int64_t grid = detail::CapGrid(detail::CeilDiv(rows, kRowThreads / plan.lanes), mp);
    return launch("argmax.rows", ArgmaxGroupKernel, grid, kRowThreads, d_in, d_out, rows,
                  static_cast<int>(cols), plan.lanes, pre);
  }
  const bool split = plan.splits > 1;
  auto* d_partials = static_cast<ArgmaxStat*>(d_workspace);
  const int64_t grid = detail::CapGrid(rows * plan.splits, mp);
  cudaError_t err = launch(split ? "argmax.partials" : "argmax.rows", ArgmaxBlockKernel, grid,
                           kRowThreads, d_in, d_out, d_partials, rows, cols, plan.splits,
                           plan.seg_len, pre);
  if (err != cudaSuccess || !split) return err;
  return launch("argmax.combine", ArgmaxCombineKernel, CombineGrid(rows, mp), kRowThreads,
                static_cast<const ArgmaxStat*>(d_partials), d_out, rows, plan.splits);
}

}  // namespace

size_t RowOpsWorkspaceBytes() { return detail::kRowOpsWorkspaceBytes; }

cudaError_t RowReduce(const float* d_in, float* d_out, int64_t rows, int64_t cols,
                      RowReduceKind kind, const EwProgram& pre, void* d_workspace,
                      size_t workspace_bytes, const LaunchConfig& config, int* kernels) {
  detail::Launcher launch(config, kernels);
  if (const cudaError_t err = detail::ValidateRowArgs(d_in, d_out, rows, cols, pre, d_workspace,
                                                      workspace_bytes, config);
      err != cudaSuccess) {
    return err;
  }
  if (!IsValidRowReduceKind(kind)) return cudaErrorInvalidValue;
  return DispatchRowReduce(d_in, d_out, rows, cols, kind, pre, d_workspace, launch);
}

cudaError_t RowSum(const float* d_in, float* d_out, int64_t rows, int64_t cols,
                   const EwProgram& pre, void* d_workspace, size_t workspace_bytes,
                   const LaunchConfig& config, int* kernels) {
  return RowReduce(d_in, d_out, rows, cols, RowReduceKind::kSum, pre, d_workspace,
                   workspace_bytes, config, kernels);
}

cudaError_t RowArgmax(const float* d_in, int64_t* d_out, int64_t rows, int64_t cols,
                      const EwProgram& pre, void* d_workspace, size_t workspace_bytes,
                      const LaunchConfig& config, int* kernels) {
  detail::Launcher launch(config, kernels);
  if (const cudaError_t err = detail::ValidateRowArgs(d_in, d_out, rows, cols, pre, d_workspace,
                                                      workspace_bytes, config);
      err != cudaSuccess) {
    return err;
  }
  if (!detail::IsAligned(d_out, alignof(int64_t))) return cudaErrorInvalidValue;
  return DispatchRowArgmax(d_in, d_out, rows, cols, pre, d_workspace, launch);
}

std::vector<KernelLaunchInfo> DescribeRowReduce(int64_t rows, int64_t cols, RowReduceKind kind,
                                                const LaunchConfig& config) {
  std::vector<KernelLaunchInfo> out;
  if (detail::ValidateRowShape(rows, cols, config) != cudaSuccess ||
      !IsValidRowReduceKind(kind)) {
    return out;
  }
  detail::Launcher launch(config, &out);
  (void)DispatchRowReduce(nullptr, nullptr, rows, cols, kind, EwProgram{}, nullptr, launch);
  return out;
}

std::vector<KernelLaunchInfo> DescribeRowArgmax(int64_t rows, int64_t cols,
                                                const LaunchConfig& config) {
  std::vector<KernelLaunchInfo> out;
  if (detail::ValidateRowShape(rows, cols, config) != cudaSuccess) return out;
  detail::Launcher launch(config, &out);
  (void)DispatchRowArgmax(nullptr, nullptr, rows, cols, EwProgram{}, nullptr, launch);
  return out;
}

}  // namespace gpupipe::kernels::cuda
