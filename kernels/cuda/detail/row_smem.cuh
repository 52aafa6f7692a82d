// Shared-memory-resident row ops: one block per row for rows too long for registers
// (cols > kResidentMaxCols) but short enough for one block's shared memory. The row is read
// from DRAM once (16-byte __ldcg loads, several in flight per thread, after the prologue
// program) into dynamic shared memory in the compute type, reduced from there as often as the
// op needs, and written once with 16-byte stores: one kernel, one read and one write of the
// tensor, where the two-kernel statistics + normalization path reads the input twice.
//
// Every thread reads back exactly the shared-memory slots it wrote itself (the same
// head/body/tail ownership in every pass), so the passes of one row need no barrier beyond the
// block reductions; only the next row's load, whose slots may shift with the row's alignment,
// must wait for the previous row's last pass (EndRow).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/common/elementwise_program.h"
#include "kernels/cuda/detail/element_access.cuh"
#include "kernels/cuda/detail/launch.cuh"
#include "kernels/cuda/tuning/row_normalize_policy.h"

namespace gpupipe::kernels::cuda::detail {

// Threads per block, the occupancy __launch_bounds__ asks for, 16-byte loads in flight per
// thread, and the largest row held, in bytes of the compute type (longer rows take the
// two-kernel path): tuning/row_normalize_policy.h, with the reasons.
inline constexpr int kSmemRowThreads = tuning::RowNormalizePolicy::kSmemThreads;
inline constexpr int kSmemRowMinBlocksPerSm = tuning::RowNormalizePolicy::kSmemMinBlocksPerSm;
inline constexpr int kSmemRowUnroll = tuning::RowNormalizePolicy::kSmemUnroll;
inline constexpr int64_t kSmemRowMaxBytes = tuning::RowNormalizePolicy::kSmemMaxRowBytes;

// Shared-memory bytes for a row of `cols` elements of storage type S: the compute-type values
// plus up to kVecElems<S> - 1 leading slots that align the body vectors (see SmemRow).
template <typename S>
constexpr int64_t SmemRowBytes(int64_t cols) {
  const int64_t bytes = (cols + kVecElems<S> - 1) * static_cast<int64_t>(sizeof(ComputeOf<S>));
  return (bytes + 15) / 16 * 16;
}
// Shared memory of a block's opt-in limit left to the kernels' own static shared memory (their
// block reductions' partials), which the opt-in limit also counts.
inline constexpr int64_t kSmemRowStaticReserve = 2048;

// The longest row, in bytes, a device whose blocks may opt in to `smem_per_block` bytes holds:
// kSmemRowMaxBytes where the device has room (sm_80: 163 KiB a block; sm_86, sm_89 and sm_120:
// 99 KiB), what it has otherwise.
inline int64_t SmemRowLimit(int smem_per_block) {
  const int64_t room = int64_t{smem_per_block} - kSmemRowStaticReserve;
  return room < kSmemRowMaxBytes ? room : kSmemRowMaxBytes;
}

// Whether a row of `cols` elements of S takes the shared-memory path on config's device.
template <typename S>
bool FitsSmemRow(int64_t cols, const LaunchConfig& config) {
  return SmemRowBytes<S>(cols) <= SmemRowLimit(EffectiveSmemLimit(config));
}

// Opts `Kernel` in to the current device's SmemRowLimit of dynamic shared memory, once per
// process (a function-local static: cudaFuncSetAttribute is not a stream operation and never
// synchronizes, but it need not run on every launch). Applies to the current device; the
// daemon owns one.
template <auto Kernel>
cudaError_t OptInSmemRow() {
  static const cudaError_t err =
      cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(SmemRowLimit(CurrentDeviceCaps().max_smem_per_block)));
  return err;
}

// 16-byte shared-memory stores and loads of one body vector in the compute type (N elements:
// 4 float32, 8 float16 held as float32, 2 float64).
template <int N>
__device__ __forceinline__ void StoreSmemVec(float* dst, const float (&x)[N]) {
#pragma unroll
  for (int j = 0; j < N / 4; ++j) {
    reinterpret_cast<float4*>(dst)[j] =
        make_float4(x[4 * j], x[4 * j + 1], x[4 * j + 2], x[4 * j + 3]);
  }
}
template <int N>
__device__ __forceinline__ void StoreSmemVec(double* dst, const double (&x)[N]) {
#pragma unroll
  for (int j = 0; j < N / 2; ++j) {
    reinterpret_cast<double2*>(dst)[j] = make_double2(x[2 * j], x[2 * j + 1]);
  }
}
template <int N>
__device__ __forceinline__ void LoadSmemVec(const float* src, float (&x)[N]) {
#pragma unroll
  for (int j = 0; j < N / 4; ++j) {
    const float4 v = reinterpret_cast<const float4*>(src)[j];
    x[4 * j] = v.x;
    x[4 * j + 1] = v.y;
    x[4 * j + 2] = v.z;
    x[4 * j + 3] = v.w;
  }
}
template <int N>
__device__ __forceinline__ void LoadSmemVec(const double* src, double (&x)[N]) {
#pragma unroll
  for (int j = 0; j < N / 2; ++j) {
    const double2 v = reinterpret_cast<const double2*>(src)[j];
    x[2 * j] = v.x;
    x[2 * j + 1] = v.y;
  }
}

