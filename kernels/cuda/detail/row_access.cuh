// Thread-level access patterns shared by the row kernels, plus thin wrappers over the PDL
// device intrinsics.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/common/elementwise_program.h"
#include "kernels/cuda/detail/element_access.cuh"
#include "kernels/cuda/tuning/row_normalize_policy.h"

namespace gpupipe::kernels::cuda::detail {

// ---- Programmatic Dependent Launch ---------------------------------------------------------
// Both are no-ops when the grid was launched without the PDL attribute (or has no dependent),
// so the same kernels serve config.pdl on and off.

// Blocks until every grid this one depends on has completed and its writes are visible.
__device__ __forceinline__ void WaitForPrimaryGrids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
#endif
}

// Lets the dependent grid start launching once every block of this grid has called it (or
// exited). Visibility of this grid's writes to the dependent is still guaranteed only by the
// dependent's WaitForPrimaryGrids(), which waits for this grid's completion, so the trigger is
// a scheduling hint and may come before the last write without breaking correctness.
__device__ __forceinline__ void AllowDependentGrids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaTriggerProgrammaticLaunchCompletion();
#endif
}

// Reads a workspace record through L2 only, for the reason given above element access: the
// statistics of one batch replace those of the batch before in the same workspace.
template <typename T>
__device__ __forceinline__ T LoadThroughL2(const T* p) {
  static_assert(sizeof(T) % sizeof(unsigned) == 0, "records are whole 4-byte words");
  T value;
  const auto* src = reinterpret_cast<const unsigned*>(p);
  auto* dst = reinterpret_cast<unsigned*>(&value);
#pragma unroll
  for (int i = 0; i < static_cast<int>(sizeof(T) / sizeof(unsigned)); ++i) dst[i] = __ldcg(src + i);
  return value;
}

__device__ __forceinline__ void PrefetchL2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

// ---- normalization prologues ---------------------------------------------------------------
// A normalization kernel (softmax, l2normalize, standardize) cannot read its statistics before
// cudaGridDependencySynchronize(), but it can ask L2 for its input meanwhile: L2 is the
// coherence point, so a prefetched line never goes stale, and the statistics kernel has written
// nothing the prefetch reads.

// Bytes of its first segment each normalization block asks L2 for before its wait
// (tuning/row_normalize_policy.h), and the bytes of one line.
inline constexpr int64_t kNormPrefetchBytes = tuning::RowNormalizePolicy::kPrefetchBytes;
inline constexpr int kLineBytes = 128;

// Group path (a warp's lanes share a row): this lane's slice of `row`, if the row exists.
template <typename S>
__device__ __forceinline__ void PrefetchRowSlice(const S* d_in, int64_t rows, int64_t cols,
                                                 int64_t row, int lane_in_row, int lanes) {
  constexpr int kPerLine = kLineBytes / static_cast<int>(sizeof(S));
  if (row >= rows) return;
  for (int64_t i = static_cast<int64_t>(lane_in_row) * kPerLine; i < cols;
       i += static_cast<int64_t>(lanes) * kPerLine) {
    PrefetchL2(d_in + row * cols + i);
  }
}

// Block path (rows split into `splits` segments of `seg_len`): the start of this block's first
// segment.
template <typename S>
__device__ __forceinline__ void PrefetchFirstSegment(const S* d_in, int64_t cols,
                                                     int64_t splits, int64_t seg_len,
                                                     int64_t segments) {
  constexpr int kPerLine = kLineBytes / static_cast<int>(sizeof(S));
  if (blockIdx.x >= segments) return;
  const int64_t row = blockIdx.x / splits;
  const int64_t begin = (blockIdx.x - row * splits) * seg_len;
  const int64_t len =
      min(min(seg_len, cols - begin), kNormPrefetchBytes / static_cast<int64_t>(sizeof(S)));
  const S* p = d_in + row * cols + begin;
  for (int64_t i = static_cast<int64_t>(threadIdx.x) * kPerLine; i < len;
       i += static_cast<int64_t>(blockDim.x) * kPerLine) {
    PrefetchL2(p + i);
  }
}

// ---- element access ------------------------------------------------------------------------
// Inputs are read through L2 only (ld.global.cg, __ldcg, in element_access.cuh), never through
// the non-coherent read-only path (__ldg, or what the compiler may pick for const __restrict__
// pointers): that path assumes the data fixed for the kernel's whole lifetime, and a
// PDL-launched kernel's lifetime begins while its predecessor still writes this kernel's
// input. Every element is read once, so L1 would buy nothing here anyway.

// Visits the elements of p[0, len) owned by thread `t` of `nthreads` (>= 8) cooperating
// threads: a scalar head up to the first 16-byte boundary, a vector body (Unroll independent
// 16-byte loads in flight per thread, kVecElems<S> elements each), and a scalar tail. Row
// starts are only element-aligned in general (cols need not be a multiple of the vector
// width), hence the head. Calls on_scalar(i, x) and on_vec(i, x[kVecElems<S>] of p[i..]) with
// i relative to p and x in the compute type; never reads outside p[0, len).
template <int Unroll, typename S, typename OnScalar, typename OnVec>
__device__ __forceinline__ void VisitSegment(const S* p, int64_t len, int t, int nthreads,
                                             OnScalar&& on_scalar, OnVec&& on_vec) {
  constexpr int N = kVecElems<S>;
  using C = ComputeOf<S>;
  const int64_t misalign =
      static_cast<int64_t>((reinterpret_cast<uintptr_t>(p) / sizeof(S)) & (N - 1));
  const int64_t head = min(static_cast<int64_t>((N - misalign) & (N - 1)), len);
  if (t < head) on_scalar(t, LoadElem(p + t));

  const int4* body = reinterpret_cast<const int4*>(p + head);
  const int64_t nvec = (len - head) / N;
  int64_t v = t;
  for (; v + (Unroll - 1) * static_cast<int64_t>(nthreads) < nvec; v += Unroll * nthreads) {
    int4 raw[Unroll];
#pragma unroll
    for (int u = 0; u < Unroll; ++u) raw[u] = __ldcg(body + v + u * nthreads);
#pragma unroll
    for (int u = 0; u < Unroll; ++u) {
      C x[N];
      LoadVecFromRaw<S>(raw[u], x);
      on_vec(head + N * (v + u * nthreads), x);
    }
  }
  for (; v < nvec; v += nthreads) {
    C x[N];
    LoadVecFromRaw<S>(__ldcg(body + v), x);
    on_vec(head + N * v, x);
  }

  for (int64_t i = head + N * nvec + t; i < len; i += nthreads) on_scalar(i, LoadElem(p + i));
}

// Visits p[0, len) for one lane `l` of a group of `lanes` lanes sharing a short row
// (len <= a few thousand, so int indices): lane l owns elements l, l + lanes, ... Loads are
// issued Unroll at a time so several are in flight per lane.
template <int Unroll, typename S, typename OnScalar>
__device__ __forceinline__ void VisitShortRow(const S* p, int len, int l, int lanes,
                                              OnScalar&& on_scalar) {
  int i = l;
  for (; i + (Unroll - 1) * lanes < len; i += Unroll * lanes) {
    ComputeOf<S> x[Unroll];
#pragma unroll
    for (int u = 0; u < Unroll; ++u) x[u] = LoadElem(p + i + u * lanes);
#pragma unroll
    for (int u = 0; u < Unroll; ++u) on_scalar(i + u * lanes, x[u]);
  }
  for (; i < len; i += lanes) on_scalar(i, LoadElem(p + i));
}

}  // namespace gpupipe::kernels::cuda::detail
