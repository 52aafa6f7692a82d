// RowNormalize (L2 normalization, standardization): y = (x - shift) / scale along each row, as
// an Op of the row multipass skeleton (detail/row_multipass.cuh), plus the entry points. One Op
// serves both kinds: the kind is a runtime value, a block-uniform branch that costs far less
// than the memory traffic and keeps one kernel per path for both. The statistics:
//  - one-kernel paths (the row in registers or shared memory): L2, the sum of squares;
//    standardize, two exact passes, the mean of the deviations from the row's first element x0
//    (so a constant row has a mean of exactly x0 and m2 exactly 0, hence 0 / 0 = NaN as the
//    reference), then m2 = sum (x - mean)^2;
//  - two-kernel paths: per segment the moments {n, mean, m2} (standardize: Welford within a
//    thread, Chan merges across threads and segments) or the sum of squares (L2).
// Neither has the E[x^2] - E[x]^2 cancellation.
#include <cstdint>

#include "kernels/common/elementwise_program.h"
#include "kernels/common/row_ops.h"
#include "kernels/cuda/detail/element_access.cuh"
#include "kernels/cuda/detail/launch.cuh"
#include "kernels/cuda/detail/row_multipass.cuh"
#include "kernels/cuda/detail/row_multipass_dispatch.cuh"
#include "kernels/cuda/detail/row_plan.cuh"
#include "kernels/cuda/detail/row_resident.cuh"
#include "kernels/cuda/detail/row_smem.cuh"
#include "kernels/cuda/detail/warp_reduce.cuh"
#include "kernels/cuda/ops.h"

namespace gpupipe::kernels::cuda {
namespace {

using detail::MomentStat;

// y = (x - shift) / scale. A true division (not a multiply by 1 / scale): one rounding, and a
// zero scale gives 0 / 0 = NaN for a zero or constant row, as the reference.
template <typename C>
struct Affine {
  C shift;
  C scale;
  __device__ __forceinline__ C operator()(C x) const { return (x - shift) / scale; }
};

template <typename C>
struct NormalizeOp {
  using Compute = C;
  using Param = RowNormalizeKind;
  using Stat = MomentStat<C>;
  using Summary = Affine<C>;

  // Block-per-row rows all run with kRowThreads threads, and long rows are never split into
  // register-resident segments (the streamed two-kernel path takes them).
  static constexpr int kNarrowRowThreads = detail::kRowThreads;
  static constexpr int kSegmentPerThread = 0;

  RowNormalizeKind kind;

  __host__ __device__ explicit NormalizeOp(RowNormalizeKind kind_) : kind(kind_) {}

  detail::RowOpNames Names() const {
    return kind == RowNormalizeKind::kL2Normalize
               ? detail::RowOpNames{"l2normalize.rows", "l2normalize.stats",
                                    "l2normalize.normalize"}
               : detail::RowOpNames{"standardize.rows", "standardize.stats",
                                    "standardize.normalize"};
  }

  // ---- one kernel --------------------------------------------------------------------------
  // Each reduction sums over the row's threads (reduce.Reduce: as often as needed).
  template <int K, typename InRow, typename First, bool kBlock>
  __device__ __forceinline__ Affine<C> ResidentRow(
      const C (&x)[K], int cols, InRow&& in_row, First&& first,
      const detail::RowReducer<kBlock, C>& reduce) const {
    if (kind == RowNormalizeKind::kL2Normalize) {
      C ss = C(0);
#pragma unroll
      for (int k = 0; k < K; ++k) {
        if (in_row(k)) ss = detail::MathFma(x[k], x[k], ss);
      }
      return {C(0), detail::MathSqrt(reduce.Reduce(ss, detail::SumOp{}, C(0)))};
    }
    const C x0 = first();
    C d = C(0);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      if (in_row(k)) d += x[k] - x0;
    }
    const C mean = x0 + reduce.Reduce(d, detail::SumOp{}, C(0)) / static_cast<C>(cols);
    C m2 = C(0);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const C dev = x[k] - mean;
      if (in_row(k)) m2 = detail::MathFma(dev, dev, m2);
    }
    return {mean, detail::MathSqrt(reduce.Reduce(m2, detail::SumOp{}, C(0)) /
                                   static_cast<C>(cols))};
  }

