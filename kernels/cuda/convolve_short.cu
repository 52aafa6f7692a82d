// The short-tap convolution kernel: float32 and float64 rows, 1..kShortConvolveTaps taps
// (convolve.cu dispatches here, and to its general tile kernel for longer taps and float16).
//
// At 63 taps the FMAs (2^28 outputs x 63) are most of the kernel's instructions, so it spends
// as few other instructions as it can around them (its copies in and out set a floor of their
// own, which a few taps already reach: bench/results/kernels-h200.md):
//  - the taps are kernel parameters in correlation order, unrolled over the whole tap range,
//    so each FFMA takes its tap as a constant operand (no tap loads, no tap registers);
//  - each tile's input is copied into shared memory with cp.async (the pipeline primitives:
//    __pipeline_memcpy_async / __pipeline_commit / __pipeline_wait_prior), 16 bytes a copy,
//    and a block with another tile to do copies it into the second of two buffers while it
//    computes the first: no registers hold the prefetch and no thread converts or stores it.
//    A thread's copies sit at fixed offsets from two base addresses, so a copy is one
//    instruction;
//  - the tiles of a row are shifted by a per-row phase of 0 .. kV - 1 outputs, so that every
//    interior tile's input starts at a 16-byte boundary of d_in whatever the pointer, the row
//    stride or the mode (only the tiles at a window's ends copy element by element, with zeros
//    outside the window);
//  - a tap count that leaves one block of kR taps partial takes that block last, each tap
//    guarded, or first, entered through one jump (TapArrangement, chosen per tap count by
//    tuning/convolve_policy.h): the same sums in the same order either way;
//  - a block walks its tiles with a running (row, tile) pair: no division a tile;
//  - outputs go back through a second shared buffer, so that the global stores are coalesced
//    whatever d_out's alignment; a tile costs two barriers.
// Per tile the loop is: wait for this tile's copies, barrier, start the next tile's copies,
// the FMAs, outputs to shared memory, barrier, coalesced global stores.
// The grid (tuning/convolve_policy.h): at tap counts up to kTileGridMaxTaps a block a tile, so
// each block runs the loop once and the SM's other blocks cover its copies; above, all blocks
// resident at once, each looping over tiles with its next tile's copies in flight.
// PDL: every global access comes after the grid dependency wait; the dependent is triggered
// after the block's last store.
#include <cuda_pipeline_primitives.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/detail/convolve_tile.cuh"
#include "kernels/cuda/detail/element_access.cuh"
#include "kernels/cuda/detail/launch.cuh"
#include "kernels/cuda/detail/row_access.cuh"
#include "kernels/cuda/tuning/convolve_policy.h"

