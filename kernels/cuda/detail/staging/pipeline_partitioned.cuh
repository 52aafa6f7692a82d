// Staging strategy Staging::kPipeline: a block-scope cuda::pipeline with PARTITIONED roles.
// Warp 0 produces (its 32 lanes split each tile's cp.async copies), the other warps consume.
// The pipeline's stage count is a run-time value: pipeline_shared_state<block, S> only sizes
// storage, and the pipeline object keeps its stage count as data, so one kernel serves every
// depth (MakeBlockPipeline instantiates only the tiny make_pipeline for each S).
//
// Why partitioned, and the synccheck report it answers. `compute-sanitizer --tool synccheck`
// reported "Barrier error detected. Missing wait" at pipeline::producer_commit in the former
// UNIFIED block pipeline, where every thread produced and consumed every stage. In libcu++,
// producer_commit makes two arrivals on the stage's `produced` mbarrier for each thread:
// cp.async.mbarrier.arrive (raises the pending count, then arrives once that thread's own
// cp.async have landed) and barrier::arrive, which libcu++ aggregates per warp (__activemask,
// __match_any_sync, one mbarrier.arrive with the lane count by the lowest active lane). So in the
// unified loop each thread arrived on `produced` phase p + 1 of a stage while the arrivals that
// completed phase p were partly made for it by another lane and partly asynchronously, and its
// only observation of phase p was a parity wait issued by the same thread in its consumer role;
// likewise for `consumed`, whose last phases nobody waited on before quit() invalidated the
// barriers. That is the pattern the report flags: a thread arriving on a barrier whose
// previous phase it cannot be shown to have waited for. With roles partitioned no thread both
// arrives on and waits on the same barrier: the producer warp arrives on `produced` and waits on
// `consumed`, the consumer warps wait on `produced` and arrive on `consumed`, as in the CUDA
// guide's producer/consumer example and in CUTLASS's pipelines. Each warp commits converged and
// leaves with quit(); the reference count makes the last one to leave, necessarily after every
// arrival, the one that invalidates the barriers. This reading comes from the library source;
// it is unconfirmed until synccheck runs over kernels_cuda_test on the H200
// (scripts/gpu-check.sh).
#pragma once

#include <cooperative_groups.h>
#include <cuda/pipeline>

#include <cstdint>

#include "kernels/cuda/detail/staging/common.cuh"

namespace gpupipe::kernels::cuda::detail {

using BlockPipeline = ::cuda::pipeline<::cuda::thread_scope_block>;

// make_pipeline over `state` (StagingSmem::pipeline_state) with `stages` (1..kMaxStages) stages.
// Block-collective. Returns a prvalue straight from make_pipeline (guaranteed copy elision: a
// moved-from pipeline would still quit() in its destructor).
__device__ inline BlockPipeline MakeBlockPipeline(const cooperative_groups::thread_block& block,
                                                  void* state, int stages,
                                                  ::cuda::pipeline_role role) {
  constexpr auto kScope = ::cuda::thread_scope_block;
  switch (stages) {
    case 1: return ::cuda::make_pipeline(block, static_cast<::cuda::pipeline_shared_state<kScope, 1>*>(state), role);
    case 2: return ::cuda::make_pipeline(block, static_cast<::cuda::pipeline_shared_state<kScope, 2>*>(state), role);
    case 3: return ::cuda::make_pipeline(block, static_cast<::cuda::pipeline_shared_state<kScope, 3>*>(state), role);
    case 4: return ::cuda::make_pipeline(block, static_cast<::cuda::pipeline_shared_state<kScope, 4>*>(state), role);
    case 5: return ::cuda::make_pipeline(block, static_cast<::cuda::pipeline_shared_state<kScope, 5>*>(state), role);
    case 6: return ::cuda::make_pipeline(block, static_cast<::cuda::pipeline_shared_state<kScope, 6>*>(state), role);
    case 7: return ::cuda::make_pipeline(block, static_cast<::cuda::pipeline_shared_state<kScope, 7>*>(state), role);
    default: return ::cuda::make_pipeline(block, static_cast<::cuda::pipeline_shared_state<kScope, 8>*>(state), role);
  }
}

class PartitionedPipelineStager {
 public:
  // Block-collective prologue (shared memory only, so it may precede the PDL wait).
  __device__ PartitionedPipelineStager(StagingSmem& smem, const TileGeometry& g)
      : smem_(smem),
        g_(g),
        producer_(threadIdx.x < kStagingWarp),
        pipe_(MakeBlockPipeline(cooperative_groups::this_thread_block(), smem.pipeline_state,
                                g.stages,
                                threadIdx.x < kStagingWarp ? ::cuda::pipeline_role::producer
                                                           : ::cuda::pipeline_role::consumer)) {}

  // Tiles first_tile + k * tile_stride (k < count) of d_src (16-byte aligned; every tile lies
  // inside the source). Calls consume(tile, s_tile, rank) on the consumer threads only; all
  // threads of the block call ForEach with the same arguments. Every call consumes all it
  // produces, so a kernel may call it again (one segment of a row after another); the pipeline
  // keeps its ring position across calls, and so does `used_`, the buffers' position.
  template <typename Consume>
  __device__ __forceinline__ void ForEach(const uint4* d_src, int64_t first_tile,
                                          int64_t tile_stride, int64_t count, Consume&& consume) {
    const int64_t tile_vecs = g_.tile_vecs();
    if (producer_) {
      const auto warp = cooperative_groups::tiled_partition<kStagingWarp>(
          cooperative_groups::this_thread_block());
      for (int64_t k = 0; k < count; ++k) {
        pipe_.producer_acquire();  // the consumers released this stage's previous tile
        ::cuda::memcpy_async(warp, smem_.buffer + ((used_ + k) % g_.stages) * tile_vecs,
                             d_src + (first_tile + k * tile_stride) * tile_vecs,
                             ::cuda::aligned_size_t<kStagingVecBytes>(g_.tile_bytes()), pipe_);
        // Commit from a converged warp: one batch per warp, not one per diverged lane group.
        __syncwarp();
        pipe_.producer_commit();
      }
    } else {
      const int rank = static_cast<int>(threadIdx.x) - kStagingWarp;
      for (int64_t k = 0; k < count; ++k) {
        pipe_.consumer_wait();
        consume(first_tile + k * tile_stride,
                static_cast<const uint4*>(smem_.buffer + ((used_ + k) % g_.stages) * tile_vecs),
                rank);
        pipe_.consumer_release();
      }
    }
    used_ += count;
  }

  // Leaves the pipeline once the kernel has no more tiles for it (the CUDA guide's early exit:
  // the thread goes on with plain loads, or ends). From a converged warp; the last thread to
  // leave invalidates the barriers, necessarily after every arrival on them.
  __device__ __forceinline__ void Quit() {
    __syncwarp();
    pipe_.quit();
  }

 private:
  StagingSmem& smem_;
  TileGeometry g_;
  int64_t used_ = 0;  // tiles staged by earlier ForEach calls
  bool producer_;
  BlockPipeline pipe_;
};

}  // namespace gpupipe::kernels::cuda::detail
