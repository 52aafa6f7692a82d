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

// Tap counts the short-tap kernel takes (convolve_short.cu); longer ones use the general tile
// kernel. Its taps sit in the kernel parameters in correlation order, so every FFMA reads its
// tap as a constant operand: no shared-memory loads or registers for taps.
inline constexpr int kShortConvolveTaps = tuning::ConvolvePolicy::kShortMaxTaps;

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
