// RowConvolve / RowConvolveWindow: entry points, dispatch and the tile kernel.
//
// Work item: a tile of kConvTile consecutive outputs of one row (one window). The block stages
// the tile's input plus the (M - 1)-element halo in shared memory in the compute type (16-byte
// loads where the address allows, scalar at the edges; zeros outside the row and past the
// window), the taps reversed in shared memory, and each thread computes kConvPerThread
// consecutive outputs with a sliding register window over the staged input: per block of
// kConvPerThread taps a thread loads kConvPerThread new inputs and kConvPerThread taps (16-byte
// shared loads) for kConvPerThread^2 FMAs, so at 63 taps the kernel stays near the DRAM bound
// rather than the shared-memory bound. Outputs go back through shared memory so global stores
// are coalesced whatever d_out's alignment.
//
// Every output sums its products in tap order j = M - 1 .. 0 independently of the tile's
// position, so a row computed in several windows equals one call bit for bit.
// PDL: the taps (kernel parameters) are staged before the grid dependency wait; every global
// access comes after it; the dependent is triggered after the block's last store.
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/convolve.h"
#include "kernels/cuda/detail/launch.cuh"
#include "kernels/cuda/detail/row_access.cuh"
#include "kernels/cuda/detail/typed_access.cuh"

namespace gpupipe::kernels::cuda {
namespace {

// 256 threads x 8 outputs: 2048 outputs per tile, so the 63-tap halo costs 3% extra reads.
// Initial values, not yet tuned on the H200.
constexpr int kConvThreads = 256;
constexpr int kConvPerThread = 8;
constexpr int kConvTile = kConvThreads * kConvPerThread;
static_assert(kMaxConvolveTaps % kConvPerThread == 0, "taps are processed in whole blocks");
// A block per tile (the hardware balances them); the kernel loops only past this grid size.
constexpr int64_t kConvMaxGrid = int64_t{1} << 30;

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

// Taps by value in the kernel parameters (4 KiB as float, 8 KiB as double; CUDA 12.1+ allows
// 32 KiB of parameters), so a job needs no device copy of its taps.
template <typename Acc>
struct ConvTaps {
  Acc v[kMaxConvolveTaps];
};

// Shape of one launch: `rows` windows of identical geometry, rows apart by the strides.
struct ConvGeometry {
  int64_t rows;
  int64_t in_row_stride;   // elements between consecutive rows of d_in
  int64_t out_row_stride;  // elements between consecutive rows of d_out
  ConvolveWindow window;
  int64_t tiles_per_row;
  int32_t taps;  // M
};

// Copies src[0 .. count) (element-aligned, any 16-byte alignment) to dst[0 .. count) in the
// compute type, cooperatively over the block.
template <typename T, typename Acc>
__device__ __forceinline__ void StageInput(const T* src, int count, Acc* dst) {
  constexpr int kV = detail::kVecElems<T>;
  const int head = static_cast<int>(detail::HeadToAlign16(src, count));
  const int vecs = (count - head) / kV;
  for (int i = threadIdx.x; i < head; i += blockDim.x) {
    dst[i] = ConvTraits<T>::ToAcc(detail::LoadCg(src + i));
  }
  const T* body = src + head;
  Acc* body_dst = dst + head;
  for (int v = threadIdx.x; v < vecs; v += blockDim.x) {
    const detail::Vec16<T> x = detail::LoadVec16Cg(body + v * kV);
#pragma unroll
    for (int e = 0; e < kV; ++e) body_dst[v * kV + e] = ConvTraits<T>::ToAcc(x.v[e]);
  }
  for (int i = head + vecs * kV + threadIdx.x; i < count; i += blockDim.x) {
    dst[i] = ConvTraits<T>::ToAcc(detail::LoadCg(src + i));
  }
}

template <typename T>
__global__ void __launch_bounds__(kConvThreads)
    ConvolveTilesKernel(const T* d_in, T* d_out, ConvGeometry g,
                        ConvTaps<typename ConvTraits<T>::Acc> taps) {
  using Acc = typename ConvTraits<T>::Acc;
  constexpr int kR = kConvPerThread;
  // s_x[t] holds input x[x0 + t] of the current tile; kConvTile + kMaxConvolveTaps covers the
  // last tap block's reads (see the bound below).
  __shared__ alignas(16) Acc s_x[kConvTile + kMaxConvolveTaps];
  // s_g[k] = taps[M - 1 - k]: correlation order, so output o reads s_x[o + k].
  __shared__ alignas(16) Acc s_g[kMaxConvolveTaps];

  const int m = g.taps;
  const int full_blocks = m / kR;       // tap blocks without a tail
  const int tail = m - full_blocks * kR;  // 0..kR-1 taps of a guarded last block
  const int padded = (full_blocks + (tail > 0 ? 1 : 0)) * kR;
  for (int k = threadIdx.x; k < padded; k += blockDim.x) {
    s_g[k] = k < m ? taps.v[m - 1 - k] : Acc(0);
  }
  detail::WaitForPrimaryGrids();

  const ConvolveWindow& w = g.window;
  const int64_t win_lo = w.in_begin;
  const int64_t win_hi = w.in_begin + w.in_count;
  const int64_t tiles = g.rows * g.tiles_per_row;
  const int o = threadIdx.x * kR;  // this thread's first output in the tile
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t row = tile / g.tiles_per_row;
    const int64_t out0 = (tile - row * g.tiles_per_row) * kConvTile;  // offset in the window
    const int64_t x0 = w.out_begin + out0 - (m - 1);  // row index of s_x[0]
    // Entries that may hold data: the tile's outputs read x0 .. x0 + kConvTile + m - 2.
    const int needed = kConvTile + m - 1;
    const int span = kConvTile + padded;
    const int64_t lo = max(x0, win_lo);
    const int64_t hi = min(x0 + needed, win_hi);
    for (int t = threadIdx.x; t < span; t += blockDim.x) {
      const int64_t gi = x0 + t;
      if (gi < lo || gi >= hi) s_x[t] = Acc(0);  // outside the row or the window: zero
    }
    if (lo < hi) {
      StageInput(d_in + row * g.in_row_stride + (lo - win_lo), static_cast<int>(hi - lo),
                 s_x + (lo - x0));
    }
    __syncthreads();

    Acc acc[kR];
    Acc win[2 * kR];  // s_x[o + k0 .. o + k0 + 2 kR)
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      acc[r] = Acc(0);
      win[r] = s_x[o + r];
    }
    // Largest index read: o + k0 + 2 kR - 1 <= (kConvTile - kR) + (padded - kR) + 2 kR - 1
    //                   = kConvTile + padded - 1 < span.
    // Unrolled by two so the window's shift becomes register renaming rather than moves.
#pragma unroll 2
    for (int kb = 0; kb < full_blocks; ++kb) {
      const int k0 = kb * kR;
      Acc gk[kR];
#pragma unroll
      for (int r = 0; r < kR; ++r) {
        win[kR + r] = s_x[o + k0 + kR + r];
        gk[r] = s_g[k0 + r];
      }
#pragma unroll
      for (int kk = 0; kk < kR; ++kk) {
#pragma unroll
        for (int r = 0; r < kR; ++r) acc[r] = fma(gk[kk], win[r + kk], acc[r]);
      }
#pragma unroll
      for (int r = 0; r < kR; ++r) win[r] = win[kR + r];
    }
    if (tail > 0) {
      // Guarded, not zero-padded: a zero tap times an infinite input would be NaN.
      const int k0 = full_blocks * kR;
      Acc gk[kR];
#pragma unroll
      for (int r = 0; r < kR; ++r) {
        win[kR + r] = s_x[o + k0 + kR + r];
        gk[r] = s_g[k0 + r];
      }
#pragma unroll
      for (int kk = 0; kk < kR; ++kk) {
        if (kk < tail) {
#pragma unroll
          for (int r = 0; r < kR; ++r) acc[r] = fma(gk[kk], win[r + kk], acc[r]);
        }
      }
    }
    __syncthreads();  // every thread is done reading s_x
#pragma unroll
    for (int r = 0; r < kR; ++r) s_x[o + r] = acc[r];
    __syncthreads();
    const int64_t valid = min(static_cast<int64_t>(kConvTile), w.out_count - out0);
    T* dst = d_out + row * g.out_row_stride + out0;
    for (int i = threadIdx.x; i < valid; i += blockDim.x) dst[i] = ConvTraits<T>::FromAcc(s_x[i]);
    __syncthreads();  // s_x is restaged by the next tile
  }
  detail::AllowDependentGrids();
}