// One row of storage type S held in shared memory `sm` (16-byte aligned, SmemRowBytes(cols)):
// element i lives in sm[i + mis], where mis is the row start's element offset past a 16-byte
// boundary, so the body vectors (the 16-byte aligned global vectors of the row) land on
// aligned shared-memory vectors too. Row starts are only element-aligned in general (cols need
// not be a multiple of the vector width), hence the scalar head and tail.
template <typename S>
struct SmemRow {
  using C = ComputeOf<S>;
  static constexpr int N = kVecElems<S>;

  C* sm;
  int cols;
  int mis;   // slots before element 0
  int head;  // scalar elements before the first 16-byte boundary
  int nvec;  // body vectors

  __device__ __forceinline__ SmemRow(C* smem, const S* p, int cols_) : sm(smem), cols(cols_) {
    mis = static_cast<int>((reinterpret_cast<uintptr_t>(p) / sizeof(S)) & (N - 1));
    head = min((N - mis) & (N - 1), cols);
    nvec = (cols - head) / N;
  }

  // Reads p[0, cols) into shared memory, applying `pre`, and calls on_value(x) for each of
  // this thread's values (for the op's first statistic, folded into the load).
  template <typename OnValue>
  __device__ __forceinline__ void Load(const S* p, const EwProgram& pre, OnValue&& on_value) {
    const int t = threadIdx.x;
    const int nt = blockDim.x;
    if (t < head) {
      const C x = ApplyEw(pre, LoadElem(p + t));
      sm[mis + t] = x;
      on_value(x);
    }
    const int4* body = reinterpret_cast<const int4*>(p + head);
    C* sbody = sm + mis + head;
    int v = t;
    for (; v + (kSmemRowUnroll - 1) * nt < nvec; v += kSmemRowUnroll * nt) {
      int4 raw[kSmemRowUnroll];
#pragma unroll
      for (int u = 0; u < kSmemRowUnroll; ++u) raw[u] = __ldcg(body + v + u * nt);
#pragma unroll
      for (int u = 0; u < kSmemRowUnroll; ++u) {
        C x[N];
        LoadVecFromRaw<S>(raw[u], x);
        ApplyEwN(pre, x);
#pragma unroll
        for (int k = 0; k < N; ++k) on_value(x[k]);
        StoreSmemVec(sbody + N * (v + u * nt), x);
      }
    }
    for (; v < nvec; v += nt) {
      C x[N];
      LoadVecFromRaw<S>(__ldcg(body + v), x);
      ApplyEwN(pre, x);
#pragma unroll
      for (int k = 0; k < N; ++k) on_value(x[k]);
      StoreSmemVec(sbody + N * v, x);
    }
    for (int i = head + N * nvec + t; i < cols; i += nt) {
      const C x = ApplyEw(pre, LoadElem(p + i));
      sm[mis + i] = x;
      on_value(x);
    }
  }

  // Calls f(x) on each of this thread's values, in place (f takes a C&).
  template <typename F>
  __device__ __forceinline__ void Update(F&& f) {
    const int t = threadIdx.x;
    const int nt = blockDim.x;
    if (t < head) f(sm[mis + t]);
    C* sbody = sm + mis + head;
    for (int v = t; v < nvec; v += nt) {
      C x[N];
      LoadSmemVec(sbody + N * v, x);
#pragma unroll
      for (int k = 0; k < N; ++k) f(x[k]);
      StoreSmemVec(sbody + N * v, x);
    }
    for (int i = head + N * nvec + t; i < cols; i += nt) f(sm[mis + i]);
  }

  // Calls f(x) on each of this thread's values, read only.
  template <typename F>
  __device__ __forceinline__ void Visit(F&& f) const {
    const int t = threadIdx.x;
    const int nt = blockDim.x;
    if (t < head) f(sm[mis + t]);
    const C* sbody = sm + mis + head;
    for (int v = t; v < nvec; v += nt) {
      C x[N];
      LoadSmemVec(sbody + N * v, x);
#pragma unroll
      for (int k = 0; k < N; ++k) f(x[k]);
    }
    for (int i = head + N * nvec + t; i < cols; i += nt) f(sm[mis + i]);
  }

  // out[i] = g(x_i) for the row. `out_vec`: out - p is a multiple of 16 bytes, so the body
  // vectors are 16-byte stores (otherwise element stores).
  template <typename G>
  __device__ __forceinline__ void Store(S* out, bool out_vec, G&& g) const {
    const int t = threadIdx.x;
    const int nt = blockDim.x;
    if (t < head) StoreElem(out + t, g(sm[mis + t]));
    const C* sbody = sm + mis + head;
    S* obody = out + head;
#pragma unroll 2
    for (int v = t; v < nvec; v += nt) {
      C x[N];
      LoadSmemVec(sbody + N * v, x);
#pragma unroll
      for (int k = 0; k < N; ++k) x[k] = g(x[k]);
      StoreVec<S>(obody + N * v, x, out_vec);
    }
    for (int i = head + N * nvec + t; i < cols; i += nt) StoreElem(out + i, g(sm[mis + i]));
  }
};

// Before the next row's Load: its slots may shift (another alignment), so every thread must be
// done with this row's.
__device__ __forceinline__ void EndSmemRow() { __syncthreads(); }

}  // namespace gpupipe::kernels::cuda::detail
