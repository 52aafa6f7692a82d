// Pieces shared by the two convolution tile kernels (convolve.cu: any tap count, any float
// type; convolve_short.cu: up to kShortConvolveTaps taps, float32 and float64): the launch
// geometry, the padded shared-memory layout of a staged tile, its 16-byte shared moves, and the
// multiply-accumulate of one block of taps over a thread's register window.
//
// A thread computes R consecutive outputs o .. o + R - 1 of its tile. It keeps a window of 2R
// staged inputs in registers; per block of R taps it loads the next R inputs and does R^2
// FMAs, so shared-memory traffic is 1/R of the FMAs. Every output sums its products in tap
// order (correlation order k = 0 .. M - 1, i.e. taps M - 1 .. 0), block after block, whatever
// kernel or tile computes it: that is what makes a row computed in several windows equal one
// call bit for bit.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/common/convolve_geometry.h"
#include "kernels/cuda/detail/launch.cuh"
#include "kernels/cuda/tuning/convolve_policy.h"

namespace gpupipe::kernels::cuda::detail {

// Shape of one launch: `rows` windows of identical geometry, rows apart by the strides.
struct ConvGeometry {
  int64_t rows;
  int64_t in_row_stride;   // elements between consecutive rows of d_in
  int64_t out_row_stride;  // elements between consecutive rows of d_out
  ConvolveWindow window;
  int64_t tiles_per_row;  // tiles of each kernel's tile size (set by its launcher)
  int32_t taps;           // M
};

// The geometry of `rows` whole rows of `cols` elements convolved with `num_taps` taps in
// `mode` (RowConvolve's), tiles a row left to the launcher; false for invalid shapes.
inline bool RowGeometry(int64_t rows, int64_t cols, int32_t num_taps, ConvolveMode mode,
                        ConvGeometry* g) {
  if (rows < 1 || cols < 1 || num_taps < 1 || num_taps > kMaxConvolveTaps) return false;
  if (mode != ConvolveMode::kFull && mode != ConvolveMode::kSame &&
      mode != ConvolveMode::kValid) {
    return false;
  }
  g->rows = rows;
  g->in_row_stride = cols;
  g->window.row_length = cols;
  g->window.in_begin = 0;
  g->window.in_count = cols;
  ConvolveOutputRange(cols, num_taps, mode, &g->window.out_begin, &g->window.out_count);
  g->out_row_stride = g->window.out_count;
  g->tiles_per_row = 0;  // set by the launcher: the tile depends on the kernel and type
  g->taps = num_taps;
  return true;
}

// The padded layout of a staged tile of compute type Acc, kR outputs a thread, kThreads
// threads, for up to kMaxTaps taps: logical entry i lives at Phys(i) = i + kPad * (i / kR),
// i.e. every run of kR entries (one thread's outputs, or one tap block of its window) is
// followed by 16 bytes of padding. A thread's window loads are 16-byte loads at a stride of
// kR + kPad entries between lanes; with kR * sizeof(Acc) / 16 even, that stride is an odd
// number of 16-byte units, so the 8 lanes of each quarter-warp phase hit 8 distinct 16-byte
// bank groups: conflict-free. (Unpadded, the stride of kR entries puts 2 or more lanes on each
// bank group, and bank conflicts, not FMAs, become the limit.)
template <typename Acc, int kR_, int kThreads, int kMaxTaps>
struct ConvLayout {
  static constexpr int kR = kR_;
  static constexpr int kPad = 16 / static_cast<int>(sizeof(Acc));  // 16 bytes
  static constexpr int kRun = kR + kPad;
  static constexpr int kTile = kThreads * kR;
  static_assert((kR & (kR - 1)) == 0, "outputs per thread is a power of two");
  static_assert((kR * sizeof(Acc) / 16) % 2 == 0, "odd 16-byte stride between lanes");
  static_assert(kMaxTaps % kR == 0, "taps are processed in whole blocks");
  static_assert(kThreads % kR == 0, "the output loop steps whole runs");
  // Logical entries: a tile plus the last tap block's reads (bounded where the kernels read).
  static constexpr int kLogical = kTile + kMaxTaps;
  static constexpr int kPhysical = kLogical / kR * kRun;
  // Unsigned arithmetic: the entries are never negative, and signed division costs fix-ups in
  // the staging loops.
  __device__ static int Phys(int i) {
    const unsigned u = static_cast<unsigned>(i);
    return static_cast<int>(u + (u / kR) * kPad);
  }
};

// 16-byte shared-memory moves of N (a multiple of 16 bytes) compute-type values.
__device__ __forceinline__ void LoadShared16(const float* p, float* d) {
  const float4 v = *reinterpret_cast<const float4*>(p);
  d[0] = v.x;
  d[1] = v.y;
  d[2] = v.z;
  d[3] = v.w;
}
__device__ __forceinline__ void LoadShared16(const double* p, double* d) {
  const double2 v = *reinterpret_cast<const double2*>(p);
  d[0] = v.x;
  d[1] = v.y;
}
__device__ __forceinline__ void StoreShared16(float* p, const float* s) {
  *reinterpret_cast<float4*>(p) = make_float4(s[0], s[1], s[2], s[3]);
}
__device__ __forceinline__ void StoreShared16(double* p, const double* s) {
  *reinterpret_cast<double2*>(p) = make_double2(s[0], s[1]);
}
template <int N, typename Acc>
__device__ __forceinline__ void LoadSharedRun(const Acc* p, Acc* d) {
  constexpr int kV = 16 / static_cast<int>(sizeof(Acc));
#pragma unroll
  for (int i = 0; i < N; i += kV) LoadShared16(p + i, d + i);
}
template <int N, typename Acc>
__device__ __forceinline__ void StoreSharedRun(Acc* p, const Acc* s) {
  constexpr int kV = 16 / static_cast<int>(sizeof(Acc));
#pragma unroll
  for (int i = 0; i < N; i += kV) StoreShared16(p + i, s + i);
}

// One block of kR taps: acc[r] += tap(kk) * win[r + kk] for kk < `count` (kR: a full block;
// fewer: the guarded last block, whose missing taps are skipped rather than taken as zero, as
// a zero tap times an infinite input would be NaN). tap(kk) returns the block's kk-th tap in
// correlation order; with compile-time indices into kernel parameters it becomes an FFMA
// constant operand.
template <int kR, bool kGuarded, typename Acc, typename TapFn>
__device__ __forceinline__ void TapBlockFma(Acc (&acc)[kR], const Acc (&win)[2 * kR], int count,
                                            TapFn tap) {
#pragma unroll
  for (int kk = 0; kk < kR; ++kk) {
    if (!kGuarded || kk < count) {
#pragma unroll
      for (int r = 0; r < kR; ++r) acc[r] = fma(tap(kk), win[r + kk], acc[r]);
    }
  }
}

// The first block of right-aligned taps (the short-tap kernel's: its tap count rounded up to
// whole blocks, the missing taps in front): acc[r] += tap(kk) * win[r + kk] for kk = lead ..
// kR - 1, in that order. The block is entered at kk = lead through one computed jump (a switch
// whose cases fall through), so a tap count that is not a multiple of kR costs no guard a tap
// and no second copy of the block.
template <int kR, typename Acc, typename TapFn>
__device__ __forceinline__ void LeadBlockFma(Acc (&acc)[kR], const Acc (&win)[2 * kR], int lead,
                                             TapFn tap) {
  static_assert(kR <= 32, "a case for each tap of the block");
  __builtin_assume(lead >= 0 && lead < kR);
  const auto taps_from = [&](auto kk_constant) {
    constexpr int kk = decltype(kk_constant)::value;
    if constexpr (kk < kR) {
#pragma unroll
      for (int r = 0; r < kR; ++r) acc[r] = fma(tap(kk), win[r + kk], acc[r]);
    }
  };
  using std::integral_constant;
  switch (lead) {
    case 0: taps_from(integral_constant<int, 0>{}); [[fallthrough]];
    case 1: taps_from(integral_constant<int, 1>{}); [[fallthrough]];
    case 2: taps_from(integral_constant<int, 2>{}); [[fallthrough]];
    case 3: taps_from(integral_constant<int, 3>{}); [[fallthrough]];
    case 4: taps_from(integral_constant<int, 4>{}); [[fallthrough]];
    case 5: taps_from(integral_constant<int, 5>{}); [[fallthrough]];
    case 6: taps_from(integral_constant<int, 6>{}); [[fallthrough]];
    case 7: taps_from(integral_constant<int, 7>{}); [[fallthrough]];
    case 8: taps_from(integral_constant<int, 8>{}); [[fallthrough]];
    case 9: taps_from(integral_constant<int, 9>{}); [[fallthrough]];
    case 10: taps_from(integral_constant<int, 10>{}); [[fallthrough]];
    case 11: taps_from(integral_constant<int, 11>{}); [[fallthrough]];
    case 12: taps_from(integral_constant<int, 12>{}); [[fallthrough]];
    case 13: taps_from(integral_constant<int, 13>{}); [[fallthrough]];
    case 14: taps_from(integral_constant<int, 14>{}); [[fallthrough]];
    case 15: taps_from(integral_constant<int, 15>{}); [[fallthrough]];
    case 16: taps_from(integral_constant<int, 16>{}); [[fallthrough]];
    case 17: taps_from(integral_constant<int, 17>{}); [[fallthrough]];
    case 18: taps_from(integral_constant<int, 18>{}); [[fallthrough]];
    case 19: taps_from(integral_constant<int, 19>{}); [[fallthrough]];
    case 20: taps_from(integral_constant<int, 20>{}); [[fallthrough]];
    case 21: taps_from(integral_constant<int, 21>{}); [[fallthrough]];
    case 22: taps_from(integral_constant<int, 22>{}); [[fallthrough]];
    case 23: taps_from(integral_constant<int, 23>{}); [[fallthrough]];
    case 24: taps_from(integral_constant<int, 24>{}); [[fallthrough]];
    case 25: taps_from(integral_constant<int, 25>{}); [[fallthrough]];
    case 26: taps_from(integral_constant<int, 26>{}); [[fallthrough]];
    case 27: taps_from(integral_constant<int, 27>{}); [[fallthrough]];
    case 28: taps_from(integral_constant<int, 28>{}); [[fallthrough]];
    case 29: taps_from(integral_constant<int, 29>{}); [[fallthrough]];
    case 30: taps_from(integral_constant<int, 30>{}); [[fallthrough]];
    case 31: taps_from(integral_constant<int, 31>{}); [[fallthrough]];
    default: break;
  }
}

// Tap counts the short-tap kernel takes (convolve_short.cu); longer ones use the general tile
// kernel. Its taps sit in the kernel parameters in correlation order, so every FFMA reads its
// tap as a constant operand: no shared-memory loads or registers for taps.
inline constexpr int kShortConvolveTaps = tuning::ConvolvePolicy::kShortMaxTaps;

// How the short-tap kernel lays a tap count that is not a whole number of blocks of kR taps
// out in its blocks. Each output sums its products in tap order either way, so the two give
// the same bits; they differ in the instructions around the FMAs.
//  - kGuardedLast: the blocks from the first tap on, the partial block last, each of its taps
//    behind a guard.
//  - kLeadFirst: right-aligned, the partial block first, entered at its first real tap through
//    one computed jump (LeadBlockFma): no guard a tap, but a second window load up front.
enum class TapArrangement { kGuardedLast, kLeadFirst };

// The arrangement the short-tap kernel takes for `taps` taps of T (float or double): lead-first
// where the number of taps its blocks miss is in ConvolvePolicy::ShortTile<T>::kLeadFirstLeads.
template <typename T>
TapArrangement ShortTapArrangement(int taps);
extern template TapArrangement ShortTapArrangement<float>(int);
extern template TapArrangement ShortTapArrangement<double>(int);

// Launches (or describes) the short-tap kernel for T = float or double, 1 <= g.taps <=
// kShortConvolveTaps, on `launch`; `taps` (host, g.taps values in np.convolve order) may be
// null when describing. Sets nothing in `g` the caller sees (the tile count is its own).
template <typename T>
cudaError_t LaunchShortTapConvolve(const T* d_in, T* d_out, ConvGeometry g, const double* taps,
                                   Launcher& launch);
extern template cudaError_t LaunchShortTapConvolve<float>(const float*, float*, ConvGeometry,
                                                          const double*, Launcher&);
extern template cudaError_t LaunchShortTapConvolve<double>(const double*, double*,
                                                           ConvGeometry, const double*,
                                                           Launcher&);

}  // namespace gpupipe::kernels::cuda::detail
