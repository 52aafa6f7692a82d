// Pieces shared by the two single-pass look-back scans of cumsum (cumsum.cu: LookbackKernel, a
// block a tile, every input type; cumsum_streamed.cu: the persistent streamed kernel, float32):
// the per-tile status records in the workspace, the warp-level scans, and the output type of
// each input type. Also the streamed kernel's launch, whose batching (rows per launch) and
// workspace reset stay with the rest of cumsum's dispatch in cumsum.cu.
#pragma once

#include <cuda/atomic>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cuda/detail/launch.cuh"
#include "kernels/cuda/detail/typed_items.cuh"
#include "kernels/cuda/tuning/scan_policy.h"

namespace gpupipe::kernels::cuda::detail {

// Look-back backoff while predecessors run (tuning/scan_policy.h).
inline constexpr unsigned kSpinMinNs = tuning::CumsumPolicy::kSpinMinNs;
inline constexpr unsigned kSpinMaxNs = tuning::CumsumPolicy::kSpinMaxNs;

inline constexpr uint32_t kFlagInvalid = 0;    // tile not yet published
inline constexpr uint32_t kFlagAggregate = 1;  // the tile's own total is published
inline constexpr uint32_t kFlagPrefix = 2;     // the inclusive prefix up to and including the tile

template <typename In> struct OutOf { using type = In; };
template <> struct OutOf<int32_t> { using type = long long; };

template <typename Out, typename Acc>
__device__ __forceinline__ Out FromAcc(Acc a) { return static_cast<Out>(a); }
template <>
__device__ __forceinline__ __half FromAcc<__half, float>(float a) { return __float2half_rn(a); }

inline constexpr unsigned kFullMask = 0xffffffffu;

// Inclusive scan over the lanes of a warp.
template <typename Acc>
__device__ __forceinline__ Acc WarpInclusiveScan(Acc x) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int offset = 1; offset < 32; offset <<= 1) {
    const Acc y = __shfl_up_sync(kFullMask, x, offset);
    if (lane >= offset) x += y;
  }
  return x;
}

template <typename Acc>
__device__ __forceinline__ Acc WarpSum(Acc x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(kFullMask, x, offset);
  return x;
}

// ---- a warp's span of a look-back tile ----------------------------------------------------------
//
// Both look-back kernels give each warp 32 * N * V consecutive elements, held warp-striped:
// lane l holds vectors l, l + 32, ... of V elements (16 bytes of the input type), v[k][i] being
// element (32 k + l) V + i of the span, so every warp-wide load and store instruction covers
// 512 contiguous bytes.

// The span's elements below `valid` read one by one (the ragged or unaligned case), 0 beyond.
template <typename In, int N, int V, typename Acc>
__device__ __forceinline__ void LoadSpanElements(const In* in, int64_t valid, Acc (&v)[N][V]) {
  using Bits = typename ItemTraits<In>::Bits;
  const int lane = threadIdx.x & 31;
  const auto* bits = reinterpret_cast<const Bits*>(in);
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int64_t at = static_cast<int64_t>(k * 32 + lane) * V;
#pragma unroll
    for (int i = 0; i < V; ++i) {
      v[k][i] = at + i < valid ? ItemTraits<In>::ToAcc(__ldcg(bits + at + i)) : Acc(0);
    }
  }
}

// Scans the span in place: each vector in registers, then the vectors' totals across the lanes.
// vec_base[k] is what precedes vector k of this lane within the span; returns the span's total
// (the same in every lane).
template <typename Acc, int N, int V>
__device__ __forceinline__ Acc ScanSpan(Acc (&v)[N][V], Acc (&vec_base)[N]) {
  const int lane = threadIdx.x & 31;
  Acc span_total = Acc(0);
#pragma unroll
  for (int k = 0; k < N; ++k) {
#pragma unroll
    for (int i = 1; i < V; ++i) v[k][i] += v[k][i - 1];
    const Acc inclusive = WarpInclusiveScan(v[k][V - 1]);
    Acc exclusive = __shfl_up_sync(kFullMask, inclusive, 1);
    if (lane == 0) exclusive = Acc(0);
    vec_base[k] = span_total + exclusive;
    span_total += __shfl_sync(kFullMask, inclusive, 31);
  }
  return span_total;
}

// Stores value(k, i) (already in Acc) for the span's elements below `valid`: 16-byte stores
// when the whole span is there and `out` is 16-byte aligned, element by element otherwise.
template <typename Out, int N, int V, typename Value>
__device__ __forceinline__ void StoreSpan(Out* out, int64_t valid, Value&& value) {
  const int lane = threadIdx.x & 31;
  if (valid >= 32 * N * V && Aligned16(out)) {
    constexpr int kChunks = V * sizeof(Out) / 16;  // 16-byte stores a vector
#pragma unroll
    for (int k = 0; k < N; ++k) {
      Out o[V];
#pragma unroll
      for (int i = 0; i < V; ++i) o[i] = FromAcc<Out>(value(k, i));
      uint4 raw[kChunks];
      memcpy(raw, o, sizeof(o));
      auto* dst = reinterpret_cast<uint4*>(out) + static_cast<int64_t>(k * 32 + lane) * kChunks;
#pragma unroll
      for (int c = 0; c < kChunks; ++c) dst[c] = raw[c];
    }
  } else {
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const int64_t at = static_cast<int64_t>(k * 32 + lane) * V;
#pragma unroll
      for (int i = 0; i < V; ++i) {
        if (at + i < valid) out[at + i] = FromAcc<Out>(value(k, i));
      }
    }
  }
}

