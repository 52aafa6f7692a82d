// Thread-level access patterns shared by the row kernels, plus thin wrappers over the PDL
// device intrinsics.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/common/elementwise_program.h"

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

// Floats of its first segment each normalization block asks L2 for before its wait (initial
// value, not measured separately on the H200), and the floats of one 128-byte line.
inline constexpr int64_t kNormPrefetchFloats = 8192;
inline constexpr int kFloatsPerLine = 32;

// Group path (a warp's lanes share a row): this lane's slice of `row`, if the row exists.
__device__ __forceinline__ void PrefetchRowSlice(const float* d_in, int64_t rows, int64_t cols,
                                                 int64_t row, int lane_in_row, int lanes) {
  if (row >= rows) return;
  for (int64_t i = static_cast<int64_t>(lane_in_row) * kFloatsPerLine; i < cols;
       i += static_cast<int64_t>(lanes) * kFloatsPerLine) {
    PrefetchL2(d_in + row * cols + i);
  }
}

// Block path (rows split into `splits` segments of `seg_len`): the start of this block's first
// segment.
__device__ __forceinline__ void PrefetchFirstSegment(const float* d_in, int64_t cols,
                                                     int64_t splits, int64_t seg_len,
                                                     int64_t segments) {
  if (blockIdx.x >= segments) return;
  const int64_t row = blockIdx.x / splits;
  const int64_t begin = (blockIdx.x - row * splits) * seg_len;
  const int64_t len = min(min(seg_len, cols - begin), kNormPrefetchFloats);
  const float* p = d_in + row * cols + begin;
  for (int64_t i = static_cast<int64_t>(threadIdx.x) * kFloatsPerLine; i < len;
       i += static_cast<int64_t>(blockDim.x) * kFloatsPerLine) {
    PrefetchL2(p + i);
  }
}

// ---- element access ------------------------------------------------------------------------
// Inputs are read through L2 only (ld.global.cg, __ldcg), never through the non-coherent
// read-only path (__ldg, or what the compiler may pick for const __restrict__ pointers): that
// path assumes the data fixed for the kernel's whole lifetime, and a PDL-launched kernel's
// lifetime begins while its predecessor still writes this kernel's input. Every element is
// read once, so L1 would buy nothing here anyway.

__device__ __forceinline__ float4 ApplyEw4(const EwProgram& program, float4 v) {
  float x[4] = {v.x, v.y, v.z, v.w};
  ApplyEwN(program, x);
  return {x[0], x[1], x[2], x[3]};
}

// The program over U float4 at once (4 * U values per instruction dispatch), in place.
template <int U>
__device__ __forceinline__ void ApplyEwVec(const EwProgram& program, float4 (&q)[U]) {
  float x[4 * U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    x[4 * u] = q[u].x;
    x[4 * u + 1] = q[u].y;
    x[4 * u + 2] = q[u].z;
    x[4 * u + 3] = q[u].w;
  }
  ApplyEwN(program, x);
#pragma unroll
  for (int u = 0; u < U; ++u) q[u] = {x[4 * u], x[4 * u + 1], x[4 * u + 2], x[4 * u + 3]};
}

// Stores 4 consecutive floats at `dst`; `vec` says dst is 16-byte aligned.
__device__ __forceinline__ void StoreFloat4(float* dst, float4 v, bool vec) {
  if (vec) {
    *reinterpret_cast<float4*>(dst) = v;
  } else {
    dst[0] = v.x;
    dst[1] = v.y;
    dst[2] = v.z;
    dst[3] = v.w;
  }
}

// Visits the elements of p[0, len) owned by thread `t` of `nthreads` cooperating threads: a
// scalar head up to the first 16-byte boundary, a float4 body (Unroll independent 16-byte
// loads in flight per thread), and a scalar tail. Row starts are only 4-byte aligned in
// general (cols need not be a multiple of 4), hence the head. Calls on_scalar(i, x) and
// on_vec(i, float4 of p[i..i+3]) with i relative to p; never reads outside p[0, len).
template <int Unroll, typename OnScalar, typename OnVec>
__device__ __forceinline__ void VisitSegment(const float* p, int64_t len, int t,
                                             int nthreads, OnScalar&& on_scalar, OnVec&& on_vec) {
  const int64_t misalign = static_cast<int64_t>((reinterpret_cast<uintptr_t>(p) >> 2) & 3);
  const int64_t head = min(static_cast<int64_t>((4 - misalign) & 3), len);
  if (t < head) on_scalar(t, __ldcg(p + t));

  const float4* body = reinterpret_cast<const float4*>(p + head);
  const int64_t nvec = (len - head) / 4;
  int64_t v = t;
  for (; v + (Unroll - 1) * static_cast<int64_t>(nthreads) < nvec; v += Unroll * nthreads) {
    float4 q[Unroll];
#pragma unroll
    for (int u = 0; u < Unroll; ++u) q[u] = __ldcg(body + v + u * nthreads);
#pragma unroll
    for (int u = 0; u < Unroll; ++u) on_vec(head + 4 * (v + u * nthreads), q[u]);
  }
  for (; v < nvec; v += nthreads) on_vec(head + 4 * v, __ldcg(body + v));

  for (int64_t i = head + 4 * nvec + t; i < len; i += nthreads) on_scalar(i, __ldcg(p + i));
}

// Visits p[0, len) for one lane `l` of a group of `lanes` lanes sharing a short row
// (len <= a few thousand, so int indices): lane l owns elements l, l + lanes, ... Loads are
// issued Unroll at a time so several are in flight per lane.
template <int Unroll, typename OnScalar>
__device__ __forceinline__ void VisitShortRow(const float* p, int len, int l,
                                              int lanes, OnScalar&& on_scalar) {
  int i = l;
  for (; i + (Unroll - 1) * lanes < len; i += Unroll * lanes) {
    float x[Unroll];
#pragma unroll
    for (int u = 0; u < Unroll; ++u) x[u] = __ldcg(p + i + u * lanes);
#pragma unroll
    for (int u = 0; u < Unroll; ++u) on_scalar(i + u * lanes, x[u]);
  }
  for (; i < len; i += lanes) on_scalar(i, __ldcg(p + i));
}

}  // namespace gpupipe::kernels::cuda::detail
