// Block-per-row loop for the single-pass row ops (softmax, l2normalize, standardize) on rows
// just too long for the 256-thread register-resident block path: kResidentMaxCols < cols <=
// kWideMaxCols, 4-byte compute types, rows a whole number of 16-byte vectors at 16-byte
// aligned addresses, at least one row per SM.
//
// Why: a block of kWideRowThreads holds the whole row in registers as 16-byte vectors, so the
// row is read once, with every one of its loads in flight at once, reduced, and written once.
// kWideBlocksPerSm blocks fit an SM (the registers of the row bound it), and the grid gives
// each row a block of its own (SegmentGrid, row_plan.cuh): as one block
// reduces or writes, the other has its loads in flight, and the hardware starts the next row's
// block on an SM as soon as one finishes, so the rows are handed out as the SMs free up rather
// than in fixed shares. A persistent grid that copies each block's next row into shared memory
// while it reduces the current one does not keep DRAM as busy (the bench/results section that
// tunes this path says by how much).
//
// Thread t owns the row's 16-byte vectors t, t + kWideRowThreads, ...: coalesced 16-byte loads
// and stores.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/common/elementwise_program.h"
#include "kernels/cuda/detail/element_access.cuh"
#include "kernels/cuda/detail/row_resident.cuh"
#include "kernels/cuda/tuning/row_normalize_policy.h"

namespace gpupipe::kernels::cuda::detail {

// Threads of the block and the compute values each holds (tuning/row_normalize_policy.h).
inline constexpr int kWideRowThreads = tuning::RowNormalizePolicy::kWideThreads;
inline constexpr int kWidePerThread = tuning::RowNormalizePolicy::kWidePerThread;
// Resident blocks an SM, the kernels' __launch_bounds__ minimum.
inline constexpr int kWideBlocksPerSm = tuning::RowNormalizePolicy::kWideBlocksPerSm;
inline constexpr int64_t kWideMaxCols = int64_t{kWideRowThreads} * kWidePerThread;

template <typename S>
inline constexpr int kWideVecsPerThread = kWidePerThread / kVecElems<S>;

// Whether the wide path takes a rows x cols row op of storage type S from d_in to d_out.
template <typename S>
bool WideRowsApply(const S* d_in, const S* d_out, int64_t rows, int64_t cols,
                   int multiprocessors) {
  return sizeof(ComputeOf<S>) == 4 && cols > kResidentMaxCols && cols <= kWideMaxCols &&
         cols % kVecElems<S> == 0 && rows >= multiprocessors &&
         reinterpret_cast<uintptr_t>(d_in) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(d_out) % 16 == 0;
}

// Calls body(row, x) for each row of this block, x holding this thread's values of the row
// after `pre`: x[k * N + i] is element (t + k * kWideRowThreads) * N + i (N = kVecElems<S>),
// 0 where that vector lies past the row's end (WideInRow says which lie inside). Every thread
// of the block calls it with the same arguments; the loop is block-uniform, so bodies may use
// block barriers, and a barrier separates one row's body from the next (RowReducer's scratch
// rule).
template <typename S, typename Body>
__device__ __forceinline__ void ForEachWideRow(const S* d_in, int64_t rows, int cols,
                                               const EwProgram& pre, Body&& body) {
  using C = ComputeOf<S>;
  constexpr int N = kVecElems<S>;
  constexpr int kVecs = kWideVecsPerThread<S>;
  const int nvec = cols / N;
  const int t = static_cast<int>(threadIdx.x);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    if (row != blockIdx.x) __syncthreads();
    const S* src = d_in + row * cols;
    C x[kWidePerThread];
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const int v = t + k * kWideRowThreads;
      C e[N];
      if (v < nvec) {
        LoadVec<S>(src + static_cast<int64_t>(v) * N, e);
      } else {
#pragma unroll
        for (int i = 0; i < N; ++i) e[i] = C(0);
      }
#pragma unroll
      for (int i = 0; i < N; ++i) x[k * N + i] = e[i];
    }
    ApplyEwN(pre, x);
    body(row, x);
  }
}

// Whether value k of this thread (ForEachWideRow's layout) lies inside a row of `cols`.
template <typename S>
__device__ __forceinline__ bool WideInRow(int k, int cols) {
  constexpr int N = kVecElems<S>;
  return (static_cast<int>(threadIdx.x) + (k / N) * kWideRowThreads) * N < cols;
}

// Stores y(x[k]) for this thread's values of the row at `out` (16-byte aligned).
template <typename S, typename C, typename Map>
__device__ __forceinline__ void StoreWideRow(S* out, int cols, const C (&x)[kWidePerThread],
                                             Map&& y) {
  constexpr int N = kVecElems<S>;
  const int nvec = cols / N;
#pragma unroll
  for (int k = 0; k < kWideVecsPerThread<S>; ++k) {
    const int v = static_cast<int>(threadIdx.x) + k * kWideRowThreads;
    if (v >= nvec) continue;
    C e[N];
#pragma unroll
    for (int i = 0; i < N; ++i) e[i] = y(x[k * N + i]);
    StoreVec<S>(out + static_cast<int64_t>(v) * N, e, true);
  }
}

}  // namespace gpupipe::kernels::cuda::detail