bool IsConvolveType(ElementType type) { return IsFloatingPoint(type); }

// Validation and dispatch shared by launching and describing. d_in/d_out are null when
// describing.
template <typename T>
cudaError_t DispatchTyped(const void* d_in, void* d_out, const ConvGeometry& g,
                          const double* taps, detail::Launcher& launch) {
  using Acc = typename ConvTraits<T>::Acc;
  ConvTaps<Acc> p;
  for (int i = 0; i < g.taps; ++i) p.v[i] = taps == nullptr ? Acc(0) : static_cast<Acc>(taps[i]);
  for (int i = g.taps; i < kMaxConvolveTaps; ++i) p.v[i] = Acc(0);
  const int64_t tiles = g.rows * g.tiles_per_row;
  const int64_t grid = std::min(tiles, kConvMaxGrid);
  return launch("convolve.tiles", ConvolveTilesKernel<T>, grid, kConvThreads,
                static_cast<const T*>(d_in), static_cast<T*>(d_out), g, p);
}

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

// The geometry of RowConvolve, or false for invalid shapes.
bool RowGeometry(int64_t rows, int64_t cols, int32_t num_taps, ConvolveMode mode,
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
  g->tiles_per_row = detail::CeilDiv(g->window.out_count, kConvTile);
  g->taps = num_taps;
  return true;
}

bool WindowGeometry(const ConvolveWindow& window, int32_t num_taps, ConvGeometry* g) {
  if (!IsValidConvolveWindow(window, num_taps)) return false;
  g->rows = 1;
  g->in_row_stride = 0;
  g->out_row_stride = 0;
  g->window = window;
  g->tiles_per_row = detail::CeilDiv(window.out_count, kConvTile);
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
