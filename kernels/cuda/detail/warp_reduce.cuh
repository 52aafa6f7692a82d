// Warp- and block-level reductions with a fixed butterfly order, so a given launch shape always
// sums in the same order (results are reproducible run to run, not bitwise equal to the CPU).
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include <type_traits>

#include "kernels/common/row_ops.h"
#include "kernels/cuda/detail/element_access.cuh"

namespace gpupipe::kernels::cuda::detail {

inline constexpr int kWarpSize = 32;
inline constexpr unsigned kFullWarpMask = 0xffffffffu;

// Statistics and accumulators are templated on the compute type C (float for float32 and
// float16 data, double for float64; the reductions also int64 for int32 data).

// Running statistics of an online softmax: m = max seen so far, s = sum of exp(x - m).
// The empty state is {-inf, 0}. Aligned to its size so it moves as one access.
template <typename C>
struct alignas(2 * sizeof(C)) SoftmaxStat {
  C m;
  C s;
};

template <typename C>
__device__ __forceinline__ SoftmaxStat<C> EmptySoftmaxStat() {
  return {-Infinity<C>(), C(0)};
}

// Adds one element. One exp per element: rescaling happens only when the max moves.
// -inf elements contribute exactly 0 (exp(-inf - m) with m = -inf would be NaN); a NaN element
// makes s NaN, so the whole row comes out NaN like the reference.
template <typename C>
__device__ __forceinline__ void PushSoftmax(SoftmaxStat<C>& st, C x) {
  if (x > st.m) {
    st.s = st.s * MathExp(st.m - x) + C(1);
    st.m = x;
  } else {
    st.s += (x == -Infinity<C>()) ? C(0) : MathExp(x - st.m);
  }
}

template <typename C>
__device__ __forceinline__ SoftmaxStat<C> MergeSoftmax(SoftmaxStat<C> a, SoftmaxStat<C> b) {
  const C m = MathMax(a.m, b.m);
  // Both empty (or all -inf): nothing to rescale, and exp(-inf - -inf) would be NaN.
  if (m == -Infinity<C>()) return {m, a.s + b.s};
  return {m, a.s * MathExp(a.m - m) + b.s * MathExp(b.m - m)};
}

// ---- RowReduce ------------------------------------------------------------------------------

// min/max that return NaN when either operand is NaN (np.minimum/np.maximum; fminf/fmaxf would
// drop the NaN). For integers the NaN test is simply false.
template <typename A>
__device__ __forceinline__ A NanMin(A a, A b) {
  return (a < b || a != a) ? a : b;
}
template <typename A>
__device__ __forceinline__ A NanMax(A a, A b) {
  return (a > b || a != a) ? a : b;
}
// a + b; int64 modulo 2^64 (defined wrap-around, as NumPy's int64 sums).
template <typename A>
__device__ __forceinline__ A WrapAdd(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    return static_cast<A>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  } else {
    return a + b;
  }
}

// The accumulator type of a storage type's reductions: the compute type, int64 for int32.
template <typename S>
using ReduceAccOf =
    std::conditional_t<std::is_same_v<S, int32_t>, int64_t, ComputeOf<S>>;

// The accumulator of a RowReduceKind: an A per thread/segment, merged by +, min or max.
// The kind is a runtime value: a block-uniform switch costs far less than the memory traffic,
// and keeps one kernel per shape path for all kinds. Integer accumulators see only kSum, kMin
// and kMax (RowReduceAccepts).
template <typename A>
struct ReduceOp {
  RowReduceKind kind;

