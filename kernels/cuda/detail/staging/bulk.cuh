// Staging strategy Staging::kBulk: Hopper bulk copies (cp.async.bulk.shared::cluster.global.
// mbarrier::complete_tx::bytes, through the <cuda/ptx> wrappers), one per tile, issued by
// thread 0 and completing on the tile's `full` mbarrier:
//  - full[s] (arrival count 1): thread 0 arrives with expect_tx(tile bytes) and issues the
//    copy; the phase completes when the arrival is in and every byte has landed. Consumers
//    wait on it by phase parity: the k-th use of a slot is phase k, parity k & 1.
//  - empty[s] (arrival count: the block's warps): lane 0 of each warp arrives after its warp is
//    done with the tile (__syncwarp first); thread 0 waits on it before it reuses the slot, and
//    at the end waits for the last phases so that no bulk copy or arrival is outstanding when
//    the block exits.
// Alignment: source tiles start at multiples of the tile size (a multiple of 16 bytes) from a
// 16-byte-aligned source, slots at multiples of 16 bytes from a 128-byte-aligned buffer, and
// sizes are multiples of 16, as cp.async.bulk requires. Whatever is not a whole tile (the
// ragged end) is the caller's, read with plain loads.
#pragma once

#include <cuda/ptx>

#include <cstdint>

#include "kernels/cuda/detail/staging/common.cuh"

namespace gpupipe::kernels::cuda::detail {

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
        ::cuda::ptx::mbarrier_init(&smem_.empty[s], blockDim.x / kStagingWarp);
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
    auto issue = [&](int64_t k) {  // thread 0 only; slot (used_ + k) % S is free
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

    if (leader) {
      for (int64_t k = 0; k < count && k < g_.stages; ++k) issue(k);
    }
    for (int64_t k = 0; k < count; ++k) {
      const int s = static_cast<int>((used_ + k) % g_.stages);
      const int64_t use = (used_ + k) / g_.stages;
      WaitParity(&smem_.full[s], use);
      consume(first_tile + k * tile_stride,
              static_cast<const uint4*>(smem_.buffer + s * tile_vecs), rank);
      __syncwarp();  // the whole warp is done with the slot before lane 0 says so
      if (threadIdx.x % kStagingWarp == 0) (void)::cuda::ptx::mbarrier_arrive(&smem_.empty[s]);
      if (leader && k + g_.stages < count) {
        WaitParity(&smem_.empty[s], use);
        issue(k + g_.stages);
      }
    }
    // Tiles count - S .. count - 1 were not followed by a refill; observe their releases so
    // every phase of both barrier sets has completed and been waited on before the block ends
    // or the next call refills the slots.
    if (leader) {
      for (int64_t k = count > g_.stages ? count - g_.stages : 0; k < count; ++k) {
        WaitParity(&smem_.empty[(used_ + k) % g_.stages], (used_ + k) / g_.stages);
      }
    }
    __syncwarp();
    used_ += count;
  }

  __device__ __forceinline__ void Quit() {}  // nothing outstanding after ForEach

 private:
  StagingSmem& smem_;
  TileGeometry g_;
  int64_t used_ = 0;  // tiles staged by earlier ForEach calls
};

}  // namespace gpupipe::kernels::cuda::detail
