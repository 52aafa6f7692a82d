// RowConvolve / RowConvolveWindow: entry points, dispatch and the general tile kernel, which
// takes every tap count and float16; float32 and float64 with up to kShortConvolveTaps taps go
// to the short-tap kernel of convolve_short.cu, which shares this kernel's tile layout and
// FMA blocks (detail/convolve_tile.cuh).
//
// Work item: a tile of ConvTuning::kThreads * kPerThread consecutive outputs of one row (one
// window). The block stages the tile's input plus the (M - 1)-element halo in shared memory in
// the compute type (16-byte loads where the address allows, scalar at the edges; zeros outside
// the row and past the window), the taps reversed in shared memory, and each thread computes
// R = kPerThread consecutive outputs with a sliding register window over the staged input: per
// block of R taps a thread loads R new inputs and R taps (16-byte shared loads, the taps a
// warp-wide broadcast) for R^2 FMAs. At 63 taps the kernel is bound by FMA issue (2^28 outputs
// x 63 FMAs), so everything else is kept to a few percent of the instructions, and a block
// issues the next tile's global loads (into registers) before computing the current tile, so
// its DRAM latency hides behind its own FMAs.
//
// Shared-memory layout of the staged input: detail::ConvLayout (padded, bank-conflict-free).
//
// Outputs go back through shared memory so global stores are coalesced whatever d_out's
// alignment.
//
// Every output sums its products in tap order j = M - 1 .. 0 independently of the tile's
// position, so a row computed in several windows equals one call bit for bit.
// PDL: the taps (kernel parameters) are staged before the grid dependency wait; every global
// access comes after it; the dependent is triggered after the block's last store.
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/convolve.h"
#include "kernels/cuda/detail/convolve_tile.cuh"
#include "kernels/cuda/detail/launch.cuh"
#include "kernels/cuda/detail/row_access.cuh"
#include "kernels/cuda/detail/typed_access.cuh"
#include "kernels/cuda/tuning/convolve_policy.h"

