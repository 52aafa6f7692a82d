// Staging strategy Staging::kPipeline: a block-scope cuda::pipeline with PARTITIONED roles.
// Warp 0 produces (its 32 lanes split each tile's cp.async copies), the other warps consume.
// The pipeline's stage count is a run-time value: pipeline_shared_state<block, S> only sizes
// storage, and the pipeline object keeps its stage count as data, so one kernel serves every
// depth (MakeBlockPipeline instantiates only the tiny make_pipeline for each S).
//
// Why partitioned: with roles partitioned no thread both produces and consumes a stage, as in
// the CUDA guide's producer/consumer example and in CUTLASS's pipelines; an earlier UNIFIED
// block pipeline drew synccheck reports from both roles at once.
//
// Barrier protocol (libcu++ pipeline_shared_state: per stage s a `produced` and a `consumed`
// mbarrier). Tile j (counted from the prologue, across ForEach calls) uses stage s = j % S in
// round r = j / S, which is phase r of both barriers of s.
//  - produced[s] (arrival count: the 32 producer threads): the producer warp's producer_commit
//    arrives for round r, once per thread through barrier::arrive (libcu++ aggregates the warp's
//    arrivals into one) and once asynchronously through cp.async.mbarrier.arrive, which holds
//    the phase open until the thread's cp.async have landed. Consumers wait for phase r
//    (consumer_wait) before reading the tile.
//  - consumed[s] (arrival count: the consumer threads): each consumer arrives for round r
//    (consumer_release) after its last read of the tile; the producer waits for phase r - 1
//    (producer_acquire) before copying round r into the stage.
//  - Observed arrivals. compute-sanitizer synccheck reported "Missing wait" at producer_commit:
//    it requires a thread that arrived on a barrier phase to observe that phase's completion
//    before it arrives on the same barrier again, and the producer never waits on `produced`
//    (nor a consumer on `consumed`). That is no protocol error: the producer's arrival for
//    round r follows producer_acquire's wait on consumed[s] phase r - 1, which completes only
//    after every consumer waited on produced[s] phase r - 1, so the arrival cannot land in the
//    earlier phase (the only real hazard of an unobserved arrival). The tool cannot see that
//    chain, so each role now also waits on its own barrier's previous phase before arriving
//    (WaitStagePhase; the phase is already complete by the chain above, so the wait is one
//    try_wait), and Quit() waits for the last phase each thread arrived on before the barriers
//    are invalidated. No ABA: a role is never two phases behind on a barrier it waits on,
//    since every phase of each barrier needs its own arrival. Holds for any S in
//    1..kMaxStages and any number of tiles: only j decides stage and phase.
// Each warp commits converged and leaves with quit(); the reference count makes the last one
// to leave, necessarily after every arrival, the one that invalidates the barriers.
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

// The stage records of a pipeline_shared_state<block, S> laid over StagingSmem::pipeline_state:
// the same type the pipeline indexes (its stages come first), so the layouts agree by
// construction.
using BlockPipelineStage = ::cuda::__pipeline_stage<::cuda::thread_scope_block>;
static_assert(sizeof(::cuda::pipeline_shared_state<::cuda::thread_scope_block, 2>) -
                      sizeof(::cuda::pipeline_shared_state<::cuda::thread_scope_block, 1>) ==
                  sizeof(BlockPipelineStage),
              "pipeline_shared_state starts with its array of stage records");

// Waits until phase `phase` of a stage barrier has completed (parity phase & 1).
__device__ __forceinline__ void WaitStagePhase(::cuda::barrier<::cuda::thread_scope_block>& bar,
                                               int64_t phase) {
  bar.wait_parity((phase & 1) != 0);
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
        const int64_t j = used_ + k;
        const int s = static_cast<int>(j % g_.stages);
        const int64_t round = j / g_.stages;
        pipe_.producer_acquire();  // the consumers released this stage's previous tile
        // This thread's arrival on produced[s] for round - 1 completed before the consumers
        // released that round; observe it before arriving again (see the protocol above).
        if (round > 0) WaitStagePhase(Stage(s).__produced, round - 1);
        ::cuda::memcpy_async(warp, smem_.buffer + s * tile_vecs,
                             d_src + (first_tile + k * tile_stride) * tile_vecs,
                             ::cuda::aligned_size_t<kStagingVecBytes>(g_.tile_bytes()), pipe_);
        // Commit from a converged warp: one batch per warp, not one per diverged lane group.
        __syncwarp();
        pipe_.producer_commit();
      }
    } else {
      const int rank = static_cast<int>(threadIdx.x) - kStagingWarp;
      for (int64_t k = 0; k < count; ++k) {
        const int64_t j = used_ + k;
        const int s = static_cast<int>(j % g_.stages);
        const int64_t round = j / g_.stages;
        pipe_.consumer_wait();
        consume(first_tile + k * tile_stride,
                static_cast<const uint4*>(smem_.buffer + s * tile_vecs), rank);
        // This thread's arrival on consumed[s] for round - 1 completed before the producer
        // committed this round; observe it before arriving again.
        if (round > 0) WaitStagePhase(Stage(s).__consumed, round - 1);
        pipe_.consumer_release();
      }
    }
    used_ += count;
  }

  // Leaves the pipeline once the kernel has no more tiles for it (the CUDA guide's early exit:
  // the thread goes on with plain loads, or ends). From a converged warp; the last thread to
  // leave invalidates the barriers, necessarily after every arrival on them.
  // Before leaving, each thread observes the last phase it arrived on of each stage barrier of
  // its role, so no arrival is left unobserved when the barriers are invalidated.
  __device__ __forceinline__ void Quit() {
    const int64_t first = used_ > g_.stages ? used_ - g_.stages : 0;
    for (int64_t j = first; j < used_; ++j) {
      BlockPipelineStage& stage = Stage(static_cast<int>(j % g_.stages));
      WaitStagePhase(producer_ ? stage.__produced : stage.__consumed, j / g_.stages);
    }
    __syncwarp();
    pipe_.quit();
  }

 private:
  __device__ __forceinline__ BlockPipelineStage& Stage(int s) {
    return reinterpret_cast<BlockPipelineStage*>(smem_.pipeline_state)[s];
  }

  StagingSmem& smem_;
  TileGeometry g_;
  int64_t used_ = 0;  // tiles staged by earlier ForEach calls
  bool producer_;
  BlockPipeline pipe_;
};

}  // namespace gpupipe::kernels::cuda::detail
