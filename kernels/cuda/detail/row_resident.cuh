// Single-pass row ops for rows that fit in registers: each row is read once into a register
// array (after the prologue program), reduced as often as the op needs, and written once, so
// the op is one kernel with one read and one write of the tensor and no workspace. Two shapes:
//  - group: `lanes` (a power of two <= 32) lanes of a warp per row, for rows of at most
//    kResidentShortPerThread elements per lane (cols <= 128);
//  - block: the whole block per row, for cols <= kResidentMaxCols.
// Lane l of a row's `width` cooperating threads owns elements l, l + width, ...: scalar loads
// and stores, coalesced across the lanes, and no alignment requirement on the row start.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/common/elementwise_program.h"
#include "kernels/cuda/detail/element_access.cuh"
#include "kernels/cuda/detail/row_plan.cuh"
#include "kernels/cuda/detail/warp_reduce.cuh"
#include "kernels/cuda/tuning/row_normalize_policy.h"

namespace gpupipe::kernels::cuda::detail {

// Elements per thread of a register-resident row (tuning/row_normalize_policy.h says why): the
// block path holds up to kRowThreads * kResidentPerThread columns per row, rows up to
// kResidentMidMaxCols in a shorter array; group rows of at most kResidentShortPerThread
// elements per lane use a short one.
inline constexpr int kResidentPerThread = tuning::RowNormalizePolicy::kResidentPerThread;
inline constexpr int64_t kResidentMaxCols = int64_t{kRowThreads} * kResidentPerThread;
inline constexpr int kResidentMidPerThread = tuning::RowNormalizePolicy::kResidentMidPerThread;
inline constexpr int64_t kResidentMidMaxCols = int64_t{kRowThreads} * kResidentMidPerThread;
inline constexpr int kResidentShortPerThread =
    tuning::RowNormalizePolicy::kResidentShortPerThread;

struct MaxOp {
  template <typename C>
  __device__ __forceinline__ C operator()(C a, C b) const { return MathMax(a, b); }
};
struct SumOp {
  template <typename C>
  __device__ __forceinline__ C operator()(C a, C b) const { return a + b; }
};

// Where the calling thread works: row base (before adding the lane's row within the warp for
// groups), the lane index within the row, and the number of cooperating threads.
template <bool kBlock>
struct ResidentMap {
  int64_t first;  // first row base of this thread
  int64_t step;   // row base increment of the grid-stride loop
  int sub;        // row offset within the warp (group path; 0 for blocks)
  int l;          // index within the row's threads
  int width;      // threads per row

  __device__ __forceinline__ ResidentMap(int lanes) {
    if constexpr (kBlock) {
      first = blockIdx.x;
      step = gridDim.x;
      sub = 0;
      l = threadIdx.x;
      width = blockDim.x;
    } else {
      const int lane = threadIdx.x % kWarpSize;
      const int rows_per_warp = kWarpSize / lanes;
      const int64_t warp =
          (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize;
      const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / kWarpSize;
      first = warp * rows_per_warp;
      step = warps * rows_per_warp;
      sub = lane / lanes;
      l = lane % lanes;
      width = lanes;
    }
  }
};

// All threads of the row get the reduction of v over the row's threads. Block path: every
// thread of the block must call it (row loops are block-uniform); `scratch` holds 32 values.
// Group path: all 32 lanes of the warp must call it.
template <bool kBlock, typename C, typename Op>
__device__ __forceinline__ C RowAllReduce(C v, Op op, C identity, int width, C* scratch) {
  if constexpr (!kBlock) {
    return WarpAllReduce(v, op, width);
  } else {
    const int lane = threadIdx.x % kWarpSize;
    const int warp = threadIdx.x / kWarpSize;
    v = WarpAllReduce(v, op);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < static_cast<int>(blockDim.x / kWarpSize) ? scratch[lane] : identity;
    v = WarpAllReduce(v, op);
    __syncthreads();  // scratch is free again
    return v;
  }
}

// RowAllReduce without the closing barrier, for kernels that reduce twice per row into two
// different scratch arrays, alternating: the next write to one array is then ordered after
// every read of it by the other reduction's barrier, which saves two __syncthreads per row.
template <bool kBlock, typename C, typename Op>
__device__ __forceinline__ C RowAllReduceAlternating(C v, Op op, C identity, int width,
                                                     C* scratch) {
  if constexpr (!kBlock) {
    return WarpAllReduce(v, op, width);
  } else {
    const int lane = threadIdx.x % kWarpSize;
    const int warp = threadIdx.x / kWarpSize;
    v = WarpAllReduce(v, op);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < static_cast<int>(blockDim.x / kWarpSize) ? scratch[lane] : identity;
    return WarpAllReduce(v, op);
  }
}

// Loads this thread's elements of row p[0, cols) (K of them at most; 0 where past the end or
// when !valid) and applies the program to all of them at once.
template <int K, typename S>
__device__ __forceinline__ void LoadResident(const S* p, int cols, bool valid, int l,
                                             int width, const EwProgram& pre,
                                             ComputeOf<S> (&x)[K]) {
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int i = l + k * width;
    x[k] = valid && i < cols ? LoadElem(p + i) : ComputeOf<S>(0);
  }
  ApplyEwN(pre, x);
}

}  // namespace gpupipe::kernels::cuda::detail
