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
// Barrier protocol: libcu++'s own, through its public API only (make_pipeline with a role,
// producer_acquire / producer_commit, consumer_wait / consumer_release, quit). The pipeline walks
// the ring of detail/barrier_ring.cuh inside pipeline_shared_state: per stage a `produced`
// barrier (the ring's full: the producer warp's 32 threads arrive, each once through
// cp.async.mbarrier.arrive, which holds the phase open until its copies have landed, and once
// through barrier::arrive) and a `consumed` barrier (the ring's empty: every consumer arrives).
// Tile j, counted across ForEach calls, is use j of that ring: the pipeline keeps its head and
// tail across calls, and `next_` the matching buffer slot, since every call consumes all it
// produces.
// Unlike BarrierRing, the pipeline never observes its own arrivals: compute-sanitizer synccheck
// reports producer_commit ("Missing wait"), which no wait through the public API can prevent;
// tests/kernels/cuda/pipeline_commit_probe_test.cu reproduces it with no gpupipe code, and
// scripts/gpu-check.sh leaves this strategy's kernels out of synccheck. It is no protocol error:
// an unobserved arrival is a hazard only if it could land in an earlier phase, and the
// producer's arrival for round r follows producer_acquire's wait on consumed[s] phase r - 1,
// which completes only after every consumer waited on produced[s] phase r - 1 (and conversely
// for the consumers' arrivals). The ring's no-ABA argument for the acquire and wait verbs
// holds as it stands.
// Each warp commits converged and leaves with quit(); the reference count makes the last one
// to leave, necessarily after every arrival (every consumer waited for every produced phase),
// the one that invalidates the barriers.
#pragma once

#include <cooperative_groups.h>
#include <cuda/pipeline>

#include <cstdint>
#include <utility>

#include "kernels/cuda/detail/barrier_ring.cuh"
#include "kernels/cuda/detail/staging/common.cuh"

namespace gpupipe::kernels::cuda::detail {

using BlockPipeline = ::cuda::pipeline<::cuda::thread_scope_block>;

// StagingSmem::pipeline_state (16-byte aligned) holds a pipeline_shared_state<block, S> for every
// S in 1..kMaxStages.
template <int... kStagesMinusOne>
constexpr bool PipelineStatesFit(std::integer_sequence<int, kStagesMinusOne...>) {
  return ((sizeof(::cuda::pipeline_shared_state<::cuda::thread_scope_block,
                                                kStagesMinusOne + 1>) <=
               sizeof(StagingSmem::pipeline_state) &&
           alignof(::cuda::pipeline_shared_state<::cuda::thread_scope_block,
                                                 kStagesMinusOne + 1>) <= 16) &&
          ...);
}
static_assert(PipelineStatesFit(std::make_integer_sequence<int, kMaxStages>{}),
              "StagingSmem::pipeline_state holds a pipeline_shared_state of any stage count");

// make_pipeline over `state` (StagingSmem::pipeline_state) with `stages` (1..kMaxStages) stages.
// Block-collective. Returns a prvalue straight from make_pipeline (guaranteed copy elision: a
// moved-from pipeline would still quit() in its destructor). The storage holds the state of
// any stage count; make_pipeline initializes the one it is given, as it does a __shared__ one.
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
        next_(g.stages),
        producer_(threadIdx.x < kStagingWarp),
        pipe_(MakeBlockPipeline(cooperative_groups::this_thread_block(), smem.pipeline_state,
                                g.stages,
                                threadIdx.x < kStagingWarp ? ::cuda::pipeline_role::producer
                                                           : ::cuda::pipeline_role::consumer)) {}

  // Tiles first_tile + k * tile_stride (k < count) of d_src (16-byte aligned; every tile lies
  // inside the source). Calls consume(tile, s_tile, rank) on the consumer threads only; all
  // threads of the block call ForEach with the same arguments. Every call consumes all it
  // produces, so a kernel may call it again (one segment of a row after another); the pipeline
  // keeps its ring position across calls, and so does `next_`, the buffers' position.
  template <typename Consume>
  __device__ __forceinline__ void ForEach(const uint4* d_src, int64_t first_tile,
                                          int64_t tile_stride, int64_t count, Consume&& consume) {
    const int64_t tile_vecs = g_.tile_vecs();
    if (producer_) {
      const auto warp = cooperative_groups::tiled_partition<kStagingWarp>(
          cooperative_groups::this_thread_block());
      RingState st = next_;
      for (int64_t k = 0; k < count; ++k, st.Advance()) {
        pipe_.producer_acquire();  // the consumers released this stage's previous tile
        ::cuda::memcpy_async(warp, smem_.buffer + st.index() * tile_vecs,
                             d_src + (first_tile + k * tile_stride) * tile_vecs,
                             ::cuda::aligned_size_t<kStagingVecBytes>(g_.tile_bytes()), pipe_);
        // Commit from a converged warp: one batch per warp, not one per diverged lane group.
        __syncwarp();
        pipe_.producer_commit();
      }
      next_ = st;
    } else {
      const int rank = static_cast<int>(threadIdx.x) - kStagingWarp;
      RingState st = next_;
      for (int64_t k = 0; k < count; ++k, st.Advance()) {
        pipe_.consumer_wait();
        consume(first_tile + k * tile_stride,
                static_cast<const uint4*>(smem_.buffer + st.index() * tile_vecs), rank);
        pipe_.consumer_release();
      }
      next_ = st;
    }
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
  RingState next_;  // the buffer slot of this role's next tile (the pipeline's head or tail)
  bool producer_;
  BlockPipeline pipe_;
};

}  // namespace gpupipe::kernels::cuda::detail
