// RowSoftmax: y = exp(x - m) / s along each row, m the row's max and s the sum of exp(x - m),
// as an Op of the row multipass skeleton (detail/row_multipass.cuh), plus the entry points.
// The paths and their kernels are the skeleton's; what is softmax's own:
//  - the one-kernel paths take an exact max, then the sum of exp(x - max) (one expf per
//    element, no online rescaling), and write exp(x - m) * (1 / s);
//  - the streamed two-kernel paths keep an online softmax {max, sum of exp(x - max)} per
//    segment (SoftmaxStat), merged per row in the normalization kernel;
//  - few long rows split into segments held in registers (kSegmentPerThread), so their
//    statistics are exact too, and the normalization loads its segment before waiting;
//  - short block-per-row rows run in narrower blocks (kNarrowRowThreads).
// Same results on every path up to float rounding, with the reference's NaNs: an +inf (m =
// +inf) or a NaN makes the row NaN, and so does an all -inf row (exp(-inf - -inf)).
#include <cmath>
#include <cstdint>

#include "kernels/common/elementwise_program.h"
#include "kernels/cuda/detail/element_access.cuh"
#include "kernels/cuda/detail/launch.cuh"
#include "kernels/cuda/detail/row_access.cuh"
#include "kernels/cuda/detail/row_multipass.cuh"
#include "kernels/cuda/detail/row_multipass_dispatch.cuh"
#include "kernels/cuda/detail/row_resident.cuh"
#include "kernels/cuda/detail/row_smem.cuh"
#include "kernels/cuda/detail/warp_reduce.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/tuning/row_normalize_policy.h"

namespace gpupipe::kernels::cuda {
namespace {

using detail::kWarpSize;
using detail::SoftmaxStat;

// 1 / s for the normalization. A +inf in the row leaves m = +inf with a finite s; the
// reference (exp(inf - inf) in the sum) gives NaN for the whole row, so match that.
template <typename C>
__device__ __forceinline__ C InverseSum(SoftmaxStat<C> st) {
  return st.m == detail::Infinity<C>() ? C(NAN) : C(1) / st.s;
}

// The write of the one-kernel paths, whose values already hold exp(x - m): y = x * (1 / s).
template <typename C>
struct ScaleBy {
  C inv;
  __device__ __forceinline__ C operator()(C x) const { return x * inv; }
};

// The write of the two-kernel paths: y = exp(x - m) * (1 / s).
template <typename C>
struct ExpScaleBy {
  C m;
  C inv;
  __device__ __forceinline__ C operator()(C x) const { return detail::MathExp(x - m) * inv; }
};

template <typename C>
struct SoftmaxOp {
  using Compute = C;
  using Param = detail::NoRowOpParam;
  using Stat = SoftmaxStat<C>;
  // The row's {m, s}; each thread takes 1 / s itself.
  using Summary = SoftmaxStat<C>;

  // Block-per-row rows of at most kNarrowRowThreads * kResidentMidPerThread columns run with
  // blocks of kNarrowRowThreads threads, so that each thread holds kResidentMidPerThread
  // values (RowSoftmaxPolicy says why).
  static constexpr int kNarrowRowThreads = tuning::RowSoftmaxPolicy::kNarrowThreads;
  // Split long rows whose segments fit in registers (kRowThreads * kSegmentPerThread
  // columns): each block holds its segment, so the statistics are an exact max, then a sum of
  // exp(x - max) (no online rescaling per element), and the normalization loads its segment
  // before waiting on the statistics.
  static constexpr int kSegmentPerThread = tuning::RowSoftmaxPolicy::kSegmentPerThread;

  __host__ __device__ explicit SoftmaxOp(Param) {}

  detail::RowOpNames Names() const {
    return {"softmax.rows", "softmax.stats", "softmax.normalize"};
  }

  // ---- one kernel --------------------------------------------------------------------------
  // The row's values in registers: exact max, then exp(x - max) in place while summing.
  template <int K, typename InRow, typename First, bool kBlock>
  __device__ __forceinline__ ScaleBy<C> ResidentRow(
      C (&x)[K], int /*cols*/, InRow&& in_row, First&& /*first*/,
      const detail::RowReducer<kBlock, C>& reduce) const {
    C m = -detail::Infinity<C>();
#pragma unroll
    for (int k = 0; k < K; ++k) {
      if (in_row(k)) m = detail::MathMax(m, x[k]);
    }
    m = reduce.First(m, detail::MaxOp{}, -detail::Infinity<C>());
    C s = C(0);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      x[k] = detail::MathExp(x[k] - m);
      if (in_row(k)) s += x[k];
    }
    s = reduce.Second(s, detail::SumOp{}, C(0));
    return {C(1) / s};
  }

