// Staging strategy Staging::kBulk: Hopper bulk copies (cp.async.bulk.shared::cluster.global.
// mbarrier::complete_tx::bytes, through the <cuda/ptx> wrappers), one per tile, issued by
// thread 0 (the leader) and completing on the tile's `full` mbarrier.
//
// Barrier protocol. Tile j (counted from the prologue, across ForEach calls) uses slot
// s = j % S in that slot's phase u = j / S of both of its barriers; a parity wait for phase u
// uses parity u & 1.
//  - full[s] (arrival count 1): the leader arrives with expect_tx(tile bytes) and issues the
//    copy, whose bytes complete the transaction; every thread waits for phase u before it reads
//    the tile.
//  - empty[s] (arrival count: every thread of the block): each thread arrives after its own
//    last read of the tile (no warp-level proxy arrival: each reader orders its own reads before
//    the release). The leader waits for phase u before it issues tile j + S into the slot, then
//    fences the async proxy, so the bulk write cannot overtake any reader.
//  - Every thread observes a phase of a barrier it arrived on before it arrives on that barrier
//    again (compute-sanitizer synccheck checks this): before arriving on empty[s] phase u >= 1 a
//    thread waits for phase u - 1, already complete because full[s] phase u was issued after it
//    (so the wait costs one try_wait); the leader's arrivals on full[s] follow its own waits on
//    full[s] as a reader. Quit() waits for the last phase of every slot, so no arrival is
//    unobserved and no copy outstanding when the block exits.
//  - No phase can be skipped by a parity wait (ABA): phase u + 1 of full[s] needs every
//    thread's arrival on empty[s] phase u, and phase u + 1 of empty[s] needs full[s] phase u + 1,
//    so no thread is ever two phases behind on a barrier it waits on. Holds for any S in
//    1..kMaxStages and any number of tiles: only j decides slot and phase.
// Alignment: source tiles start at multiples of the tile size (a multiple of 16 bytes) from a
// 16-byte-aligned source, slots at multiples of 16 bytes from a 128-byte-aligned buffer, and
// sizes are multiples of 16, as cp.async.bulk requires. Whatever is not a whole tile (the
// ragged end) is the caller's, read with plain loads.
#pragma once

#include <cuda/ptx>

#include <cstdint>

#include "kernels/cuda/detail/staging/common.cuh"

namespace gpupipe::kernels::cuda::detail {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
// Device code for a target without bulk copies or mbarrier transaction counts: the kernels
// that stage with kBulk are still instantiated, but the host never launches them there
// (ValidateShapeConfig refuses kBulk below kBulkCopyArch, ResolveStaging never picks it), so
// their stager only traps.
__device__ __forceinline__ void WaitParity(uint64_t*, int64_t) { __trap(); }

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
__device__ __forceinline__ void WaitParity(uint64_t* bar, int64_t phase) {
  const uint32_t parity = static_cast<uint32_t>(phase & 1);
  while (!::cuda::ptx::mbarrier_try_wait_parity(bar, parity)) {
  }
}

class BulkStager {
 public:
  // Block-collective prologue: initializes the barriers (shared memory only, so it may precede
  // the PDL wait) and makes the initialization visible to the async proxy and the block.
  __device__ BulkStager(StagingSmem& smem, const TileGeometry& g) : smem_(smem), g_(g) {
    if (threadIdx.x == 0) {
      for (int s = 0; s < g_.stages; ++s) {
        ::cuda::ptx::mbarrier_init(&smem_.full[s], 1);
        ::cuda::ptx::mbarrier_init(&smem_.empty[s], blockDim.x);
      }
      ::cuda::ptx::fence_mbarrier_init(::cuda::ptx::sem_release, ::cuda::ptx::scope_cluster);
    }
    __syncthreads();
  }

  // As PartitionedPipelineStager::ForEach; every thread is a consumer, rank = threadIdx.x.
  // Slots and phases continue across calls: the j-th tile staged since the prologue (j =
  // used_ + k) uses slot j % S in that slot's phase j / S.
  template <typename Consume>
  __device__ __forceinline__ void ForEach(const uint4* d_src, int64_t first_tile,
                                          int64_t tile_stride, int64_t count, Consume&& consume) {
    const int64_t tile_vecs = g_.tile_vecs();
    const int rank = static_cast<int>(threadIdx.x);
    const bool leader = threadIdx.x == 0;
    auto issue = [&](int64_t k) {  // leader only; slot (used_ + k) % S is free
      const int s = static_cast<int>((used_ + k) % g_.stages);
      const uint32_t bytes = static_cast<uint32_t>(g_.tile_bytes());
      (void)::cuda::ptx::mbarrier_arrive_expect_tx(::cuda::ptx::sem_release,
                                                   ::cuda::ptx::scope_cta,
                                                   ::cuda::ptx::space_shared, &smem_.full[s],
                                                   bytes);
      ::cuda::ptx::cp_async_bulk(::cuda::ptx::space_cluster, ::cuda::ptx::space_global,
                                 smem_.buffer + s * tile_vecs,
                                 d_src + (first_tile + k * tile_stride) * tile_vecs, bytes,
                                 &smem_.full[s]);
    };

    // Slots of the previous call's tiles were released (its leader drain), so the first S
    // tiles may go at once.
    if (leader) {
      for (int64_t k = 0; k < count && k < g_.stages; ++k) issue(k);
    }
    for (int64_t k = 0; k < count; ++k) {
      const int64_t j = used_ + k;
      const int s = static_cast<int>(j % g_.stages);
      const int64_t use = j / g_.stages;
      WaitParity(&smem_.full[s], use);
      consume(first_tile + k * tile_stride,
              static_cast<const uint4*>(smem_.buffer + s * tile_vecs), rank);
      // This thread's previous arrival on empty[s] (phase use - 1) completed before full[s]
      // phase `use` was issued; observe it before arriving again.
      if (use > 0) WaitParity(&smem_.empty[s], use - 1);
      (void)::cuda::ptx::mbarrier_arrive(&smem_.empty[s]);  // done reading the slot
      if (leader && k + g_.stages < count) {
        WaitParity(&smem_.empty[s], use);  // every thread is done with tile j
        // Order the readers' generic-proxy reads, acquired above, before the bulk write.
        ::cuda::ptx::fence_proxy_async(::cuda::ptx::space_shared);
        issue(k + g_.stages);
      }
    }
    // Tiles count - S .. count - 1 were not followed by a refill; the leader observes their
    // releases so that the next call may refill every slot at once.
    if (leader) {
      for (int64_t k = count > g_.stages ? count - g_.stages : 0; k < count; ++k) {
        WaitParity(&smem_.empty[(used_ + k) % g_.stages], (used_ + k) / g_.stages);
      }
      ::cuda::ptx::fence_proxy_async(::cuda::ptx::space_shared);
    }
    used_ += count;
  }

  // After the last ForEach: every thread observes the last phase of every slot's `empty`
  // barrier (it arrived on each), so none of its arrivals is left unobserved; all copies have
  // landed (each was waited on through `full`).
  __device__ __forceinline__ void Quit() {
    const int64_t first = used_ > g_.stages ? used_ - g_.stages : 0;
    for (int64_t j = first; j < used_; ++j) WaitParity(&smem_.empty[j % g_.stages], j / g_.stages);
  }

 private:
  StagingSmem& smem_;
  TileGeometry g_;
  int64_t used_ = 0;  // tiles staged by earlier ForEach calls
};
#endif

}  // namespace gpupipe::kernels::cuda::detail