  __device__ __forceinline__ A Identity() const {
    if constexpr (std::is_integral_v<A>) {
      return kind == RowReduceKind::kMin ? INT64_MAX : kind == RowReduceKind::kMax ? INT64_MIN : 0;
    } else {
      return kind == RowReduceKind::kMin   ? Infinity<A>()
             : kind == RowReduceKind::kMax ? -Infinity<A>()
                                           : A(0);
    }
  }
  template <typename C>
  __device__ __forceinline__ A Push(A acc, C c) const {
    const A x = static_cast<A>(c);
    switch (kind) {
      case RowReduceKind::kMin: return NanMin(acc, x);
      case RowReduceKind::kMax: return NanMax(acc, x);
      case RowReduceKind::kNorm2:
        if constexpr (!std::is_integral_v<A>) return MathFma(x, x, acc);
        return acc;
      default: return WrapAdd(acc, x);
    }
  }
  // N consecutive elements, combined pairwise first (shorter dependency chain).
  template <typename C, int N>
  __device__ __forceinline__ A PushVec(A acc, const C (&x)[N]) const {
    A t[N];
#pragma unroll
    for (int k = 0; k < N; ++k) {
      t[k] = static_cast<A>(x[k]);
      if (kind == RowReduceKind::kNorm2) t[k] = t[k] * t[k];
    }
#pragma unroll
    for (int w = N / 2; w >= 1; w /= 2) {
#pragma unroll
      for (int k = 0; k < w; ++k) t[k] = (*this)(t[2 * k], t[2 * k + 1]);
    }
    return (*this)(acc, t[0]);
  }
  // Merges two partial results.
  __device__ __forceinline__ A operator()(A a, A b) const {
    switch (kind) {
      case RowReduceKind::kMin: return NanMin(a, b);
      case RowReduceKind::kMax: return NanMax(a, b);
      default: return WrapAdd(a, b);
    }
  }
  // The row's result from its merged accumulator.
  __device__ __forceinline__ A Finalize(A acc, int64_t cols) const {
    if constexpr (!std::is_integral_v<A>) {
      switch (kind) {
        case RowReduceKind::kMean: return acc / static_cast<A>(cols);
        case RowReduceKind::kNorm2: return MathSqrt(acc);
        default: break;
      }
    }
    return acc;
  }
};

// ---- RowArgmax -------------------------------------------------------------------------------

// A candidate maximum and its column. 16 bytes (the int64 forces the padding), one 128-bit
// workspace access.
template <typename C>
struct alignas(16) ArgmaxStat {
  C v;
  int64_t i;
};

// Loses against every element, the lowest value included (ties go to the smaller index).
template <typename C>
__device__ __forceinline__ ArgmaxStat<C> EmptyArgmaxStat() {
  if constexpr (std::is_integral_v<C>) {
    return {INT32_MIN, INT64_MAX};
  } else {
    return {-Infinity<C>(), INT64_MAX};
  }
}

// The np.argmax order: any NaN beats any number, a larger number beats a smaller one, and equal
// values (both NaN, or -0 vs +0) go to the smaller index. A strict total order on distinct
// indices, so merging is associative and commutative and any reduction tree gives the first
// maximum.
template <typename C>
__device__ __forceinline__ ArgmaxStat<C> MergeArgmax(ArgmaxStat<C> a, ArgmaxStat<C> b) {
  const bool a_nan = a.v != a.v;
  const bool b_nan = b.v != b.v;
  bool b_wins;
  if (a_nan != b_nan) {
    b_wins = b_nan;
  } else if (!a_nan && a.v != b.v) {
    b_wins = b.v > a.v;
  } else {
    b_wins = b.i < a.i;
  }
  return b_wins ? b : a;
}

struct ArgmaxMergeOp {
  template <typename C>
  __device__ __forceinline__ ArgmaxStat<C> operator()(ArgmaxStat<C> a, ArgmaxStat<C> b) const {
    return MergeArgmax(a, b);
  }
};

// ---- RowNormalize ----------------------------------------------------------------------------

// Moments of a set of n values: mean and m2 = sum of squared deviations from the mean (Welford
// / Chan et al.), merged without ever subtracting large sums, so the variance stays accurate
// when |mean| >> std. For L2 normalization only m2 is used, as the plain sum of squares (no
// cancellation there). n is a C: exact to 2^24 per partial in float, and beyond that only a
// weight.
// 16-byte aligned (the workspace promises no more): one 128-bit access for float, two for
// double.
template <typename C>
struct alignas(16) MomentStat {
  C n;
  C mean;
  C m2;
  C unused;
};

template <typename C>
__device__ __forceinline__ MomentStat<C> EmptyMomentStat() {
  return {C(0), C(0), C(0), C(0)};
}

