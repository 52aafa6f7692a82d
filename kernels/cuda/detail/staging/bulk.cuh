// Staging strategy Staging::kBulk: Hopper bulk copies (cp.async.bulk.shared::cluster.global.
// mbarrier::complete_tx::bytes, through the <cuda/ptx> wrappers), one per tile, issued by
// thread 0 (the leader) and completing on the tile's `full` mbarrier.
//
// Barrier protocol: a BarrierRing<kBulkCopy> of S = stages slots (detail/barrier_ring.cuh states
// the protocol and why it is sound). Tile j staged since the prologue, across ForEach calls, is
// use j of the ring. Every thread of the block is a consumer (empty[s] counts blockDim.x
// arrivals: each reader releases the slot itself after its own last read, no warp-level proxy
// arrival); the leader is also the one producer (full[s] counts its commit and the copy's
// bytes). The leader issues a call's first S tiles at once, each acquiring its slot (on a later
// call: the releases of the previous call's tiles), then refills slot s with tile j + S right
// after its own release of tile j. Its commits are observed by its own waits as a consumer, so
// Quit() is every thread's ConsumerTail.
// Alignment: source tiles start at multiples of the tile size (a multiple of 16 bytes) from a
// 16-byte-aligned source, slots at multiples of 16 bytes from a 128-byte-aligned buffer, and
// sizes are multiples of 16, as cp.async.bulk requires. Whatever is not a whole tile (the
// ragged end) is the caller's, read with plain loads.
#pragma once

#include <cstdint>

#include "kernels/cuda/detail/barrier_ring.cuh"
#include "kernels/cuda/detail/staging/common.cuh"

namespace gpupipe::kernels::cuda::detail {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
// Device code for a target without bulk copies or mbarrier transaction counts: the kernels
// that stage with kBulk are still instantiated, but the host never launches them there
// (ValidateShapeConfig refuses kBulk below kBulkCopyArch, ResolveStaging never picks it), so
// their stager only traps.
class BulkStager {
 public:
  __device__ BulkStager(StagingSmem&, const TileGeometry&) { __trap(); }
  template <typename Consume>
  __device__ __forceinline__ void ForEach(const uint4*, int64_t, int64_t, int64_t, Consume&&) {
    __trap();
  }
  __device__ __forceinline__ void Quit() { __trap(); }
};
#else
class BulkStager {
 public:
  // Block-collective prologue: initializes the barriers (shared memory only, so it may precede
  // the PDL wait) and makes the initialization visible to the async proxy and the block.
  __device__ BulkStager(StagingSmem& smem, const TileGeometry& g)
      : smem_(smem), g_(g), ring_(smem.bulk_ring), next_(g.stages) {
    if (threadIdx.x == 0) {
      ring_.Init(g_.stages, 1, blockDim.x);
      FenceRingInit();
    }
    __syncthreads();
  }

  // As PartitionedPipelineStager::ForEach; every thread is a consumer, rank = threadIdx.x.
  template <typename Consume>
  __device__ __forceinline__ void ForEach(const uint4* d_src, int64_t first_tile,
                                          int64_t tile_stride, int64_t count, Consume&& consume) {
    const int64_t tile_vecs = g_.tile_vecs();
    const int rank = static_cast<int>(threadIdx.x);
    const bool leader = threadIdx.x == 0;
    // Leader only: tile k of this call into its slot, as use `st` of the ring.
    auto issue = [&](const RingState& st, int64_t k) {
      ring_.ProducerAcquire(st);
      ring_.ProducerCommit(st, smem_.buffer + st.index() * tile_vecs,
                           d_src + (first_tile + k * tile_stride) * tile_vecs,
                           static_cast<uint32_t>(g_.tile_bytes()));
    };

    if (leader) {
      RingState st = next_;
      for (int64_t k = 0; k < count && k < g_.stages; ++k, st.Advance()) issue(st, k);
    }
    RingState st = next_;
    for (int64_t k = 0; k < count; ++k, st.Advance()) {
      ring_.ConsumerWait(st);
      consume(first_tile + k * tile_stride,
              static_cast<const uint4*>(smem_.buffer + st.index() * tile_vecs), rank);
      ring_.ConsumerRelease(st);  // done reading the slot
      if (leader && k + g_.stages < count) issue(st.NextLap(), k + g_.stages);
    }
    next_ = st;
  }

  // After the last ForEach: every thread observes the last phase of every slot's `empty`
  // barrier (it arrived on each); all copies have landed (each was waited on through `full`).
  __device__ __forceinline__ void Quit() { ring_.ConsumerTail(next_); }

 private:
  StagingSmem& smem_;
  TileGeometry g_;
  BarrierRing<RingFill::kBulkCopy> ring_;
  RingState next_;  // the ring position of the next tile to stage
};
#endif

}  // namespace gpupipe::kernels::cuda::detail