namespace gpupipe::kernels::cuda {
namespace {

// Tile shape per compute type: threads per block, consecutive outputs per thread (R), and
// blocks per multiprocessor (the grid: all resident at once, which __launch_bounds__
// guarantees; each block loops over tiles with the next tile's loads in flight). The values
// and their reasons: tuning/convolve_policy.h.
template <typename Acc>
using ConvTuning = tuning::ConvolvePolicy::Tile<Acc>;

template <typename T>
struct ConvTraits;
template <>
struct ConvTraits<float> {
  using Acc = float;
  __device__ static float ToAcc(float x) { return x; }
  __device__ static float FromAcc(float x) { return x; }
};
template <>
struct ConvTraits<__half> {
  using Acc = float;
  __device__ static float ToAcc(__half x) { return __half2float(x); }
  __device__ static __half FromAcc(float x) { return __float2half_rn(x); }
};
template <>
struct ConvTraits<double> {
  using Acc = double;
  __device__ static double ToAcc(double x) { return x; }
  __device__ static double FromAcc(double x) { return x; }
};

template <typename T>
constexpr int TileOf() {
  using Tu = ConvTuning<typename ConvTraits<T>::Acc>;
  return Tu::kThreads * Tu::kPerThread;
}

using detail::ConvGeometry;
using detail::RowGeometry;
using detail::LoadSharedRun;
using detail::StoreSharedRun;
using detail::TapBlockFma;

template <typename Acc>
using ConvSmem = detail::ConvLayout<Acc, ConvTuning<Acc>::kPerThread, ConvTuning<Acc>::kThreads,
                                    kMaxConvolveTaps>;

// Taps by value in the kernel parameters (4 KiB as float, 8 KiB as double; CUDA 12.1+ allows
// 32 KiB of parameters), so a job needs no device copy of its taps.
template <typename Acc>
struct ConvTaps {
  Acc v[kMaxConvolveTaps];
};

// The input of one tile: src[0 .. count) (element-aligned, any 16-byte alignment) goes to the
// logical entries first .. first + count - 1 as a scalar head up to the first 16-byte boundary
// (< kV elements), `vecs` 16-byte vectors and a scalar tail (< kV elements); logical entries
// [0, first) and [first + count, span) are zero (outside the row or the window).
template <typename T>
struct TileInput {
  const T* src;
  int count;
  int first;
  int span;
  int head;
  int vecs;
};

// The registers a thread fills for the next tile while the block computes the current one:
// its share of the head, of the first kPrefetchVecs * kThreads vectors, and of the tail. Only
// tap counts above ~64 leave vectors to load when the tile is staged.
template <typename T>
struct TilePrefetch {
  using Acc = typename ConvTraits<T>::Acc;
  static constexpr int kV = detail::kVecElems<T>;
  static constexpr int kThreads = ConvTuning<Acc>::kThreads;
  static constexpr int kVecs =
      (TileOf<T>() + 64 + kV + kV * kThreads - 1) / (kV * kThreads);
  T head;
  T tail;
  detail::Vec16<T> v[kVecs];
};

// Issues this thread's loads of `in` (results are first used by StageTile).
template <typename T>
__device__ __forceinline__ void PrefetchTile(const TileInput<T>& in, TilePrefetch<T>& pre) {
  using P = TilePrefetch<T>;
  const int t = threadIdx.x;
  if (t < in.head) pre.head = detail::LoadCg(in.src + t);
  const T* body = in.src + in.head;
#pragma unroll
  for (int j = 0; j < P::kVecs; ++j) {
    const int v = t + j * P::kThreads;
    if (v < in.vecs) pre.v[j] = detail::LoadVec16Cg(body + v * P::kV);
  }
  const int tail_at = in.head + in.vecs * P::kV + t;  // the tail has < kV <= kThreads elements
  if (tail_at < in.count) pre.tail = detail::LoadCg(in.src + tail_at);
}

// Writes `in` to the padded shared layout in the compute type, from the prefetched registers
// plus any vectors past them, and zeroes the rest of the span; cooperative over the block.
template <typename T, typename Acc>
__device__ __forceinline__ void StageTile(const TileInput<T>& in, const TilePrefetch<T>& pre,
                                          Acc* s_x) {
  using L = ConvSmem<Acc>;
  using P = TilePrefetch<T>;
  constexpr int kV = P::kV;
  const int t = threadIdx.x;
  for (int i = t; i < in.first; i += P::kThreads) s_x[L::Phys(i)] = Acc(0);
  for (int i = in.first + in.count + t; i < in.span; i += P::kThreads) s_x[L::Phys(i)] = Acc(0);
  if (t < in.head) s_x[L::Phys(in.first + t)] = ConvTraits<T>::ToAcc(pre.head);
  const int body_first = in.first + in.head;
#pragma unroll
  for (int j = 0; j < P::kVecs; ++j) {
    const int v = t + j * P::kThreads;
    if (v < in.vecs) {
#pragma unroll
      for (int e = 0; e < kV; ++e) {
        s_x[L::Phys(body_first + v * kV + e)] = ConvTraits<T>::ToAcc(pre.v[j].v[e]);
      }
    }
  }
  const T* body = in.src + in.head;
  for (int v = t + P::kVecs * P::kThreads; v < in.vecs; v += P::kThreads) {
    const detail::Vec16<T> x = detail::LoadVec16Cg(body + v * kV);
#pragma unroll
    for (int e = 0; e < kV; ++e) s_x[L::Phys(body_first + v * kV + e)] = ConvTraits<T>::ToAcc(x.v[e]);
  }
  const int tail_at = in.head + in.vecs * kV + t;
  if (tail_at < in.count) s_x[L::Phys(in.first + tail_at)] = ConvTraits<T>::ToAcc(pre.tail);
}

template <typename T>
__global__ void __launch_bounds__(ConvTuning<typename ConvTraits<T>::Acc>::kThreads,
                                  ConvTuning<typename ConvTraits<T>::Acc>::kBlocksPerSm)
    ConvolveTilesKernel(const T* d_in, T* d_out, ConvGeometry g,
                        ConvTaps<typename ConvTraits<T>::Acc> taps) {
  using Acc = typename ConvTraits<T>::Acc;
  using L = ConvSmem<Acc>;
  constexpr int kR = L::kR;
  constexpr int kThreads = ConvTuning<Acc>::kThreads;
  constexpr int kTile = kThreads * kR;
  // s_x[Phys(t)] holds input x[x0 + t] of the current tile.
  __shared__ alignas(16) Acc s_x[L::kPhysical];
  // s_g[k] = taps[M - 1 - k]: correlation order, so output o reads x[o + k].
  __shared__ alignas(16) Acc s_g[kMaxConvolveTaps];

  const int m = g.taps;
  const int full_blocks = m / kR;       // tap blocks without a tail
  const int tail = m - full_blocks * kR;  // 0..kR-1 taps of a guarded last block
  const int padded = (full_blocks + (tail > 0 ? 1 : 0)) * kR;
  for (int k = threadIdx.x; k < padded; k += kThreads) {
    s_g[k] = k < m ? taps.v[m - 1 - k] : Acc(0);
  }
  detail::WaitForPrimaryGrids();

  const ConvolveWindow& w = g.window;
  const int64_t win_lo = w.in_begin;
  const int64_t win_hi = w.in_begin + w.in_count;
  const int64_t tiles = g.rows * g.tiles_per_row;
  // This thread's outputs are logical entries o .. o + kR - 1, o = threadIdx.x * kR: one run.
  const Acc* xs = s_x + threadIdx.x * L::kRun;
  // The input span of a tile: its outputs read x0 .. x0 + kTile + m - 2 (x0 = the row index of
  // logical entry 0); the rest of the span, up to the end of the last tap block, is zero.
  auto input_of = [&](int64_t tile) {
    const int64_t row = tile / g.tiles_per_row;
    const int64_t out0 = (tile - row * g.tiles_per_row) * kTile;  // offset in the window
    const int64_t x0 = w.out_begin + out0 - (m - 1);
    const int needed = kTile + m - 1;
    const int64_t lo = max(x0, win_lo);
    const int64_t hi = min(x0 + needed, win_hi);
    TileInput<T> in;
    in.span = kTile + padded;
    in.count = lo < hi ? static_cast<int>(hi - lo) : 0;
    in.first = lo < hi ? static_cast<int>(lo - x0) : 0;
    // No load is issued for an empty span, so src may be formed from a null d_in.
    in.src = lo < hi ? d_in + row * g.in_row_stride + (lo - win_lo) : d_in;
    in.head = static_cast<int>(detail::HeadToAlign16(in.src, in.count));
    in.vecs = (in.count - in.head) / detail::kVecElems<T>;
    return in;
  };
  // Software pipeline over this block's tiles: the next tile's loads are in flight while the
  // current one computes, so a block never waits for DRAM with its FMAs idle (blocks that all
  // stage, then all compute, leave the memory and the FMA units each idle half the time).
  TilePrefetch<T> pre;
  TileInput<T> in{};
  if (blockIdx.x < tiles) {
    in = input_of(blockIdx.x);
    PrefetchTile(in, pre);
  }
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t row = tile / g.tiles_per_row;
    const int64_t out0 = (tile - row * g.tiles_per_row) * kTile;  // offset in the window
    StageTile(in, pre, s_x);
    __syncthreads();
    if (tile + gridDim.x < tiles) {
      in = input_of(tile + gridDim.x);
      PrefetchTile(in, pre);
    }

    Acc acc[kR];
    Acc win[2 * kR];  // logical entries o + k0 .. o + k0 + 2 kR - 1
#pragma unroll
    for (int r = 0; r < kR; ++r) acc[r] = Acc(0);
    LoadSharedRun<kR>(xs, win);
    // Largest logical entry read: o + k0 + 2 kR - 1 <= (kTile - kR) + (padded - kR) + 2 kR - 1
    //                           = kTile + padded - 1 < span <= L::kLogical.
    // Unrolled by two so the window's shift becomes register renaming rather than moves.
#pragma unroll 2
    for (int kb = 0; kb < full_blocks; ++kb) {
      Acc gk[kR];
      LoadSharedRun<kR>(xs + (kb + 1) * L::kRun, win + kR);
      LoadSharedRun<kR>(s_g + kb * kR, gk);
      TapBlockFma<kR, false>(acc, win, kR, [&](int kk) { return gk[kk]; });
#pragma unroll
      for (int r = 0; r < kR; ++r) win[r] = win[kR + r];
    }
    if (tail > 0) {
      Acc gk[kR];
      LoadSharedRun<kR>(xs + (full_blocks + 1) * L::kRun, win + kR);
      LoadSharedRun<kR>(s_g + full_blocks * kR, gk);
      TapBlockFma<kR, true>(acc, win, tail, [&](int kk) { return gk[kk]; });
    }
    __syncthreads();  // every thread is done reading s_x
    StoreSharedRun<kR>(s_x + threadIdx.x * L::kRun, acc);
    __syncthreads();
    // Output i = threadIdx.x + j * kThreads sits at Phys(threadIdx.x) + j * kStep: kThreads is
    // a multiple of kR, so the layout's padding advances by a constant per step.
    constexpr int kStep = kThreads / kR * L::kRun;
    const Acc* src = s_x + L::Phys(threadIdx.x);
    T* dst = d_out + row * g.out_row_stride + out0 + threadIdx.x;
    const int64_t valid = min(static_cast<int64_t>(kTile), w.out_count - out0);
    if (valid == kTile) {
#pragma unroll
      for (int j = 0; j < kR; ++j) dst[j * kThreads] = ConvTraits<T>::FromAcc(src[j * kStep]);
    } else {
      for (int j = 0; threadIdx.x + j * kThreads < valid; ++j) {
        dst[j * kThreads] = ConvTraits<T>::FromAcc(src[j * kStep]);
      }
    }
    __syncthreads();  // s_x is restaged by the next tile
  }
  detail::AllowDependentGrids();
}

bool IsConvolveType(ElementType type) { return IsFloatingPoint(type); }

// Validation and dispatch shared by launching and describing. d_in/d_out are null when
// describing.
template <typename T>
cudaError_t DispatchTyped(const void* d_in, void* d_out, const ConvGeometry& shape,
                          const double* taps, detail::Launcher& launch) {
  if constexpr (!std::is_same_v<T, __half>) {
    if (shape.taps <= detail::kShortConvolveTaps) {
      return detail::LaunchShortTapConvolve(static_cast<const T*>(d_in), static_cast<T*>(d_out),
                                            shape, taps, launch);
    }
  }
  using Acc = typename ConvTraits<T>::Acc;
  ConvGeometry g = shape;
  g.tiles_per_row = detail::CeilDiv(g.window.out_count, TileOf<T>());
  ConvTaps<Acc> p;
  for (int i = 0; i < g.taps; ++i) p.v[i] = taps == nullptr ? Acc(0) : static_cast<Acc>(taps[i]);
  for (int i = g.taps; i < kMaxConvolveTaps; ++i) p.v[i] = Acc(0);
  const int64_t tiles = g.rows * g.tiles_per_row;
  const int64_t grid = std::min<int64_t>(
      tiles, static_cast<int64_t>(launch.config().multiprocessors) * ConvTuning<Acc>::kBlocksPerSm);
  return launch("convolve.tiles", ConvolveTilesKernel<T>, grid, ConvTuning<Acc>::kThreads,
                static_cast<const T*>(d_in), static_cast<T*>(d_out), g, p);
}

// float32 and float64 with short taps take the short-tap kernel (convolve_short.cu, chosen in
// DispatchTyped), which spends fewer instructions around the FMAs than this file's kernel.
// float16 stays here: its staged copy is converted to float32, which a cp.async copy cannot do.
cudaError_t Dispatch(const void* d_in, ElementType type, void* d_out, const ConvGeometry& g,
                     const double* taps, detail::Launcher& launch) {
  if (g.window.out_count == 0 || g.rows == 0) return cudaSuccess;
  switch (type) {
    case ElementType::kFloat32: return DispatchTyped<float>(d_in, d_out, g, taps, launch);
    case ElementType::kFloat64: return DispatchTyped<double>(d_in, d_out, g, taps, launch);
    case ElementType::kFloat16: return DispatchTyped<__half>(d_in, d_out, g, taps, launch);
    default: return cudaErrorInvalidValue;
  }
}

bool WindowGeometry(const ConvolveWindow& window, int32_t num_taps, ConvGeometry* g) {
  if (!IsValidConvolveWindow(window, num_taps)) return false;
  g->rows = 1;
  g->in_row_stride = 0;
  g->out_row_stride = 0;
  g->window = window;
  g->tiles_per_row = 0;  // set by the dispatch: the tile depends on the type
  g->taps = num_taps;
  return true;
}

cudaError_t ValidatePointers(const void* d_in, ElementType type, const void* d_out,
                             const double* taps, bool has_input) {
  const uintptr_t elem = ElementSize(type);
  if (taps == nullptr || d_out == nullptr || !detail::IsAligned(d_out, elem)) {
    return cudaErrorInvalidValue;
  }
  if (has_input && (d_in == nullptr || !detail::IsAligned(d_in, elem))) {
    return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

}  // namespace

size_t ConvolveWorkspaceBytes(int64_t, int64_t, int32_t, ElementType) { return 0; }

cudaError_t RowConvolve(const void* d_in, ElementType in_type, void* d_out, int64_t rows,
                        int64_t cols, const double* taps, int32_t num_taps, ConvolveMode mode,
                        void* /*d_workspace*/, size_t /*workspace_bytes*/,
                        const LaunchConfig& config, int* kernels) {
  detail::Launcher launch(config, kernels);
  ConvGeometry g;
  if (!IsConvolveType(in_type) || !RowGeometry(rows, cols, num_taps, mode, &g)) {
    return cudaErrorInvalidValue;
  }
  if (cudaError_t err = detail::ValidateConfig(config); err != cudaSuccess) return err;
  if (cudaError_t err = ValidatePointers(d_in, in_type, d_out, taps, true); err != cudaSuccess) {
    return err;
  }
  return Dispatch(d_in, in_type, d_out, g, taps, launch);
}

cudaError_t RowConvolveWindow(const void* d_in, ElementType in_type, void* d_out,
                              const ConvolveWindow& window, const double* taps,
                              int32_t num_taps, void* /*d_workspace*/,
                              size_t /*workspace_bytes*/, const LaunchConfig& config,
                              int* kernels) {
  detail::Launcher launch(config, kernels);
  ConvGeometry g;
  if (!IsConvolveType(in_type) || !WindowGeometry(window, num_taps, &g)) {
    return cudaErrorInvalidValue;
  }
  if (cudaError_t err = detail::ValidateConfig(config); err != cudaSuccess) return err;
  if (window.out_count == 0) return cudaSuccess;
  if (cudaError_t err = ValidatePointers(d_in, in_type, d_out, taps, window.in_count > 0);
      err != cudaSuccess) {
    return err;
  }
  return Dispatch(d_in, in_type, d_out, g, taps, launch);
}

std::vector<KernelLaunchInfo> DescribeRowConvolve(int64_t rows, int64_t cols, int32_t num_taps,
                                                  ConvolveMode mode, ElementType in_type,
                                                  const LaunchConfig& config) {
  std::vector<KernelLaunchInfo> out;
  ConvGeometry g;
  if (!IsConvolveType(in_type) || !RowGeometry(rows, cols, num_taps, mode, &g) ||
      detail::ValidateShapeConfig(config) != cudaSuccess) {
    return out;
  }
  detail::Launcher launch(config, &out);
  if (Dispatch(nullptr, in_type, nullptr, g, nullptr, launch) != cudaSuccess) out.clear();
  return out;
}

std::vector<KernelLaunchInfo> DescribeRowConvolveWindow(const ConvolveWindow& window,
                                                        int32_t num_taps, ElementType in_type,
                                                        const LaunchConfig& config) {
  std::vector<KernelLaunchInfo> out;
  ConvGeometry g;
  if (!IsConvolveType(in_type) || !WindowGeometry(window, num_taps, &g) ||
      detail::ValidateShapeConfig(config) != cudaSuccess) {
    return out;
  }
  detail::Launcher launch(config, &out);
  if (Dispatch(nullptr, in_type, nullptr, g, nullptr, launch) != cudaSuccess) out.clear();
  return out;
}

}  // namespace gpupipe::kernels::cuda