  // As ResidentRow with the row in shared memory: the max is taken while loading, exp(x - max)
  // replaces each value in place while summing. The max is the only statistic taken while
  // loading: the online statistics {max, sum of exp} folded into the load pass, with one
  // reduction and the exp in the write, would put an exp and its branch in the load loop,
  // which slows the loads more than the extra pass over shared memory costs.
  template <typename S>
  __device__ __forceinline__ ScaleBy<C> SharedMemoryRow(
      detail::SmemRow<S>& r, const S* p, const EwProgram& pre,
      const detail::RowReducer<true, C>& reduce) const {
    C m = -detail::Infinity<C>();
    r.Load(p, pre, [&](C x) { m = detail::MathMax(m, x); });
    m = reduce.First(m, detail::MaxOp{}, -detail::Infinity<C>());
    C s = C(0);
    r.Update([&](C& x) {
      x = detail::MathExp(x - m);
      s += x;
    });
    s = reduce.Second(s, detail::SumOp{}, C(0));
    return {C(1) / s};
  }

  // ---- two kernels: online statistics ------------------------------------------------------
  __device__ __forceinline__ Stat Empty() const { return detail::EmptySoftmaxStat<C>(); }
  __device__ __forceinline__ void Push(Stat& st, C x) const { detail::PushSoftmax(st, x); }
  template <int N>
  __device__ __forceinline__ void PushVec(Stat& st, const C (&x)[N]) const {
#pragma unroll
    for (int k = 0; k < N; ++k) detail::PushSoftmax(st, x[k]);
  }
  __device__ __forceinline__ Stat Merge(Stat a, Stat b) const {
    return detail::MergeSoftmax(a, b);
  }
  __device__ __forceinline__ Summary Summarize(Stat st, int64_t /*cols*/) const { return st; }
  __device__ __forceinline__ ExpScaleBy<C> Transform(Summary st) const {
    return {st.m, InverseSum(st)};
  }

  // ---- two kernels: register-resident segments ----------------------------------------------
  // Statistics {max, sum of exp(x - max)} of a segment of at most kRowThreads *
  // kSegmentPerThread columns. -inf elements contribute exactly 0, so an all -inf segment
  // gives {-inf, 0} (not NaN) and drops out of the row's merge; a NaN element makes s NaN.
  template <typename InRow>
  __device__ __forceinline__ Stat SegmentStat(const C (&x)[kSegmentPerThread], InRow&& in_row,
                                              const detail::RowReducer<true, C>& reduce) const {
    C m = -detail::Infinity<C>();
#pragma unroll
    for (int k = 0; k < kSegmentPerThread; ++k) {
      if (in_row(k)) m = detail::MathMax(m, x[k]);
    }
    m = reduce.First(m, detail::MaxOp{}, -detail::Infinity<C>());
    C s = C(0);
#pragma unroll
    for (int k = 0; k < kSegmentPerThread; ++k) {
      if (in_row(k) && x[k] != -detail::Infinity<C>()) s += detail::MathExp(x[k] - m);
    }
    s = reduce.Second(s, detail::SumOp{}, C(0));
    return {m, s};
  }

  // The max first, then the rescaled sums, so the expf calls are independent rather than a
  // chain of pairwise merges.
  __device__ __forceinline__ Stat MergeSegmentStats(const Stat* st, int64_t splits) const {
    C m = -detail::Infinity<C>();
#pragma unroll 4
    for (int64_t k = threadIdx.x; k < splits; k += kWarpSize) {
      m = detail::MathMax(m, detail::LoadThroughL2(&st[k]).m);
    }
    m = detail::WarpAllReduce(m, detail::MaxOp{});
    C s = C(0);
#pragma unroll 4
    for (int64_t k = threadIdx.x; k < splits; k += kWarpSize) {
      const Stat p = detail::LoadThroughL2(&st[k]);
      // An empty ({-inf, 0}) segment adds 0, even when m is -inf too (exp would give NaN).
      s += p.s == C(0) ? C(0) : p.s * detail::MathExp(p.m - m);
    }
    s = detail::WarpAllReduce(s, detail::SumOp{});
    return {m, s};
  }
};

// The op's dtype dispatch: float32, float64, float16.
cudaError_t DispatchRowSoftmaxType(const void* d_in, ElementType type, void* d_out,
                                   int64_t rows, int64_t cols, const EwProgram& pre,
                                   void* d_workspace, detail::Launcher& launch) {
  return detail::DispatchType<true, true, false>(type, [&](auto tag) {
    using S = decltype(tag);
    return detail::DispatchRowMultipass<SoftmaxOp<detail::ComputeOf<S>>>(
        static_cast<const S*>(d_in), static_cast<S*>(d_out), rows, cols, detail::NoRowOpParam{},
        pre, d_workspace, launch);
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
