// Row segments through a staging strategy: SegmentLoader<S>::Visit walks p[0, len) as
// detail::VisitSegment does (same callbacks, same indices relative to p), with the whole tiles
// of the segment's 16-byte-aligned body staged through StagerFor<S> and only the unaligned head
// and the ragged rest read with plain loads. SegmentLoader<kDirect> is VisitSegment itself.
// Block-collective: every thread of the block calls Visit with the same p and len; threads of a
// partitioned pipeline's producer warp see only head and rest elements.
// Any element type T of element_access.cuh: the staged tiles are 16-byte vectors whatever T is
// (pipeline_staging.cuh), each widened to kVecElems<T> compute values for on_vec as
// VisitSegment does; the head and rest are VisitSegment's.
// Barriers: one stager serves every Visit of the block, so its ring position and barrier phases
// carry over from one segment to the next (the stagers count tiles across ForEach calls; a
// segment with no whole tile stages nothing). Every thread must call Quit() after its last
// Visit: the mbarrier strategies observe their last phases there (bulk.cuh,
// pipeline_partitioned.cuh).
#pragma once

#include <cstdint>

#include "kernels/cuda/detail/element_access.cuh"
#include "kernels/cuda/detail/pipeline_staging.cuh"
#include "kernels/cuda/detail/row_access.cuh"

namespace gpupipe::kernels::cuda::detail {

// The block's staging storage, for kernels that stage from a helper rather than declaring it.
__device__ __forceinline__ StagingSmem& BlockStagingSmem() {
  __shared__ StagingSmem smem;
  return smem;
}

template <Staging S, int Unroll>
class SegmentLoader {
 public:
  // Block-collective prologue (shared memory only: it may precede the PDL wait).
  __device__ explicit SegmentLoader(int stages)
      : g_(StagedGeometry(S, static_cast<int>(blockDim.x), stages)),
        stager_(BlockStagingSmem(), g_) {}

  template <typename T, typename OnScalar, typename OnVec>
  __device__ __forceinline__ void Visit(const T* p, int64_t len, OnScalar&& on_scalar,
                                        OnVec&& on_vec) {
    constexpr int N = kVecElems<T>;
    using C = ComputeOf<T>;
    const int t = static_cast<int>(threadIdx.x);
    const int64_t misalign =
        static_cast<int64_t>((reinterpret_cast<uintptr_t>(p) / sizeof(T)) & (N - 1));
    const int64_t head = min(static_cast<int64_t>((N - misalign) & (N - 1)), len);
    if (t < head) on_scalar(t, LoadElem(p + t));

    const int64_t tile_elems = int64_t{N} * g_.tile_vecs();
    const int64_t tiles = (len - head) / tile_elems;
    stager_.ForEach(reinterpret_cast<const uint4*>(p + head), 0, 1, tiles,
                    [&](int64_t tile, const uint4* s_tile, int rank) {
                      const int4* s4 = reinterpret_cast<const int4*>(s_tile);
                      const int64_t base = head + tile * tile_elems;
                      // Two shared-memory loads in flight are enough to cover their latency;
                      // more unrolling costs registers (the block kernels are capped at 64).
#pragma unroll 2
                      for (int u = 0; u < g_.vecs_per_rank; ++u) {
                        const int64_t v = rank + static_cast<int64_t>(u) * g_.ranks;
                        C x[N];
                        LoadVecFromRaw<T>(s4[v], x);
                        on_vec(base + N * v, x);
                      }
                    });

    // The rest starts 16-byte aligned, so VisitSegment takes no head there.
    const int64_t done = head + tiles * tile_elems;
    VisitSegment<Unroll>(
        p + done, len - done, t, static_cast<int>(blockDim.x),
        [&](int64_t i, C x) { on_scalar(done + i, x); },
        [&](int64_t i, C (&x)[N]) { on_vec(done + i, x); });
  }

  // After the last Visit: leaves the strategy's pipeline (see the stagers' Quit).
  __device__ __forceinline__ void Quit() { stager_.Quit(); }

 private:
  TileGeometry g_;
  StagerFor<S> stager_;
};

template <int Unroll>
class SegmentLoader<Staging::kDirect, Unroll> {
 public:
  __device__ explicit SegmentLoader(int /*stages*/) {}

  template <typename T, typename OnScalar, typename OnVec>
  __device__ __forceinline__ void Visit(const T* p, int64_t len, OnScalar&& on_scalar,
                                        OnVec&& on_vec) {
    VisitSegment<Unroll>(p, len, static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x),
                         on_scalar, on_vec);
  }
  __device__ __forceinline__ void Quit() {}
};

}  // namespace gpupipe::kernels::cuda::detail