  // As ResidentRow with the row in shared memory, the first statistic (sum of squares, or the
  // sum of deviations from x0) folded into the load; two reductions at most, alternating.
  template <typename S>
  __device__ __forceinline__ Affine<C> SharedMemoryRow(
      detail::SmemRow<S>& r, const S* p, const EwProgram& pre,
      const detail::RowReducer<true, C>& reduce) const {
    const int cols_ = r.cols;
    if (kind == RowNormalizeKind::kL2Normalize) {
      C ss = C(0);
      r.Load(p, pre, [&](C x) { ss = detail::MathFma(x, x, ss); });
      ss = reduce.First(ss, detail::SumOp{}, C(0));
      return {C(0), detail::MathSqrt(ss)};
    }
    const C x0 = ApplyEw(pre, detail::LoadElem(p));
    C d = C(0);
    r.Load(p, pre, [&](C x) { d += x - x0; });
    d = reduce.First(d, detail::SumOp{}, C(0));
    const C mean = x0 + d / static_cast<C>(cols_);
    C m2 = C(0);
    r.Visit([&](C x) {
      const C dev = x - mean;
      m2 = detail::MathFma(dev, dev, m2);
    });
    m2 = reduce.Second(m2, detail::SumOp{}, C(0));
    return {mean, detail::MathSqrt(m2 / static_cast<C>(cols_))};
  }

  // ---- two kernels -------------------------------------------------------------------------
  // L2 keeps only m2, as the plain sum of squares.
  __device__ __forceinline__ Stat Empty() const { return detail::EmptyMomentStat<C>(); }
  __device__ __forceinline__ void Push(Stat& st, C x) const {
    if (kind == RowNormalizeKind::kL2Normalize) {
      st.m2 = detail::MathFma(x, x, st.m2);
    } else {
      detail::PushMoment(st, x);
    }
  }
  template <int N>
  __device__ __forceinline__ void PushVec(Stat& st, const C (&x)[N]) const {
    if (kind == RowNormalizeKind::kL2Normalize) {
      C ss = C(0);
#pragma unroll
      for (int k = 0; k < N; ++k) ss = detail::MathFma(x[k], x[k], ss);
      st.m2 += ss;
    } else {
      detail::PushMomentVec(st, x);
    }
  }
  __device__ __forceinline__ Stat Merge(Stat a, Stat b) const {
    if (kind == RowNormalizeKind::kL2Normalize) return {C(0), C(0), a.m2 + b.m2, C(0)};
    return detail::MergeMoments(a, b);
  }
  __device__ __forceinline__ Summary Summarize(Stat st, int64_t cols) const {
    if (kind == RowNormalizeKind::kL2Normalize) return {C(0), detail::MathSqrt(st.m2)};
    return {st.mean, detail::MathSqrt(st.m2 / static_cast<C>(cols))};
  }
  __device__ __forceinline__ Affine<C> Transform(Summary a) const { return a; }
};

// The op's dtype dispatch: float32, float64, float16.
cudaError_t DispatchRowNormalizeType(const void* d_in, ElementType type, void* d_out,
                                     int64_t rows, int64_t cols, RowNormalizeKind kind,
                                     const EwProgram& pre, void* d_workspace,
                                     detail::Launcher& launch) {
  return detail::DispatchType<true, true, false>(type, [&](auto tag) {
    using S = decltype(tag);
    return detail::DispatchRowMultipass<NormalizeOp<detail::ComputeOf<S>>>(
        static_cast<const S*>(d_in), static_cast<S*>(d_out), rows, cols, kind, pre, d_workspace,
        launch);
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