// ---- look-back workspace ------------------------------------------------------------------------
//
// Layout: counter (16 bytes), then per tile either one 64-bit status word (4-byte accumulators:
// the value's bits above the flag, so one load sees a flag and the value it announces) or a
// 32-bit flag plus an aggregate and an inclusive value (8-byte accumulators, which do not fit a
// word with a flag: the value is written first and the flag released after it; two value slots,
// since a reader that saw "aggregate" must not read an inclusive value written meanwhile).
// cumsum.cu sizes the workspace for the larger layout, so it depends on the tile count only.

__host__ __device__ constexpr size_t Round16(size_t n) { return (n + 15) / 16 * 16; }

struct TileRecord {
  uint32_t flag;
  uint64_t bits;  // the value's bits (valid unless flag is kFlagInvalid)
};

// Tile status for 4-byte accumulators: one relaxed 64-bit store publishes flag and value at
// once (aligned 64-bit accesses are single-copy atomic), one relaxed load reads both.
template <typename Acc>
struct PackedStatus {
  static_assert(sizeof(Acc) == 4);
  unsigned long long* words;

  static __device__ __forceinline__ PackedStatus Make(char* base, int64_t /*tiles*/) {
    return {reinterpret_cast<unsigned long long*>(base + 16)};
  }
  __device__ __forceinline__ void Publish(int64_t tile, Acc value, uint32_t flag) const {
    uint32_t v;
    memcpy(&v, &value, 4);
    ::cuda::atomic_ref<unsigned long long, ::cuda::thread_scope_device>(words[tile])
        .store((static_cast<unsigned long long>(v) << 32) | flag, ::cuda::memory_order_relaxed);
  }
  __device__ __forceinline__ TileRecord Load(int64_t tile) const {
    const unsigned long long w =
        ::cuda::atomic_ref<unsigned long long, ::cuda::thread_scope_device>(words[tile])
            .load(::cuda::memory_order_relaxed);
    return {static_cast<uint32_t>(w), w >> 32};
  }
  static __device__ __forceinline__ Acc Value(uint64_t bits) {
    const auto v = static_cast<uint32_t>(bits);
    Acc a;
    memcpy(&a, &v, 4);
    return a;
  }
};

// Tile status for 8-byte accumulators: value first, then the flag with release; the reader
// loads the flag with acquire and only then the value it announces.
template <typename Acc>
struct SplitStatus {
  static_assert(sizeof(Acc) == 8);
  uint32_t* flags;
  Acc* aggregates;
  Acc* inclusives;

  static __device__ __forceinline__ SplitStatus Make(char* base, int64_t tiles) {
    const auto t = static_cast<size_t>(tiles);
    return {reinterpret_cast<uint32_t*>(base + 16),
            reinterpret_cast<Acc*>(base + 16 + Round16(4 * t)),
            reinterpret_cast<Acc*>(base + 16 + Round16(4 * t) + Round16(8 * t))};
  }
  __device__ __forceinline__ void Publish(int64_t tile, Acc value, uint32_t flag) const {
    (flag == kFlagPrefix ? inclusives : aggregates)[tile] = value;
    ::cuda::atomic_ref<uint32_t, ::cuda::thread_scope_device>(flags[tile])
        .store(flag, ::cuda::memory_order_release);
  }
  __device__ __forceinline__ TileRecord Load(int64_t tile) const {
    const uint32_t flag = ::cuda::atomic_ref<uint32_t, ::cuda::thread_scope_device>(flags[tile])
                              .load(::cuda::memory_order_acquire);
    uint64_t bits = 0;
    if (flag != kFlagInvalid) {
      const Acc v = __ldcg((flag == kFlagPrefix ? inclusives : aggregates) + tile);
      memcpy(&bits, &v, 8);
    }
    return {flag, bits};
  }
  static __device__ __forceinline__ Acc Value(uint64_t bits) {
    Acc a;
    memcpy(&a, &bits, 8);
    return a;
  }
};

template <typename Acc>
using TileStatus = std::conditional_t<sizeof(Acc) == 4, PackedStatus<Acc>, SplitStatus<Acc>>;

// ---- the streamed look-back (cumsum_streamed.cu) ------------------------------------------------

// Elements a tile of the streamed kernel (float32).
inline constexpr int64_t kStreamedTile = tuning::StreamedScanPolicy::kTile;

// Whether `config`'s device runs the streamed kernel: it needs bulk copies (sm_90) and its
// shared memory (more than sm_86, sm_89 and sm_120 give a block). `config` has its device
// capabilities resolved (Launcher::config()).
bool StreamedLookbackRuns(const LaunchConfig& config);

// Launches the streamed look-back scan over the rows [row0, row0 + tiles / tiles_per_row) of
// d_in (cols a row, kStreamedTile-element tiles): a persistent grid of at most one block an SM
// that takes its tiles from the counter at the head of d_workspace, which, like every tile's
// status record (tiles of them), the caller has reset (cumsum.init). d_carry as RowCumsum's.
// Never allocates or synchronizes; opts the kernel in to its shared memory once per process.
cudaError_t LaunchStreamedLookback(const float* d_in, float* d_out, int64_t row0, int64_t cols,
                                   int64_t tiles_per_row, int64_t tiles, float* d_carry,
                                   void* d_workspace, Launcher& launch);

}  // namespace gpupipe::kernels::cuda::detail