// Chan's pairwise update. An empty side leaves the other unchanged exactly.
template <typename C>
__device__ __forceinline__ MomentStat<C> MergeMoments(MomentStat<C> a, MomentStat<C> b) {
  const C n = a.n + b.n;
  if (n == C(0)) return a;
  const C d = b.mean - a.mean;
  const C w = b.n / n;
  return {n, MathFma(d, w, a.mean), a.m2 + b.m2 + d * d * a.n * w, C(0)};
}

// Welford's single-element update.
template <typename C>
__device__ __forceinline__ void PushMoment(MomentStat<C>& st, C x) {
  st.n += C(1);
  const C d = x - st.mean;
  st.mean += d / st.n;
  st.m2 = MathFma(d, x - st.mean, st.m2);
}

// N (a power of two) elements: their exact-as-possible local moments (mean by a pairwise sum
// scaled by the exact 1 / N, m2 by a sum of squared deviations), then one Chan merge: one
// division per N elements instead of N.
template <typename C, int N>
__device__ __forceinline__ void PushMomentVec(MomentStat<C>& st, const C (&x)[N]) {
  C t[N];
#pragma unroll
  for (int k = 0; k < N; ++k) t[k] = x[k];
#pragma unroll
  for (int w = N / 2; w >= 1; w /= 2) {
#pragma unroll
    for (int k = 0; k < w; ++k) t[k] = t[2 * k] + t[2 * k + 1];
  }
  const C m = t[0] * (C(1) / C(N));
#pragma unroll
  for (int k = 0; k < N; ++k) t[k] = (x[k] - m) * (x[k] - m);
#pragma unroll
  for (int w = N / 2; w >= 1; w /= 2) {
#pragma unroll
    for (int k = 0; k < w; ++k) t[k] = t[2 * k] + t[2 * k + 1];
  }
  st = MergeMoments(st, {C(N), m, t[0], C(0)});
}

__device__ __forceinline__ float ShflXor(float v, int lane_mask) {
  return __shfl_xor_sync(kFullWarpMask, v, lane_mask);
}
__device__ __forceinline__ double ShflXor(double v, int lane_mask) {
  return __shfl_xor_sync(kFullWarpMask, v, lane_mask);
}
__device__ __forceinline__ int32_t ShflXor(int32_t v, int lane_mask) {
  return __shfl_xor_sync(kFullWarpMask, v, lane_mask);
}
__device__ __forceinline__ int64_t ShflXor(int64_t v, int lane_mask) {
  return static_cast<int64_t>(
      __shfl_xor_sync(kFullWarpMask, static_cast<long long>(v), lane_mask));
}
template <typename C>
__device__ __forceinline__ SoftmaxStat<C> ShflXor(SoftmaxStat<C> v, int lane_mask) {
  return {ShflXor(v.m, lane_mask), ShflXor(v.s, lane_mask)};
}
template <typename C>
__device__ __forceinline__ ArgmaxStat<C> ShflXor(ArgmaxStat<C> v, int lane_mask) {
  return {ShflXor(v.v, lane_mask), ShflXor(v.i, lane_mask)};
}
template <typename C>
__device__ __forceinline__ MomentStat<C> ShflXor(MomentStat<C> v, int lane_mask) {
  return {ShflXor(v.n, lane_mask), ShflXor(v.mean, lane_mask), ShflXor(v.m2, lane_mask), C(0)};
}

// Butterfly reduction over aligned groups of `width` lanes (a power of two <= 32); every lane
// of a group ends with the group's result. All 32 lanes of the warp must call it together.
template <typename T, typename Op>
__device__ __forceinline__ T WarpAllReduce(T v, Op op, int width = kWarpSize) {
  for (int offset = width / 2; offset > 0; offset /= 2) v = op(v, ShflXor(v, offset));
  return v;
}

// Block-wide reduction; the result is valid in thread 0 only. `scratch` holds one T per warp
// (32 entries cover any block size). blockDim.x must be a multiple of 32. Ends with the
// scratch free for reuse only after a __syncthreads() by the caller.
template <typename T, typename Op>
__device__ __forceinline__ T BlockReduce(T v, Op op, T identity, T* scratch) {
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  v = WarpAllReduce(v, op);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? scratch[lane] : identity;
    v = WarpAllReduce(v, op);
  }
  return v;
}

}  // namespace gpupipe::kernels::cuda::detail