namespace gpupipe::kernels::cuda::detail {
namespace {

// Tile shape per type: threads per block, consecutive outputs a thread (R), blocks an SM (the
// resident grid, which __launch_bounds__ guarantees), and the tap counts that take a block a
// tile instead. The values and their reasons: tuning/convolve_policy.h.
template <typename T>
using ShortTuning = tuning::ConvolvePolicy::ShortTile<T>;

template <typename T>
using ShortLayout = ConvLayout<T, ShortTuning<T>::kPerThread, ShortTuning<T>::kThreads,
                               kShortConvolveTaps>;

// The taps in correlation order in whole blocks of kR, as `TapArrangement` lays them out: with
// Mp = M rounded up to a multiple of kR and lead = Mp - M for kLeadFirst (0 for kGuardedLast),
// v[lead + k] = taps[M - 1 - k]; the other entries are zero and never multiplied.
template <typename T>
struct ShortTaps {
  T v[kShortConvolveTaps];
};

// Taps this launch multiplies, rounded up to whole blocks of kR (Mp above).
template <typename T>
__host__ __device__ inline int PaddedTaps(int m) {
  constexpr int kR = ShortLayout<T>::kR;
  return (m + kR - 1) / kR * kR;
}

// Starts the copies of `count` staged entries from the 16-byte aligned src, kElems (16 bytes)
// a copy: copy c of this thread takes src[(threadIdx.x + c kThreads) kElems ..] to the padded
// place of that entry in `buf`. As kThreads kElems is a whole number of runs, that place
// advances by a constant per round.
template <typename T>
__device__ __forceinline__ void CopyRounds(const T* src, T* buf, int count) {
  constexpr int kElems = kVecElems<T>;
  using L = ShortLayout<T>;
  constexpr int kThreads = ShortTuning<T>::kThreads;
  constexpr int kFullRounds = L::kTile / (kThreads * kElems);  // the span is longer
  constexpr int kRoundStep = kThreads * kElems / L::kR * L::kRun;
  static_assert(kThreads * kElems % L::kR == 0, "a round of copies covers whole runs");
  static_assert(L::kR % kElems == 0, "a copy stays inside one run of the layout");
  src += threadIdx.x * kElems;
  T* dst = buf + L::Phys(threadIdx.x * kElems);
#pragma unroll
  for (int c = 0; c < kFullRounds; ++c) {
    __pipeline_memcpy_async(dst + c * kRoundStep, src + c * kThreads * kElems, 16);
  }
  // The rest: the halo, fewer than kThreads copies (the span past the tile is at most
  // kShortConvolveTaps <= kThreads elements).
  static_assert(kShortConvolveTaps <= kThreads, "the halo takes one partial round");
  if (static_cast<int>(threadIdx.x) < count / kElems - kFullRounds * kThreads) {
    __pipeline_memcpy_async(dst + kFullRounds * kRoundStep, src + kFullRounds * kThreads * kElems,
                            16);
  }
}

template <typename T, TapArrangement kArrangement>
__global__ void __launch_bounds__(ShortTuning<T>::kThreads, ShortTuning<T>::kBlocksPerSm)
    ConvolveShortTapsKernel(const T* d_in, T* d_out, ConvGeometry g, ShortTaps<T> taps) {
  using L = ShortLayout<T>;
  constexpr int kR = L::kR;
  constexpr int kThreads = ShortTuning<T>::kThreads;
  constexpr int kTile = L::kTile;
  constexpr int kV = kVecElems<T>;  // elements of a 16-byte copy
  constexpr int kBlocks = kShortConvolveTaps / kR;
  // s_x[b][Phys(i)] holds input x[x0 + i] of the tile in buffer b; s_o holds a tile's outputs,
  // thread t's R outputs at t * kRun.
  __shared__ alignas(16) T s_x[2][L::kPhysical];
  __shared__ alignas(16) T s_o[kThreads * L::kRun];

  constexpr bool kLeadFirst = kArrangement == TapArrangement::kLeadFirst;
  // The taps as nb = Mp / kR blocks (ShortTaps): tap entry k' of output o reads input entry
  // o + k'. Right-aligned (kLeadFirst), the first block skips its `lead` entries and each
  // output's inputs start Mp - 1 before it; otherwise M - 1 before it, the last block partial.
  const int m = g.taps;
  const int mp = PaddedTaps<T>(m);
  const int nb = mp / kR;
  const int lead = mp - m;
  const int reach = kLeadFirst ? mp - 1 : m - 1;
  // Entries staged: the tile plus every tap block's reads, a whole number of 16-byte copies.
  const int span = kTile + mp;
  const ConvolveWindow& w = g.window;
  const int64_t win_lo = w.in_begin;
  const int64_t win_hi = w.in_begin + w.in_count;
  const int64_t tiles = g.rows * g.tiles_per_row;
  detail::WaitForPrimaryGrids();

  // Tile j of row `row` covers window outputs out0 .. out0 + kTile - 1 with out0 = j kTile -
  // (the row's phase); its input starts at x0 = out_begin + out0 - reach, at a 16-byte
  // boundary. A block keeps only (row, j) of its current tile and recomputes the rest, which
  // costs fewer instructions than the registers it would hold across the FMAs.
  struct TileAt {
    int64_t row;
    int64_t j;
  };
  auto out0_of = [&](const TileAt& t) {
    // The element address of x[out_begin - reach] in row `row`, modulo kV (unsigned wrap
    // keeps the residue right when the offset is negative).
    const uintptr_t at = reinterpret_cast<uintptr_t>(d_in) / sizeof(T) +
                         static_cast<uintptr_t>(t.row * g.in_row_stride + w.out_begin -
                                                reach - win_lo);
    return t.j * kTile - static_cast<int64_t>(at & (kV - 1));
  };
  auto advance = [&](TileAt& t) {
    t.j += gridDim.x;
    if (t.j >= g.tiles_per_row) {  // only tiles of short rows cross rows
      const int64_t rows = t.j / g.tiles_per_row;
      t.row += rows;
      t.j -= rows * g.tiles_per_row;
    }
  };
  // Starts the copies of a tile's span into `buf` (zeros outside the window) and commits them.
  auto stage = [&](const TileAt& t, T* buf) {
    const int64_t x0 = w.out_begin + out0_of(t) - reach;
    const T* row_in = d_in + t.row * g.in_row_stride - win_lo;  // row_in[x] = x[x], x in window
    if (x0 >= win_lo && x0 + span <= win_hi) {
      CopyRounds(row_in + x0, buf, span);  // 16-byte aligned: see out0_of
    } else {
      for (int i = threadIdx.x; i < span; i += kThreads) {
        const int64_t x = x0 + i;
        if (x >= win_lo && x < win_hi) {
          __pipeline_memcpy_async(buf + L::Phys(i), row_in + x, sizeof(T));
        } else {
          buf[L::Phys(i)] = T(0);
        }
      }
    }
    __syncwarp();  // commit from a converged warp
    __pipeline_commit();
  };

  TileAt cur{blockIdx.x / g.tiles_per_row, 0};
  cur.j = blockIdx.x - cur.row * g.tiles_per_row;
  if (blockIdx.x < tiles) stage(cur, s_x[0]);
  int b = 0;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x, b ^= 1) {
    __pipeline_wait_prior(0);
    // This tile's entries are visible to every thread; every thread is done with the other
    // buffer (the previous tile's FMAs) and with s_o (its stores).
    __syncthreads();
    if (tile + gridDim.x < tiles) {
      TileAt next = cur;
      advance(next);
      stage(next, s_x[b ^ 1]);
    }

    const T* xs = s_x[b] + threadIdx.x * L::kRun;  // this thread's outputs: entries o = t * kR
    T acc[kR];
    T win[2 * kR];  // logical entries o + kb * kR .. o + kb * kR + 2 kR - 1
#pragma unroll
    for (int r = 0; r < kR; ++r) acc[r] = T(0);
    LoadSharedRun<kR>(xs, win);
    // Largest entry read: o + (nb + 1) kR - 1 <= kTile + mp - 1 < span.
    if constexpr (kLeadFirst) {
      LoadSharedRun<kR>(xs + L::kRun, win + kR);
      LeadBlockFma<kR>(acc, win, lead, [&](int kk) { return taps.v[kk]; });
#pragma unroll
      for (int kb = 1; kb < kBlocks; ++kb) {
        if (kb == nb) break;
#pragma unroll
        for (int r = 0; r < kR; ++r) win[r] = win[kR + r];
        LoadSharedRun<kR>(xs + (kb + 1) * L::kRun, win + kR);
        TapBlockFma<kR, false>(acc, win, kR, [&](int kk) { return taps.v[kb * kR + kk]; });
      }
    } else {
      const int full_blocks = m / kR;
      const int tail = m - full_blocks * kR;  // taps of the guarded last block
#pragma unroll
      for (int kb = 0; kb < kBlocks; ++kb) {
        if (kb == full_blocks) {
          if (tail > 0) {
            LoadSharedRun<kR>(xs + (kb + 1) * L::kRun, win + kR);
            TapBlockFma<kR, true>(acc, win, tail, [&](int kk) { return taps.v[kb * kR + kk]; });
          }
          break;
        }
        LoadSharedRun<kR>(xs + (kb + 1) * L::kRun, win + kR);
        TapBlockFma<kR, false>(acc, win, kR, [&](int kk) { return taps.v[kb * kR + kk]; });
#pragma unroll
        for (int r = 0; r < kR; ++r) win[r] = win[kR + r];
      }
    }
    StoreSharedRun<kR>(s_o + threadIdx.x * L::kRun, acc);
    __syncthreads();

    // Output i = threadIdx.x + j * kThreads of the tile sits at s_o[Phys(threadIdx.x) + j *
    // kStep]: kThreads is a multiple of kR, so the padding advances by a constant per step.
    constexpr int kStep = kThreads / kR * L::kRun;
    const T* src = s_o + L::Phys(threadIdx.x);
    const int64_t out0 = out0_of(cur);
    const int64_t base = cur.row * g.out_row_stride + out0 + threadIdx.x;
    const int64_t lo = max(int64_t{0}, -out0);  // the first tile of a row starts before it
    const int64_t hi = min(static_cast<int64_t>(kTile), w.out_count - out0);
    if (lo == 0 && hi == kTile) {
#pragma unroll
      for (int j = 0; j < kR; ++j) d_out[base + j * kThreads] = src[j * kStep];
    } else {
      for (int j = 0; j < kR; ++j) {
        const int64_t i = threadIdx.x + j * kThreads;
        if (i >= lo && i < hi) d_out[base + j * kThreads] = src[j * kStep];
      }
    }
    advance(cur);
  }
  detail::AllowDependentGrids();
}

// The kernel's arguments from the caller's: fills in g's tiles a row (up to kV - 1 outputs of
// phase in front of a row's first tile) and returns the taps in correlation order, laid out
// for `arrangement`.
template <typename T>
ShortTaps<T> PrepareShortTaps(ConvGeometry* g, const double* taps, TapArrangement arrangement) {
  g->tiles_per_row = CeilDiv(g->window.out_count + kVecElems<T> - 1, ShortLayout<T>::kTile);
  const int m = g->taps;
  const int lead = arrangement == TapArrangement::kLeadFirst ? PaddedTaps<T>(m) - m : 0;
  ShortTaps<T> p;
  for (int k = 0; k < kShortConvolveTaps; ++k) {
    const int c = k - lead;  // correlation index
    p.v[k] = taps == nullptr || c < 0 || c >= m ? T(0) : static_cast<T>(taps[m - 1 - c]);
  }
  return p;
}

// The kernel in `arrangement` on its grid: a block a tile up to kTileGridMaxTaps taps, the
// resident grid above.
template <typename T>
cudaError_t LaunchArranged(const T* d_in, T* d_out, ConvGeometry g, const double* taps,
                           Launcher& launch, TapArrangement arrangement) {
  using Tu = ShortTuning<T>;
  const ShortTaps<T> p = PrepareShortTaps<T>(&g, taps, arrangement);
  const int64_t tiles = g.rows * g.tiles_per_row;
  const int64_t resident = static_cast<int64_t>(launch.config().multiprocessors) * Tu::kBlocksPerSm;
  const int64_t grid =
      std::min<int64_t>(tiles, g.taps <= Tu::kTileGridMaxTaps ? kMaxGridBlocks : resident);
  if (arrangement == TapArrangement::kLeadFirst) {
    return launch("convolve.tiles", ConvolveShortTapsKernel<T, TapArrangement::kLeadFirst>, grid,
                  Tu::kThreads, d_in, d_out, g, p);
  }
  return launch("convolve.tiles", ConvolveShortTapsKernel<T, TapArrangement::kGuardedLast>, grid,
                Tu::kThreads, d_in, d_out, g, p);
}

}  // namespace

