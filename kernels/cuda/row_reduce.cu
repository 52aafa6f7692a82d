// RowReduce (sum, min, max, mean, norm2) and RowArgmax: entry points and dispatch. Shapes are
// mapped by detail::PlanRows:
//  - cols <= kGroupMaxCols: a group of 1..32 lanes per row, one kernel writing d_out;
//  - long rows, enough of them: a block per row, one kernel writing d_out;
//  - few long rows: each row split into segments over several blocks, which write partial
//    results to the workspace, then a combine kernel (warp per row) merges them.
// The reduction kind is a kernel argument (see detail::ReduceOp), so all kinds share kernels;
// kernels are templated on the storage type S (float, double, __half, int32_t), and
// accumulate in detail::ReduceAccOf<S> (float, double, float, int64). The block kernel of
// RowReduce also takes the staging strategy (detail::SegmentLoader, stages a runtime value):
// 4 types x 5 strategies; the other kernels load directly.
// PDL: every kernel waits for its predecessor before its first global access (the previous op
// may still read d_out or, for the partials kernel, the shared workspace) and triggers its
// dependent after its last store.
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/detail/launch.cuh"
#include "kernels/cuda/detail/row_access.cuh"
#include "kernels/cuda/detail/row_plan.cuh"
#include "kernels/cuda/detail/staging/segment.cuh"
#include "kernels/cuda/detail/warp_reduce.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/tuning/row_reduce_policy.h"
#include "kernels/cuda/tuning/staging_table.h"

