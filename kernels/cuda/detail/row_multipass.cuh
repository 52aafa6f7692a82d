// The row multipass ops (RowSoftmax; RowNormalize: l2normalize, standardize) share one
// skeleton: the same paths, kernels and dispatch (row_multipass_kernels.cuh,
// row_multipass_dispatch.cuh), with each op's math a small policy, an Op. Every such op
// reduces a row to statistics in one or more passes, then rewrites each element with a map
// the statistics define (softmax: y = exp(x - max) / sum; l2normalize: y = x / norm2;
// standardize: y = (x - mean) / std). This header states what an Op provides.
//
// An Op is a class template over the compute type C (ComputeOf<S> of the storage type S,
// named Op::Compute), trivially copyable, whose runtime state (as RowNormalizeKind) is one
// scalar, Op::Param (NoRowOpParam, one unused byte of kernel parameters, for an op without
// state); a __host__ __device__ constructor Op(Param) builds it. Kernels take the Param, not
// the Op, and build the Op themselves: a kernel parameter of class type is read through its
// address in parameter memory, and the compiler optimizes the register-resident kernels
// around that worse than around a scalar. Every map below is a callable y(C x) -> C, applied
// to each element after the prologue program.
//
// Host side, the dispatch's choices:
//   RowOpNames Names() const: the kernels' names in launches and descriptions;
//   static constexpr int kNarrowRowThreads: threads of a block-per-row block for rows of at
//     most kNarrowRowThreads * kResidentMidPerThread columns (kRowThreads: no narrower
//     blocks);
//   static constexpr int kSegmentPerThread: > 0 when few long rows split into segments that
//     their blocks hold in registers (kRowThreads * kSegmentPerThread columns each); 0 when
//     the op has no such path (then SegmentStat and MergeSegmentStats need not exist).
//
// One kernel, the row read once (register-resident, wide and shared-memory rows):
//   ResidentRow(C (&x)[K], int cols, in_row, first, const RowReducer<kBlock, C>& reduce)
//     -> map: the row's statistics from this thread's K values x (in_row(k): whether x[k]
//     belongs to the row; first(): the row's first value; reduce: over the row's threads,
//     all of which call the same reductions). It may rewrite x in place; the kernel then
//     writes map(x[k]).
//   SharedMemoryRow(SmemRow<S>& r, const S* p, const EwProgram& pre,
//                   const RowReducer<true, C>& reduce)
//     -> map: loads row p into r (r.Load, which may fold in the first statistic), makes any
//     further passes over r (Update, Visit), and returns the map the kernel writes r with.
//
// Two kernels, statistics then normalization (rows too long for the above, or short rows):
//   Stat: a segment's statistics, one workspace record (a 4-byte multiple, at most
//     kMaxStatBytes);
//   Stat Empty(), void Push(Stat&, C x), void PushVec(Stat&, const C (&x)[N]) (N consecutive
//     elements), Stat Merge(Stat, Stat): Empty is Merge's identity, Merge is associative up to
//     rounding and applied in a fixed order;
//   Summary Summarize(Stat row, int64_t cols): what the row's merged statistics come to (a
//     trivially copyable type: where a block shares a row, one thread computes it and the
//     others read it from shared memory);
//   Transform(Summary) -> map: computed by every thread of the row from the summary.
//   With kSegmentPerThread > 0 (register-resident segments):
//   Stat SegmentStat(const C (&x)[kSegmentPerThread], in_row, const RowReducer<true, C>&):
//     a segment's statistics, in every thread;
//   Stat MergeSegmentStats(const Stat* st, int64_t splits): called by the 32 lanes of one
//     warp, the row's statistics from its segments' st[0, splits).
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/detail/row_resident.cuh"

namespace gpupipe::kernels::cuda::detail {

// The Param of an op without runtime state.
struct NoRowOpParam {};

// Names of an op's kernels in launches and descriptions (static storage): <op>.rows for the
// one-kernel paths, <op>.stats and <op>.normalize for the two kernels of a batch.
struct RowOpNames {
  const char* rows;
  const char* stats;
  const char* normalize;
};

// The reductions a row-resident pass runs over the threads that hold one row; every thread of
// the row gets the result. Block rows: every thread of the block calls each reduction (the row
// loops are block-uniform); group rows: all 32 lanes of the warp. Reduce ends with a barrier
// that frees its scratch, so a pass may call it any number of times. First and Second leave
// that barrier out (RowAllReduceAlternating) and write two different scratch arrays: a pass
// that calls First, then Second, saves two barriers a row, and stays correct as long as an
// array is written again only after a barrier that follows its last read (the other array's
// reduction, or the barrier the kernel puts between rows).
template <bool kBlock, typename C>
struct RowReducer {
  int width;      // threads of the row; only group rows read it (lanes a row)
  C* scratch_a;   // kWarpSize values each, in shared memory
  C* scratch_b;

  template <typename F>
  __device__ __forceinline__ C Reduce(C v, F op, C identity) const {
    return RowAllReduce<kBlock>(v, op, identity, width, scratch_a);
  }
  template <typename F>
  __device__ __forceinline__ C First(C v, F op, C identity) const {
    return RowAllReduceAlternating<kBlock>(v, op, identity, width, scratch_a);
  }
  template <typename F>
  __device__ __forceinline__ C Second(C v, F op, C identity) const {
    return RowAllReduceAlternating<kBlock>(v, op, identity, width, scratch_b);
  }
};

}  // namespace gpupipe::kernels::cuda::detail