template <typename T>
TapArrangement ShortTapArrangement(int taps) {
  // (A shift by 32 or more is not defined: with 32 outputs a thread every bit but bit 0 is a
  // lead.)
  static_assert((ShortTuning<T>::kLeadFirstLeads & 1u) == 0 &&
                    (ShortLayout<T>::kR >= 32 ||
                     (ShortTuning<T>::kLeadFirstLeads >> (ShortLayout<T>::kR % 32)) == 0),
                "leads are 1 to kPerThread - 1");
  const int lead = PaddedTaps<T>(taps) - taps;
  return (ShortTuning<T>::kLeadFirstLeads >> lead) & 1u ? TapArrangement::kLeadFirst
                                                        : TapArrangement::kGuardedLast;
}

template <typename T>
cudaError_t LaunchShortTapConvolve(const T* d_in, T* d_out, ConvGeometry g, const double* taps,
                                   Launcher& launch) {
  return LaunchArranged<T>(d_in, d_out, g, taps, launch, ShortTapArrangement<T>(g.taps));
}

template TapArrangement ShortTapArrangement<float>(int);
template TapArrangement ShortTapArrangement<double>(int);
template cudaError_t LaunchShortTapConvolve<float>(const float*, float*, ConvGeometry,
                                                   const double*, Launcher&);
template cudaError_t LaunchShortTapConvolve<double>(const double*, double*, ConvGeometry,
                                                    const double*, Launcher&);

}  // namespace gpupipe::kernels::cuda::detail
