// Staging strategies where each thread stages only the vectors it consumes itself (see
// common.cuh), so no thread ever waits for another's copy and no block barrier is needed:
//  - Staging::kPipelineThread: the thread-scope unified cuda::pipeline (cuda::make_pipeline()),
//    waiting with cuda::pipeline_consumer_wait_prior<N>;
//  - Staging::kPrimitives: the primitives API, __pipeline_memcpy_async / __pipeline_commit /
//    __pipeline_wait_prior.
// Both are cp.async groups underneath. Up to `stages` tiles are in flight per thread; the
// wait lets the `in_flight - 1` newest batches stay pending. A thread overwrites a buffer slot
// only with its own vectors, after it has consumed them, so reuse needs no synchronization.
//
// Barrier protocol: none. No mbarrier is involved (pipeline<thread_scope_thread> is
// cp.async.commit_group / cp.async.wait_group of the calling thread, like the primitives), so
// there is no arrival for synccheck to pair with a wait and no other thread's copy to wait for.
// Per thread: tile k's batch is committed in order; WaitPrior(fetched - k - 1) completes every
// batch up to tile k's (fetched <= k + S, so at most S - 1 <= 7 stay pending); the slot of tile
// k is refilled (tile k + S) only after this thread's reads of tile k, in program order, and
// only with this thread's own vectors, so no other thread reads what it overwrites.
#pragma once

#include <cuda/pipeline>
#include <cuda_pipeline_primitives.h>

#include <cstdint>

#include "kernels/cuda/detail/staging/common.cuh"

namespace gpupipe::kernels::cuda::detail {

using ThreadPipeline = ::cuda::pipeline<::cuda::thread_scope_thread>;

// pipeline_consumer_wait_prior<N> with N known only at run time (0 <= prior < kMaxStages).
__device__ __forceinline__ void ConsumerWaitPrior(ThreadPipeline& pipe, int64_t prior) {
  switch (prior) {
    case 0: ::cuda::pipeline_consumer_wait_prior<0>(pipe); break;
    case 1: ::cuda::pipeline_consumer_wait_prior<1>(pipe); break;
    case 2: ::cuda::pipeline_consumer_wait_prior<2>(pipe); break;
    case 3: ::cuda::pipeline_consumer_wait_prior<3>(pipe); break;
    case 4: ::cuda::pipeline_consumer_wait_prior<4>(pipe); break;
    case 5: ::cuda::pipeline_consumer_wait_prior<5>(pipe); break;
    case 6: ::cuda::pipeline_consumer_wait_prior<6>(pipe); break;
    default: ::cuda::pipeline_consumer_wait_prior<7>(pipe); break;
  }
}

// Mechanism: how one thread copies one vector, commits a batch and waits for all but the
// newest `prior` batches.
struct ThreadPipelineOps {
  ThreadPipeline pipe = ::cuda::make_pipeline();
  __device__ void Acquire() { pipe.producer_acquire(); }
  __device__ void Copy(uint4* dst, const uint4* src) {
    ::cuda::memcpy_async(dst, src, ::cuda::aligned_size_t<kStagingVecBytes>(kStagingVecBytes),
                         pipe);
  }
  __device__ void Commit() { pipe.producer_commit(); }
  __device__ void WaitPrior(int64_t prior) { ConsumerWaitPrior(pipe, prior); }
  __device__ void Release() { pipe.consumer_release(); }
};

struct PrimitivesOps {
  __device__ void Acquire() {}
  __device__ void Copy(uint4* dst, const uint4* src) {
    __pipeline_memcpy_async(dst, src, kStagingVecBytes);
  }
  __device__ void Commit() { __pipeline_commit(); }
  __device__ void WaitPrior(int64_t prior) { __pipeline_wait_prior(static_cast<size_t>(prior)); }
  __device__ void Release() {}
};

template <typename Ops>
class ThreadLocalStager {
 public:
  __device__ ThreadLocalStager(StagingSmem& smem, const TileGeometry& g) : smem_(smem), g_(g) {}

  // As PartitionedPipelineStager::ForEach; every thread is a consumer, rank = threadIdx.x.
  // Each call waits for all it commits, so calls are independent.
  template <typename Consume>
  __device__ __forceinline__ void ForEach(const uint4* d_src, int64_t first_tile,
                                          int64_t tile_stride, int64_t count, Consume&& consume) {
    const int64_t tile_vecs = g_.tile_vecs();
    const int rank = static_cast<int>(threadIdx.x);
    int64_t fetched = 0;
    auto produce = [&]() {
      const int64_t slot = (fetched % g_.stages) * tile_vecs;
      const uint4* src = d_src + (first_tile + fetched * tile_stride) * tile_vecs;
      ops_.Acquire();
      for (int u = 0; u < g_.vecs_per_rank; ++u) {
        const int64_t v = rank + static_cast<int64_t>(u) * g_.ranks;
        ops_.Copy(smem_.buffer + slot + v, src + v);
      }
      // Commits batch per converged warp (the CUDA guide's warp entanglement): re-converge
      // first so the thread's view of the batch sequence matches the warp's.
      __syncwarp();
      ops_.Commit();
      ++fetched;
    };

    // `count` is block-uniform, so these loops never diverge within a warp.
    while (fetched < count && fetched < g_.stages) produce();
    for (int64_t k = 0; k < count; ++k) {
      // Batches committed after tile k's may stay in flight.
      ops_.WaitPrior(fetched - k - 1);
      consume(first_tile + k * tile_stride,
              static_cast<const uint4*>(smem_.buffer + (k % g_.stages) * tile_vecs), rank);
      ops_.Release();
      if (fetched < count) produce();
    }
  }

  __device__ __forceinline__ void Quit() {}  // nothing outstanding after ForEach

 private:
  StagingSmem& smem_;
  TileGeometry g_;
  Ops ops_;
};

using ThreadPipelineStager = ThreadLocalStager<ThreadPipelineOps>;
using PrimitivesStager = ThreadLocalStager<PrimitivesOps>;

}  // namespace gpupipe::kernels::cuda::detail
