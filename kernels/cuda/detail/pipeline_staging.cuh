// Staged-tile loops: a kernel streams whole tiles of 16-byte vectors global -> shared through
// one of the staging strategies (kernels::cuda::Staging other than kDirect) and consumes each
// from shared memory. Dtype-agnostic: tiles are bytes; the consumer reinterprets its vectors.
//
// Usage, in a kernel of `threads` threads (a multiple of 32, at most 256):
//   __shared__ detail::StagingSmem smem;
//   const detail::TileGeometry g = detail::StagedGeometry(S, threads, stages);
//   detail::StagerFor<S> stager(smem, g);   // block-collective prologue (shared memory only)
//   detail::WaitForPrimaryGrids();          // PDL: before the first global access
//   stager.ForEach(d_src, first_tile, tile_stride, count,
//                  [&](int64_t tile, const uint4* s_tile, int rank) {
//                    // vectors s_tile[rank + u * g.ranks], u < g.vecs_per_rank: global vectors
//                    // tile * g.tile_vecs() + rank + u * g.ranks of d_src
//                  });
// Requirements: every thread of the block calls ForEach once, with the same arguments; d_src is
// 16-byte aligned and tiles first_tile + k * tile_stride (k < count) lie inside the source (the
// caller reads its ragged end with plain loads); the callback reads only the vectors of its rank
// (the thread-scope strategies stage nothing else for it) and writes no shared memory. Stages
// are a run-time value in every strategy, so each strategy is one kernel instantiation.
#pragma once

#include "kernels/cuda/detail/staging/bulk.cuh"
#include "kernels/cuda/detail/staging/common.cuh"
#include "kernels/cuda/detail/staging/pipeline_partitioned.cuh"
#include "kernels/cuda/detail/staging/pipeline_thread.cuh"

namespace gpupipe::kernels::cuda::detail {

template <Staging S>
struct StagerSelect;
template <>
struct StagerSelect<Staging::kPipeline> {
  using type = PartitionedPipelineStager;
};
template <>
struct StagerSelect<Staging::kPipelineThread> {
  using type = ThreadPipelineStager;
};
template <>
struct StagerSelect<Staging::kPrimitives> {
  using type = PrimitivesStager;
};
template <>
struct StagerSelect<Staging::kBulk> {
  using type = BulkStager;
};

template <Staging S>
using StagerFor = typename StagerSelect<S>::type;

}  // namespace gpupipe::kernels::cuda::detail
