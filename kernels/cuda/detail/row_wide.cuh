// Prefetching row loop for the single-pass row ops (softmax, l2normalize, standardize) on rows
// just too long for the register-resident block path: kResidentMaxCols < cols <=
// kWideMaxCols, 4-byte compute types, rows a whole number of 16-byte vectors at 16-byte
// aligned addresses, at least one row per SM.
//
// Why: a block-per-row kernel reads its row, then reduces it (block barriers), then writes it;
// while it reduces, its loads are idle, and only the other resident blocks keep DRAM busy. With
// rows of 16384 float32 (64 KiB) only two or three rows fit an SM, too few to cover those gaps
// (the shared-memory path leaves DRAM idle while its blocks reduce). Here a persistent grid of
// kWideBlocksPerSm blocks an SM walks rows blockIdx.x, + gridDim.x, ... with the row in
// registers and the NEXT row streaming into shared memory meanwhile (cp.async through the
// pipeline primitives), so each block has a row's reads in flight while it reduces and writes
// the current one, and the other block on its SM covers the gaps of its own row's start. A
// second register array instead of the shared memory spills (standardize).
//
// Thread t owns the row's 16-byte vectors t, t + kWideRowThreads, ...: it copies exactly the
// vectors it later reads, so its own __pipeline_wait_prior(0) makes them visible to it.
#pragma once

#include <cuda_pipeline_primitives.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "kernels/common/elementwise_program.h"
#include "kernels/cuda/detail/element_access.cuh"
#include "kernels/cuda/detail/launch.cuh"
#include "kernels/cuda/detail/row_resident.cuh"
#include "kernels/cuda/tuning/row_normalize_policy.h"

namespace gpupipe::kernels::cuda::detail {

// Threads of the block and the compute values each holds (tuning/row_normalize_policy.h).
inline constexpr int kWideRowThreads = tuning::RowNormalizePolicy::kWideThreads;
inline constexpr int kWidePerThread = tuning::RowNormalizePolicy::kWidePerThread;
// Resident blocks an SM, the kernels' __launch_bounds__ minimum and the grid's multiple.
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

// kWideBlocksPerSm blocks an SM, all resident at once; each walks its rows with a grid stride.
inline int64_t WideRowsGrid(int64_t rows, int multiprocessors) {
  const int64_t resident = int64_t{multiprocessors} * kWideBlocksPerSm;
  return rows < resident ? rows : resident;
}

// Dynamic shared memory of a wide-row kernel: one row.
template <typename S>
constexpr size_t WideRowSmemBytes(int64_t cols) {
  return static_cast<size_t>(cols) * sizeof(S);
}

// Opts `Kernel` in to a row of kWideMaxCols of S (64 KiB for float32: beyond the 48 KiB
// default), once per process, as OptInSmemRow.
template <auto Kernel, typename S>
cudaError_t OptInWideRow() {
  static const cudaError_t err =
      cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(WideRowSmemBytes<S>(kWideMaxCols)));
  return err;
}

// Launches the wide-row kernel `Kernel` over rows x cols of S (WideRowsGrid's blocks, a row of
// dynamic shared memory each), opting it in to that shared memory first.
template <auto Kernel, typename S, typename... Args>
cudaError_t LaunchWideRows(Launcher& launch, const char* name, int64_t rows, int64_t cols,
                           Args&&... args) {
  if (!launch.describing()) {
    if (const cudaError_t err = OptInWideRow<Kernel, S>(); err != cudaSuccess) return err;
  }
  return launch.WithSmem(name, Kernel, WideRowsGrid(rows, launch.config().multiprocessors),
                         kWideRowThreads, WideRowSmemBytes<S>(cols),
                         std::forward<Args>(args)...);
}

// Calls body(row, x) for each row of this block, x holding this thread's values of the row
// after `pre`: x[k * N + i] is element (t + k * kWideRowThreads) * N + i (N = kVecElems<S>),
// 0 where that vector lies past the row's end (WideInRow says which lie inside). Every thread
// of the block calls it with the same arguments; the loop is block-uniform, so bodies may use
// block barriers. `smem` holds WideRowSmemBytes<S>(cols), 16-byte aligned.
template <typename S, typename Body>
__device__ __forceinline__ void ForEachWideRow(const S* d_in, int64_t rows, int cols,
                                               const EwProgram& pre, uint4* smem,
                                               Body&& body) {
  using C = ComputeOf<S>;
  constexpr int N = kVecElems<S>;
  constexpr int kVecs = kWideVecsPerThread<S>;
  const int nvec = cols / N;
  const int t = static_cast<int>(threadIdx.x);
  auto prefetch = [&](int64_t row) {
    const uint4* src = reinterpret_cast<const uint4*>(d_in + row * cols);
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const int v = t + k * kWideRowThreads;
      if (v < nvec) __pipeline_memcpy_async(smem + v, src + v, sizeof(uint4));
    }
    __pipeline_commit();
  };
  const int64_t step = gridDim.x;
  if (blockIdx.x < rows) prefetch(blockIdx.x);
  for (int64_t row = blockIdx.x; row < rows; row += step) {
    __pipeline_wait_prior(0);
    C x[kWidePerThread];
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const int v = t + k * kWideRowThreads;
      C e[N];
      LoadVecFromRaw<S>(v < nvec ? reinterpret_cast<const int4*>(smem)[v] : int4{0, 0, 0, 0}, e);
#pragma unroll
      for (int i = 0; i < N; ++i) x[k * N + i] = e[i];
    }
    // The shared-memory reads above are performed before the next row's copies overwrite the
    // same vectors (a thread's own cp.async is not ordered after its earlier loads otherwise).
    __syncthreads();
    if (row + step < rows) prefetch(row + step);
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