namespace gpupipe::kernels::cuda {
namespace {

using detail::ArgmaxStat;
using detail::ComputeOf;
using detail::kRowBlockMinBlocksPerSm;
using detail::kRowThreads;
using detail::kRowUnroll;
using detail::kVecElems;
using detail::kWarpSize;
using detail::ReduceAccOf;
using detail::ReduceOp;
using ReducePolicy = tuning::RowReducePolicy;

// Writes a row's result in the op's output type: S, except int32 sums (int64).
template <typename S, typename A>
__device__ __forceinline__ void StoreReduced(void* d_out, int64_t row, A v, RowReduceKind kind) {
  if constexpr (std::is_same_v<S, int32_t>) {
    if (kind == RowReduceKind::kSum) {
      static_cast<int64_t*>(d_out)[row] = v;
    } else {
      static_cast<int32_t*>(d_out)[row] = static_cast<int32_t>(v);
    }
  } else {
    static_cast<S*>(d_out)[row] = detail::FromCompute<S>(v);
  }
}

// ---- RowReduce ---------------------------------------------------------------------------------

// A group of `lanes` lanes (power of two <= 32) per row; warp-uniform loop bounds so the
// full-warp shuffles see every lane.
template <typename S>
__global__ void __launch_bounds__(kRowThreads)
    ReduceGroupKernel(const S* d_in, void* d_out, int64_t rows, int cols, int lanes,
                      RowReduceKind kind, EwProgram pre) {
  using A = ReduceAccOf<S>;
  const ReduceOp<A> op{kind};
  const int lane = threadIdx.x % kWarpSize;
  const int rows_per_warp = kWarpSize / lanes;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / kWarpSize;
  detail::WaitForPrimaryGrids();

  for (int64_t base = warp * rows_per_warp; base < rows; base += warps * rows_per_warp) {
    const int64_t row = base + lane / lanes;
    A acc = op.Identity();
    if (row < rows) {
      detail::VisitShortRow<kRowUnroll>(d_in + row * cols, cols, lane % lanes, lanes,
                                        [&](int, ComputeOf<S> x) {
                                          acc = op.Push(acc, ApplyEw(pre, x));
                                        });
    }
    acc = detail::WarpAllReduce(acc, op, lanes);
    if (row < rows && lane % lanes == 0) StoreReduced<S>(d_out, row, op.Finalize(acc, cols), kind);
  }
  detail::AllowDependentGrids();
}

// A block per segment (row r, split s) of seg_len columns; writes d_partials[r * splits + s]
// (the raw partial), or, when splits == 1, the row's final result to d_out. Loads follow the
// staging strategy St (detail::SegmentLoader; `stages` is for the staged ones).
// Occupancy floor of the block reduction (__launch_bounds__): higher for the direct strategy
// on 4-byte types and for the plain float32 sum, which fit the fewer registers it leaves them
// (RowReducePolicy says why), the row default otherwise.
// kPlainSum: the instance for a plain float32 sum (no prologue program, direct loads), without
// the program interpreter and the runtime reduction kind. Its results are bit for bit the
// general instance's: the same loads and the same pairwise order, and an empty program is the
// identity.
template <typename S, Staging St, bool kPlainSum>
constexpr int kReduceMinBlocksPerSm = kPlainSum ? ReducePolicy::kPlainSumMinBlocksPerSm
                                      : St == Staging::kDirect && sizeof(S) == 4
                                          ? ReducePolicy::kDirectNarrowMinBlocksPerSm
                                          : kRowBlockMinBlocksPerSm;
template <typename S, Staging St, bool kPlainSum = false>
__global__ void __launch_bounds__(kRowThreads, kReduceMinBlocksPerSm<S, St, kPlainSum>)
    ReduceBlockKernel(const S* d_in, void* d_out, ReduceAccOf<S>* d_partials, int64_t rows,
                      int64_t cols, int64_t splits, int64_t seg_len, RowReduceKind kind_arg,
                      EwProgram pre, int stages) {
  static_assert(!kPlainSum || (St == Staging::kDirect && std::is_same_v<S, float>));
  using A = ReduceAccOf<S>;
  using C = ComputeOf<S>;
  __shared__ A scratch[kWarpSize];
  // A compile-time kind lets the compiler drop the other kinds' code.
  const RowReduceKind kind = kPlainSum ? RowReduceKind::kSum : kind_arg;
  const ReduceOp<A> op{kind};
  const int64_t segments = rows * splits;
  detail::SegmentLoader<St, kRowUnroll> loader(stages);
  detail::WaitForPrimaryGrids();

  for (int64_t seg = blockIdx.x; seg < segments; seg += gridDim.x) {
    const int64_t row = seg / splits;
    const int64_t begin = (seg - row * splits) * seg_len;
    const int64_t len = min(seg_len, cols - begin);
    A acc = op.Identity();
    loader.Visit(
        d_in + row * cols + begin, len,
        [&](int64_t, C x) {
          if constexpr (kPlainSum) {
            acc = op.Push(acc, x);
          } else {
            acc = op.Push(acc, ApplyEw(pre, x));
          }
        },
        [&](int64_t, C (&x)[kVecElems<S>]) {
          if constexpr (!kPlainSum) ApplyEwN(pre, x);
          acc = op.PushVec(acc, x);
        });
    acc = detail::BlockReduce(acc, op, op.Identity(), scratch);
    if (threadIdx.x == 0) {
      if (splits == 1) {
        StoreReduced<S>(d_out, row, op.Finalize(acc, cols), kind);
      } else {
        d_partials[seg] = acc;
      }
    }
    __syncthreads();  // scratch is reused by the next segment
  }
  loader.Quit();
  detail::AllowDependentGrids();
}

// Block per row: the same merge for rows split many ways (one row of 2^28 has hundreds of
// partials), every thread loading its share at once; a warp would load them in dependent
// rounds of L2 latency.
template <typename S>
__global__ void __launch_bounds__(kRowThreads)
    ReduceCombineBlockKernel(const ReduceAccOf<S>* d_partials, void* d_out, int64_t rows,
                             int64_t cols, int64_t splits, RowReduceKind kind) {
  using A = ReduceAccOf<S>;
  __shared__ A scratch[kWarpSize];
  const ReduceOp<A> op{kind};
  detail::WaitForPrimaryGrids();

  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    A acc = op.Identity();
#pragma unroll 4
    for (int64_t k = threadIdx.x; k < splits; k += kRowThreads) {
      acc = op(acc, detail::LoadThroughL2(&d_partials[row * splits + k]));
    }
    acc = detail::BlockReduce(acc, op, op.Identity(), scratch);
    if (threadIdx.x == 0) StoreReduced<S>(d_out, row, op.Finalize(acc, cols), kind);
    __syncthreads();  // scratch is reused by the next row
  }
  detail::AllowDependentGrids();
}

// Warp per row: merges the row's `splits` partials and finalizes.
template <typename S>
__global__ void __launch_bounds__(kRowThreads)
    ReduceCombineKernel(const ReduceAccOf<S>* d_partials, void* d_out, int64_t rows,
                        int64_t cols, int64_t splits, RowReduceKind kind) {
  using A = ReduceAccOf<S>;
  const ReduceOp<A> op{kind};
  const int lane = threadIdx.x % kWarpSize;
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / kWarpSize;
  detail::WaitForPrimaryGrids();

  for (int64_t row = first; row < rows; row += warps) {
    A acc = op.Identity();
    // Unrolled so several partials are in flight: splits reaches a few hundred.
#pragma unroll 4
    for (int64_t k = lane; k < splits; k += kWarpSize) {
      acc = op(acc, detail::LoadThroughL2(&d_partials[row * splits + k]));
    }
    acc = detail::WarpAllReduce(acc, op);
    if (lane == 0) StoreReduced<S>(d_out, row, op.Finalize(acc, cols), kind);
  }
  detail::AllowDependentGrids();
}

// ---- RowArgmax ---------------------------------------------------------------------------------

template <typename C>
__device__ __forceinline__ void PushArgmax(ArgmaxStat<C>& st, C x, int64_t i) {
  st = detail::MergeArgmax(st, {x, i});
}

template <typename S>
__global__ void __launch_bounds__(kRowThreads)
    ArgmaxGroupKernel(const S* d_in, int64_t* d_out, int64_t rows, int cols, int lanes,
                      EwProgram pre) {
  using C = ComputeOf<S>;
  const int lane = threadIdx.x % kWarpSize;
  const int rows_per_warp = kWarpSize / lanes;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / kWarpSize;
  detail::WaitForPrimaryGrids();

  for (int64_t base = warp * rows_per_warp; base < rows; base += warps * rows_per_warp) {
    const int64_t row = base + lane / lanes;
    ArgmaxStat<C> st = detail::EmptyArgmaxStat<C>();
    if (row < rows) {
      detail::VisitShortRow<kRowUnroll>(d_in + row * cols, cols, lane % lanes, lanes,
                                        [&](int i, C x) { PushArgmax(st, ApplyEw(pre, x), i); });
    }
    st = detail::WarpAllReduce(st, detail::ArgmaxMergeOp{}, lanes);
    if (row < rows && lane % lanes == 0) d_out[row] = st.i;
  }
  detail::AllowDependentGrids();
}

// The per-thread update of the block path, where each accumulator sees its elements in
// increasing column order: a later element wins only if strictly larger, or the first NaN
// (cheaper than MergeArgmax, which must also order ties by index). An empty accumulator
// (index INT64_MAX) takes any element, so an all -inf (or INT32_MIN) row still finds one.
// The index is the element's offset in its segment (32 bits: cheaper than the 64-bit column,
// whose add and select cost two instructions each per element); -1 marks an empty one.
template <typename C>
struct SegmentArgmax {
  C v;
  int32_t i;
};

template <typename C>
__device__ __forceinline__ void PushArgmaxInOrder(SegmentArgmax<C>& st, C x, int32_t i) {
  const bool take = x > st.v || (x != x && st.v == st.v) || st.i < 0;
  st.v = take ? x : st.v;
  st.i = take ? i : st.i;
}

// Segments of the block path are at most this long, so SegmentArgmax indexes them.
constexpr int64_t kArgmaxMaxSegment = INT32_MAX;

// Block per segment; with splits == 1 writes the index to d_out, otherwise the segment's
// candidate to d_partials[seg]. Each thread keeps one accumulator per vector element, so the
// updates of a vector are independent (no chain through one accumulator), merged once per
// segment.
template <typename S>
__global__ void __launch_bounds__(kRowThreads, kRowBlockMinBlocksPerSm)
    ArgmaxBlockKernel(const S* d_in, int64_t* d_out, ArgmaxStat<ComputeOf<S>>* d_partials,
                      int64_t rows, int64_t cols, int64_t splits, int64_t seg_len,
                      EwProgram pre) {
  using C = ComputeOf<S>;
  __shared__ ArgmaxStat<C> scratch[kWarpSize];
  const int64_t segments = rows * splits;
  detail::WaitForPrimaryGrids();

  for (int64_t seg = blockIdx.x; seg < segments; seg += gridDim.x) {
    const int64_t row = seg / splits;
    const int64_t begin = (seg - row * splits) * seg_len;
    const int64_t len = min(seg_len, cols - begin);
    SegmentArgmax<C> acc[kVecElems<S>];
#pragma unroll
    for (int k = 0; k < kVecElems<S>; ++k) acc[k] = {detail::EmptyArgmaxStat<C>().v, -1};
    // The head comes before and the tail after every body vector, so accumulator 0 sees them
    // in order too.
    detail::VisitSegment<kRowUnroll>(
        d_in + row * cols + begin, len, threadIdx.x, blockDim.x,
        [&](int64_t i, C x) {
          PushArgmaxInOrder(acc[0], ApplyEw(pre, x), static_cast<int32_t>(i));
        },
        [&](int64_t i, C (&x)[kVecElems<S>]) {
          ApplyEwN(pre, x);
          const auto at = static_cast<int32_t>(i);
#pragma unroll
          for (int k = 0; k < kVecElems<S>; ++k) PushArgmaxInOrder(acc[k], x[k], at + k);
        });
    ArgmaxStat<C> st = detail::EmptyArgmaxStat<C>();
#pragma unroll
    for (int k = 0; k < kVecElems<S>; ++k) {
      if (acc[k].i >= 0) st = detail::MergeArgmax(st, ArgmaxStat<C>{acc[k].v, begin + acc[k].i});
    }
    st = detail::BlockReduce(st, detail::ArgmaxMergeOp{}, detail::EmptyArgmaxStat<C>(),
                             scratch);
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

template <typename C>
__global__ void __launch_bounds__(kRowThreads)
    ArgmaxCombineKernel(const ArgmaxStat<C>* d_partials, int64_t* d_out, int64_t rows,
                        int64_t splits) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / kWarpSize;
  detail::WaitForPrimaryGrids();

  for (int64_t row = first; row < rows; row += warps) {
    ArgmaxStat<C> st = detail::EmptyArgmaxStat<C>();
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

// The block kernel of element type S and strategy `staging` (never kAuto).
template <typename S>
using ReduceBlockFn = void (*)(const S*, void*, ReduceAccOf<S>*, int64_t, int64_t, int64_t,
                               int64_t, RowReduceKind, EwProgram, int);
// The block kernel for a resolved staging strategy; a plain float32 sum (kind sum, no
// prologue program) with direct loads takes the kPlainSum instance.
template <typename S>
ReduceBlockFn<S> ReduceBlockKernelFor(Staging staging, RowReduceKind kind,
                                      const EwProgram& pre) {
  if constexpr (std::is_same_v<S, float>) {
    if (staging == Staging::kDirect && kind == RowReduceKind::kSum && pre.count == 0) {
      return ReduceBlockKernel<S, Staging::kDirect, true>;
    }
  }
  switch (staging) {
    case Staging::kPipeline: return ReduceBlockKernel<S, Staging::kPipeline>;
    case Staging::kPipelineThread: return ReduceBlockKernel<S, Staging::kPipelineThread>;
    case Staging::kPrimitives: return ReduceBlockKernel<S, Staging::kPrimitives>;
    case Staging::kBulk: return ReduceBlockKernel<S, Staging::kBulk>;
    case Staging::kDirect:
    case Staging::kAuto: break;
  }
  return ReduceBlockKernel<S, Staging::kDirect>;
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

// Few long rows split into this many segments an SM, handed out to the resident blocks as they
// finish (a block per segment): more, shorter segments for large inputs (RowReducePolicy).
int ReduceSegmentsPerSm(int64_t rows, int64_t cols, size_t element_bytes) {
  return rows * cols * static_cast<int64_t>(element_bytes) >= ReducePolicy::kLargeInputBytes
             ? ReducePolicy::kSegmentsPerSmLarge
             : ReducePolicy::kSegmentsPerSm;
}
// Rows split into more partials than this merge with a block per row (ReduceCombineBlockKernel).
constexpr int64_t kWarpCombineMaxSplits = ReducePolicy::kWarpCombineMaxSplits;

// The one sizing/dispatch path of RowReduce, for launching and for describing. Few long rows
// split into ReduceSegmentsPerSm segments an SM, and rows split into more than
// kWarpCombineMaxSplits partials merge with a block per row, every thread loading its share
// at once: a warp merging hundreds of partials would load them in dependent rounds.
template <typename S>
cudaError_t DispatchRowReduce(const S* d_in, void* d_out, int64_t rows, int64_t cols,
                              RowReduceKind kind, const EwProgram& pre, void* d_workspace,
                              detail::Launcher& launch) {
  using A = ReduceAccOf<S>;
  const int mp = launch.config().multiprocessors;
  const detail::RowPlan plan = detail::PlanRows(rows, cols, mp, sizeof(A), detail::kMinSegmentCols,
                                                ReduceSegmentsPerSm(rows, cols, sizeof(S)));
  const ReduceNames names = NamesOf(kind);

  if (plan.group) {
    const int64_t grid = detail::CapGrid(detail::CeilDiv(rows, kRowThreads / plan.lanes), mp);
    return launch(names.rows, ReduceGroupKernel<S>, grid, kRowThreads, d_in, d_out, rows,
                  static_cast<int>(cols), plan.lanes, kind, pre);
  }

  // plan.splits > 1 only for rows < the grid target, so rows * splits is far below the
  // workspace capacity: no batching.
  const bool split = plan.splits > 1;
  auto* d_partials = static_cast<A*>(d_workspace);
  const int64_t grid = detail::SegmentGrid(rows * plan.splits, mp);
  const tuning::StagingChoice staging = tuning::ResolveStaging(
      launch.config(), tuning::StagingFamily::kRowReduce, detail::StorageTraits<S>::kType, rows,
      cols);
  cudaError_t err = launch(split ? names.partials : names.rows,
                           ReduceBlockKernelFor<S>(staging.staging, kind, pre), grid,
                           kRowThreads, d_in, d_out, d_partials, rows, cols, plan.splits,
                           plan.seg_len, kind, pre, staging.stages);
  if (err != cudaSuccess || !split) return err;
  if (plan.splits > kWarpCombineMaxSplits) {
    return launch(names.combine, ReduceCombineBlockKernel<S>, detail::CapGrid(rows, mp),
                  kRowThreads, static_cast<const A*>(d_partials), d_out, rows, cols, plan.splits,
                  kind);
  }
  return launch(names.combine, ReduceCombineKernel<S>, CombineGrid(rows, mp), kRowThreads,
                static_cast<const A*>(d_partials), d_out, rows, cols, plan.splits, kind);
}

template <typename S>
cudaError_t DispatchRowArgmax(const S* d_in, int64_t* d_out, int64_t rows, int64_t cols,
                              const EwProgram& pre, void* d_workspace,
                              detail::Launcher& launch) {
  using Stat = ArgmaxStat<ComputeOf<S>>;
  const int mp = launch.config().multiprocessors;
  const detail::RowPlan plan = detail::PlanRows(rows, cols, mp, sizeof(Stat));

  if (plan.group) {
    const int64_t grid = detail::CapGrid(detail::CeilDiv(rows, kRowThreads / plan.lanes), mp);
    return launch("argmax.rows", ArgmaxGroupKernel<S>, grid, kRowThreads, d_in, d_out, rows,
                  static_cast<int>(cols), plan.lanes, pre);
  }
  const bool split = plan.splits > 1;
  auto* d_partials = static_cast<Stat*>(d_workspace);
  if (plan.seg_len > kArgmaxMaxSegment) return cudaErrorInvalidValue;
  const int64_t grid = detail::SegmentGrid(rows * plan.splits, mp);
  cudaError_t err = launch(split ? "argmax.partials" : "argmax.rows", ArgmaxBlockKernel<S>,
                           grid, kRowThreads, d_in, d_out, d_partials, rows, cols, plan.splits,
                           plan.seg_len, pre);
  if (err != cudaSuccess || !split) return err;
  return launch("argmax.combine", ArgmaxCombineKernel<ComputeOf<S>>, CombineGrid(rows, mp),
                kRowThreads, static_cast<const Stat*>(d_partials), d_out, rows, plan.splits);
}

// The dtype dispatch of each op: RowReduce takes every float type and, for sum/min/max, int32;
// RowArgmax every type but int64.
cudaError_t DispatchRowReduceType(const void* d_in, ElementType type, void* d_out, int64_t rows,
                                  int64_t cols, RowReduceKind kind, const EwProgram& pre,
                                  void* d_workspace, detail::Launcher& launch) {
  if (!RowReduceAccepts(type, kind)) return cudaErrorInvalidValue;
  return detail::DispatchType<true, true, true>(type, [&](auto tag) {
    using S = decltype(tag);
    return DispatchRowReduce<S>(static_cast<const S*>(d_in), d_out, rows, cols, kind, pre,
                                d_workspace, launch);
  });
}

cudaError_t DispatchRowArgmaxType(const void* d_in, ElementType type, int64_t* d_out,
                                  int64_t rows, int64_t cols, const EwProgram& pre,
                                  void* d_workspace, detail::Launcher& launch) {
  return detail::DispatchType<true, true, true>(type, [&](auto tag) {
    using S = decltype(tag);
    return DispatchRowArgmax<S>(static_cast<const S*>(d_in), d_out, rows, cols, pre,
                                d_workspace, launch);
  });
}

}  // namespace

size_t RowOpsWorkspaceBytes() { return detail::kRowOpsWorkspaceBytes; }

cudaError_t RowReduce(const void* d_in, ElementType in_type, void* d_out, int64_t rows,
                      int64_t cols, RowReduceKind kind, const EwProgram& pre, void* d_workspace,
                      size_t workspace_bytes, const LaunchConfig& config, int* kernels) {
  detail::Launcher launch(config, kernels);
  if (!IsValidRowReduceKind(kind) || !RowReduceAccepts(in_type, kind)) {
    return cudaErrorInvalidValue;
  }
  if (const cudaError_t err = detail::ValidateRowArgs(
          d_in, in_type, d_out, RowReduceOutputType(in_type, kind), rows, cols, pre,
          d_workspace, workspace_bytes, config);
      err != cudaSuccess) {
    return err;
  }
  return DispatchRowReduceType(d_in, in_type, d_out, rows, cols, kind, pre, d_workspace, launch);
}

cudaError_t RowSum(const void* d_in, ElementType in_type, void* d_out, int64_t rows,
                   int64_t cols, const EwProgram& pre, void* d_workspace,
                   size_t workspace_bytes, const LaunchConfig& config, int* kernels) {
  return RowReduce(d_in, in_type, d_out, rows, cols, RowReduceKind::kSum, pre, d_workspace,
                   workspace_bytes, config, kernels);
}

cudaError_t RowArgmax(const void* d_in, ElementType in_type, int64_t* d_out, int64_t rows,
                      int64_t cols, const EwProgram& pre, void* d_workspace,
                      size_t workspace_bytes, const LaunchConfig& config, int* kernels) {
  detail::Launcher launch(config, kernels);
  if (const cudaError_t err =
          detail::ValidateRowArgs(d_in, in_type, d_out, ElementType::kInt64, rows, cols, pre,
                                  d_workspace, workspace_bytes, config);
      err != cudaSuccess) {
    return err;
  }
  return DispatchRowArgmaxType(d_in, in_type, d_out, rows, cols, pre, d_workspace, launch);
}

std::vector<KernelLaunchInfo> DescribeRowReduce(int64_t rows, int64_t cols, ElementType type,
                                                RowReduceKind kind, const LaunchConfig& config) {
  std::vector<KernelLaunchInfo> out;
  if (detail::ValidateRowShape(rows, cols, config) != cudaSuccess ||
      !IsValidRowReduceKind(kind)) {
    return out;
  }
  detail::Launcher launch(config, &out);
  (void)DispatchRowReduceType(nullptr, type, nullptr, rows, cols, kind, EwProgram{}, nullptr,
                              launch);
  return out;
}

std::vector<KernelLaunchInfo> DescribeRowArgmax(int64_t rows, int64_t cols, ElementType type,
                                                const LaunchConfig& config) {
  std::vector<KernelLaunchInfo> out;
  if (detail::ValidateRowShape(rows, cols, config) != cudaSuccess) return out;
  detail::Launcher launch(config, &out);
  (void)DispatchRowArgmaxType(nullptr, type, nullptr, rows, cols, EwProgram{}, nullptr, launch);
  return out;
}

}  // namespace gpupipe::kernels::cuda
