// Warp- and block-level reductions with a fixed butterfly order, so a given launch shape always
// sums in the same order (results are reproducible run to run, not bitwise equal to the CPU).
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/common/row_ops.h"

namespace gpupipe::kernels::cuda::detail {

inline constexpr int kWarpSize = 32;
inline constexpr unsigned kFullWarpMask = 0xffffffffu;

// Running statistics of an online softmax: m = max seen so far, s = sum of exp(x - m).
// The empty state is {-inf, 0}. 8-byte aligned so it moves as one 64-bit access.
struct alignas(8) SoftmaxStat {
  float m;
  float s;
};

__device__ __forceinline__ SoftmaxStat EmptySoftmaxStat() { return {-INFINITY, 0.0f}; }

// Adds one element. One expf per element: rescaling happens only when the max moves.
// -inf elements contribute exactly 0 (exp(-inf - m) with m = -inf would be NaN); a NaN element
// makes s NaN, so the whole row comes out NaN like the reference.
__device__ __forceinline__ void PushSoftmax(SoftmaxStat& st, float x) {
  if (x > st.m) {
    st.s = st.s * expf(st.m - x) + 1.0f;
    st.m = x;
  } else {
    st.s += (x == -INFINITY) ? 0.0f : expf(x - st.m);
  }
}

__device__ __forceinline__ SoftmaxStat MergeSoftmax(SoftmaxStat a, SoftmaxStat b) {
  const float m = fmaxf(a.m, b.m);
  // Both empty (or all -inf): nothing to rescale, and exp(-inf - -inf) would be NaN.
  if (m == -INFINITY) return {m, a.s + b.s};
  return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}

// ---- RowReduce ------------------------------------------------------------------------------

// min/max that return NaN when either operand is NaN (np.minimum/np.maximum; fminf/fmaxf would
// drop the NaN).
__device__ __forceinline__ float NanMin(float a, float b) { return (a < b || a != a) ? a : b; }
__device__ __forceinline__ float NanMax(float a, float b) { return (a > b || a != a) ? a : b; }

// The accumulator of a RowReduceKind: a float per thread/segment, merged by +, min or max.
// The kind is a runtime value: a block-uniform switch costs far less than the memory traffic,
// and keeps one kernel per shape path for all kinds.
struct ReduceOp {
  RowReduceKind kind;

