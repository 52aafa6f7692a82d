// Tuning of RowTopk (kernels/cuda/topk.cu): block size, the loads a warp keeps in flight, and
// when rows split into segments. For sm_90; values only, the figures live in the bench/results
// section the provenance line names.
#pragma once

#include <cstdint>

namespace gpupipe::kernels::cuda::tuning {

// Provenance: bench/results/kernels-h200.md, "Tuning notes: topk".
struct TopkPolicy {
  // Threads per block of both kernels (the warp path runs a warp per item).
  static constexpr int kThreads = 256;
  // 16-byte loads in flight per lane of the warp path, for keys of up to 4 bytes: a lane's keys
  // of one round are tested against the warp's threshold in one vote, so a longer round also
  // means fewer votes. Types with 8-byte keys (float64) keep the shorter round: their register
  // lists are twice as large (initial value for them, not swept).
  static constexpr int kWarpLoadsInFlight = 4;
  static constexpr int kWarpLoadsInFlightWideKeys = 2;
  // Rows split into segments when there are fewer than this many items (rows) an SM: the warp
  // path, a warp per item, wants more of them than the radix path, a block per item. Initial
  // values, not swept.
  static constexpr int64_t kWarpItemsPerSm = 32;
  static constexpr int64_t kRadixItemsPerSm = 4;
  // Segments are at least this long (and at least k), so a segment's partial top k stays a
  // small part of its work.
  static constexpr int64_t kMinSegment = 4096;
};

}  // namespace gpupipe::kernels::cuda::tuning
