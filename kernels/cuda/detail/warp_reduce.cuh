// Warp- and block-level reductions with a fixed butterfly order, so a given launch shape always
// sums in the same order (results are reproducible run to run, not bitwise equal to the CPU).
#pragma once

#include <cuda_runtime.h>

#include <cmath>

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

struct SumOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
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
