// Shared pieces of the staging strategies (kernels/cuda/detail/staging/*.cuh): the tile
// geometry every strategy and the host dispatch agree on, and the block's shared storage.
//
// A staged kernel streams contiguous tiles of 16-byte vectors from global into shared memory
// and hands each tile to a consumer callback. Tiles are dtype-agnostic (bytes, as uint4
// vectors): the caller converts the vectors to its element type. The vectors of one tile are
// split over `ranks` consumer threads, rank r owning vectors r, r + ranks, ... (vecs_per_rank of
// them): consecutive ranks read consecutive 16-byte words of shared memory (conflict-free) and
// write consecutive 16-byte words of global memory (coalesced). The thread-scope strategies
// rely on that ownership: a thread copies exactly the vectors it later consumes, so it never
// needs another thread's copy to have landed.
#pragma once

#include <cuda/pipeline>

#include <cstdint>

#include "kernels/cuda/detail/barrier_ring.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/tuning/staging_policy.h"

namespace gpupipe::kernels::cuda::detail {

// Shared-memory staging budget of one block, split into `stages` tiles (tuning/staging_policy.h).
inline constexpr int kStagingBudgetBytes = tuning::StagingPolicy::kBudgetBytes;
inline constexpr int kStagingVecBytes = 16;
inline constexpr int kStagingWarp = 32;

// Threads that only produce (copy) and never consume: the partitioned cuda::pipeline gives
// one warp the producer role. Every other strategy has all threads consume.
__host__ __device__ constexpr int StagingProducerThreads(Staging staging) {
  return staging == Staging::kPipeline ? kStagingWarp : 0;
}

struct TileGeometry {
  int ranks;          // consumer threads: vector r of a tile belongs to rank r % ranks
  int vecs_per_rank;  // 16-byte vectors each rank consumes per tile (>= 1)
  int stages;         // tiles in flight per block, kMinStages..kMaxStages

  __host__ __device__ int64_t tile_vecs() const {
    return static_cast<int64_t>(ranks) * vecs_per_rank;
  }
  __host__ __device__ int64_t tile_bytes() const { return tile_vecs() * kStagingVecBytes; }
};

// The geometry of a block of `threads` threads (a multiple of 32, at most 256 so that
// kMaxStages tiles of one vector per rank fit the budget) staging with `stages` buffers.
// Host and device compute it the same way, so the grid sizing matches what the kernel walks.
__host__ __device__ inline TileGeometry StagedGeometry(Staging staging, int threads,
                                                      int stages) {
  const int ranks = threads - StagingProducerThreads(staging);
  const int per_rank = kStagingBudgetBytes / (kStagingVecBytes * ranks * stages);
  return {ranks, per_rank < 1 ? 1 : per_rank, stages};
}

// One block's staging storage; declared `__shared__` by the kernel. Each strategy uses the
// part it needs (the barrier words cost a few hundred bytes in the others).
using BlockPipelineState8 = ::cuda::pipeline_shared_state<::cuda::thread_scope_block, kMaxStages>;
struct StagingSmem {
  alignas(128) uint4 buffer[kStagingBudgetBytes / kStagingVecBytes];
  // Raw storage for a pipeline_shared_state<block, stages> with stages chosen at run time
  // (MakeBlockPipeline): sized for the largest, so any of them fits (pipeline_partitioned.cuh
  // checks size and alignment); a kernel places only one there.
  alignas(16) unsigned char pipeline_state[sizeof(BlockPipelineState8)];
  // The bulk strategy's ring: `full` completes when a tile has landed, `empty` when every thread
  // of the block is done reading it (bulk.cuh).
  RingBarriers<kMaxStages> bulk_ring;
};

}  // namespace gpupipe::kernels::cuda::detail