  __device__ __forceinline__ float Identity() const {
    return kind == RowReduceKind::kMin ? INFINITY
                                       : kind == RowReduceKind::kMax ? -INFINITY : 0.0f;
  }
  __device__ __forceinline__ float Push(float acc, float x) const {
    switch (kind) {
      case RowReduceKind::kMin: return NanMin(acc, x);
      case RowReduceKind::kMax: return NanMax(acc, x);
      case RowReduceKind::kNorm2: return fmaf(x, x, acc);
      default: return acc + x;
    }
  }
  // Four consecutive elements, combined pairwise first (shorter dependency chain).
  __device__ __forceinline__ float Push4(float acc, float4 q) const {
    switch (kind) {
      case RowReduceKind::kMin: return NanMin(acc, NanMin(NanMin(q.x, q.y), NanMin(q.z, q.w)));
      case RowReduceKind::kMax: return NanMax(acc, NanMax(NanMax(q.x, q.y), NanMax(q.z, q.w)));
      case RowReduceKind::kNorm2:
        return acc + (fmaf(q.x, q.x, q.y * q.y) + fmaf(q.z, q.z, q.w * q.w));
      default: return acc + ((q.x + q.y) + (q.z + q.w));
    }
  }
  // Merges two partial results.
  __device__ __forceinline__ float operator()(float a, float b) const {
    switch (kind) {
      case RowReduceKind::kMin: return NanMin(a, b);
      case RowReduceKind::kMax: return NanMax(a, b);
      default: return a + b;
    }
  }
  // The row's result from its merged accumulator.
  __device__ __forceinline__ float Finalize(float acc, int64_t cols) const {
    switch (kind) {
      case RowReduceKind::kMean: return acc / static_cast<float>(cols);
      case RowReduceKind::kNorm2: return sqrtf(acc);
      default: return acc;
    }
  }
};

// ---- RowArgmax -------------------------------------------------------------------------------

// A candidate maximum and its column. 16 bytes (the int64 forces the padding), one 128-bit
// workspace access.
struct alignas(16) ArgmaxStat {
  float v;
  int64_t i;
};

// Loses against every element, -inf included (ties go to the smaller index).
__device__ __forceinline__ ArgmaxStat EmptyArgmaxStat() { return {-INFINITY, INT64_MAX}; }

// The np.argmax order: any NaN beats any number, a larger number beats a smaller one, and equal
// values (both NaN, or -0 vs +0) go to the smaller index. A strict total order on distinct
// indices, so merging is associative and commutative and any reduction tree gives the first
// maximum.
__device__ __forceinline__ ArgmaxStat MergeArgmax(ArgmaxStat a, ArgmaxStat b) {
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
  __device__ __forceinline__ ArgmaxStat operator()(ArgmaxStat a, ArgmaxStat b) const {
    return MergeArgmax(a, b);
  }
};

// ---- RowNormalize ----------------------------------------------------------------------------

// Moments of a set of n values: mean and m2 = sum of squared deviations from the mean (Welford
// / Chan et al.), merged without ever subtracting large sums, so the variance stays accurate
// when |mean| >> std. For L2 normalization only m2 is used, as the plain sum of squares (no
// cancellation there). n is a float: exact to 2^24 per partial, and beyond that only a weight.
struct alignas(16) MomentStat {
  float n;
  float mean;
  float m2;
  float unused;
};

__device__ __forceinline__ MomentStat EmptyMomentStat() { return {0.0f, 0.0f, 0.0f, 0.0f}; }

// Chan's pairwise update. An empty side leaves the other unchanged exactly.
__device__ __forceinline__ MomentStat MergeMoments(MomentStat a, MomentStat b) {
  const float n = a.n + b.n;
  if (n == 0.0f) return a;
  const float d = b.mean - a.mean;
  const float w = b.n / n;
  return {n, fmaf(d, w, a.mean), a.m2 + b.m2 + d * d * a.n * w, 0.0f};
}

// Welford's single-element update.
__device__ __forceinline__ void PushMoment(MomentStat& st, float x) {
  st.n += 1.0f;
  const float d = x - st.mean;
  st.mean += d / st.n;
  st.m2 = fmaf(d, x - st.mean, st.m2);
}

// Four elements: their exact-as-possible local moments (mean by a pairwise sum scaled by the
// exact 0.25, m2 by a sum of squared deviations), then one Chan merge: one division per four
// elements instead of four.
__device__ __forceinline__ void PushMoment4(MomentStat& st, float4 q) {
  const float m = ((q.x + q.y) + (q.z + q.w)) * 0.25f;
  const float dx = q.x - m, dy = q.y - m, dz = q.z - m, dw = q.w - m;
  const float m2 = fmaf(dx, dx, dy * dy) + fmaf(dz, dz, dw * dw);
  st = MergeMoments(st, {4.0f, m, m2, 0.0f});
}

struct NormalizeMergeOp {
  RowNormalizeKind kind;
  __device__ __forceinline__ MomentStat operator()(MomentStat a, MomentStat b) const {
    if (kind == RowNormalizeKind::kL2Normalize) return {0.0f, 0.0f, a.m2 + b.m2, 0.0f};
    return MergeMoments(a, b);
  }
};
struct SoftmaxMergeOp {
  __device__ __forceinline__ SoftmaxStat operator()(SoftmaxStat a, SoftmaxStat b) const {
    return MergeSoftmax(a, b);
  }
};

__device__ __forceinline__ float ShflXor(float v, int lane_mask) {
  return __shfl_xor_sync(kFullWarpMask, v, lane_mask);
}
__device__ __forceinline__ SoftmaxStat ShflXor(SoftmaxStat v, int lane_mask) {
  return {__shfl_xor_sync(kFullWarpMask, v.m, lane_mask),
          __shfl_xor_sync(kFullWarpMask, v.s, lane_mask)};
}
__device__ __forceinline__ ArgmaxStat ShflXor(ArgmaxStat v, int lane_mask) {
  return {__shfl_xor_sync(kFullWarpMask, v.v, lane_mask),
          static_cast<int64_t>(__shfl_xor_sync(
              kFullWarpMask, static_cast<long long>(v.i), lane_mask))};
}
__device__ __forceinline__ MomentStat ShflXor(MomentStat v, int lane_mask) {
  return {__shfl_xor_sync(kFullWarpMask, v.n, lane_mask),
          __shfl_xor_sync(kFullWarpMask, v.mean, lane_mask),
          __shfl_xor_sync(kFullWarpMask, v.m2, lane_mask), 0.0f};
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
