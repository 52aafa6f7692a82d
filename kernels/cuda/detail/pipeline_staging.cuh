// Block-level staging of contiguous float tiles from global into shared memory through a
// block-scoped cuda::pipeline (cp.async on sm_80+). Up to Stages tiles are in flight per block
// while the block consumes the oldest one, which hides DRAM latency without needing many
// resident warps.
#pragma once

#include <cooperative_groups.h>
#include <cuda/pipeline>

#include <cstddef>
#include <cstdint>

namespace gpupipe::kernels::cuda::detail {

// Walks the tiles first_tile, first_tile + tile_stride, ... (`count` of them) of `d_src`, each
// TileFloats floats long, calling consume(tile_index, smem_tile) once per tile with the tile
// resident in shared memory and visible to the whole block.
//
// Requirements:
//  - every thread of the block calls this with the same arguments (the pipeline is unified:
//    all threads produce and consume, and producer/consumer calls are block-collective);
//  - d_src + k * TileFloats is 16-byte aligned for every tile k (d_src 16-byte aligned and
//    TileFloats a multiple of 4), which lets memcpy_async use 16-byte cp.async;
//  - tiles[s] is 16-byte aligned;
//  - `consume` must not write shared memory outside the tile it is given, and every tile lies
//    entirely inside the source array (the caller handles the ragged end separately).
template <int Stages, int TileFloats, typename Consume>
__device__ __forceinline__ void ForEachStagedTile(
    const cooperative_groups::thread_block& block,
    ::cuda::pipeline<::cuda::thread_scope_block>& pipe, float (*tiles)[TileFloats],
    const float* d_src, int64_t first_tile, int64_t tile_stride, int64_t count,
    Consume&& consume) {
  static_assert(TileFloats % 4 == 0, "tiles must keep 16-byte alignment");
  constexpr size_t kTileBytes = TileFloats * sizeof(float);

  int64_t fetched = 0;
  auto produce = [&]() {
    const int64_t tile = first_tile + fetched * tile_stride;
    pipe.producer_acquire();
    ::cuda::memcpy_async(block, tiles[fetched % Stages], d_src + tile * TileFloats,
                         ::cuda::aligned_size_t<16>(kTileBytes), pipe);
    // The block-cooperative copy splits the tile over threads with lane-dependent trip counts;
    // re-converge so the commit is one batch per warp rather than one per diverged lane group.
    __syncwarp();
    pipe.producer_commit();
    ++fetched;
  };

  // Prime: `count` is block-uniform, so these branches never diverge.
  while (fetched < count && fetched < Stages) produce();

  for (int64_t k = 0; k < count; ++k) {
    pipe.consumer_wait();
    consume(first_tile + k * tile_stride, tiles[k % Stages]);
    pipe.consumer_release();
    // The buffer just released is the one the next tile lands in.
    if (fetched < count) produce();
  }
}

}  // namespace gpupipe::kernels::cuda::detail
