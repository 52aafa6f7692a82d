// The short-tap convolution kernel (kernels/cuda/convolve_short.cu) under its two grids, tap
// count by tap count: the resident grid (kBlocksPerSm blocks an SM, each looping over tiles with
// the next tile's copies in flight) against a block a tile. 'same' mode, one row; each pair of
// outputs is compared bit for bit (the grid does not change any output's summation), and each
// time is the median of `reps` runs, twice, against cudaMemcpy D2D of the input in the same
// process. bench/results/kernels-h200.md, "Convolution: a block a tile against the resident
// grid", has a run and the threshold it chose (ConvolvePolicy::ShortTile<T>::kTileGridMaxTaps).
//
// Build and run on a GPU host, from the repository root:
//   nvcc -O3 -std=c++17 -arch=sm_90 -I. -DGPUPIPE_CUDA_ARCHITECTURES='"90"' \
//     -o convolve_grid bench/kernels/experiments/convolve_grid.cu kernels/cuda/device_caps.cu
//   ./convolve_grid [reps]   (default 20)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "bench/kernels/experiments/timing.cuh"
#include "kernels/cuda/convolve_short.cu"

using namespace gpupipe::kernels;
using namespace gpupipe::kernels::cuda;

namespace gpupipe::kernels::cuda::detail {
// LaunchShortTapConvolve with the grid chosen by the caller: a block a tile, or resident.
template <typename T>
cudaError_t LaunchWithGrid(const T* d_in, T* d_out, ConvGeometry g, const double* taps,
                           Launcher& launch, bool per_tile) {
  using Tu = ShortTuning<T>;
  const TapArrangement arrangement = ShortTapArrangement<T>(g.taps);
  const ShortTaps<T> p = PrepareShortTaps<T>(&g, taps, arrangement);
  const int64_t tiles = g.rows * g.tiles_per_row;
  const int64_t resident =
      static_cast<int64_t>(launch.config().multiprocessors) * Tu::kBlocksPerSm;
  const int64_t grid = std::min<int64_t>(tiles, per_tile ? kMaxGridBlocks : resident);
  if (arrangement == TapArrangement::kLeadFirst) {
    return launch("convolve.tiles", ConvolveShortTapsKernel<T, TapArrangement::kLeadFirst>, grid,
                  Tu::kThreads, d_in, d_out, g, p);
  }
  return launch("convolve.tiles", ConvolveShortTapsKernel<T, TapArrangement::kGuardedLast>, grid,
                Tu::kThreads, d_in, d_out, g, p);
}
}  // namespace gpupipe::kernels::cuda::detail

namespace {

template <typename T>
void Compare(int64_t n, std::initializer_list<int> tap_counts, const LaunchConfig& cfg,
             int reps) {
  T *d_in, *d_a, *d_b;
  CK(cudaMalloc(&d_in, n * sizeof(T)));
  CK(cudaMalloc(&d_a, n * sizeof(T)));
  CK(cudaMalloc(&d_b, n * sizeof(T)));
  std::vector<T> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = Quantized<T>(i, 7);
  CK(cudaMemcpy(d_in, x.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  MedianTimer timer(reps);
  detail::Launcher launch(cfg, static_cast<int*>(nullptr));
  const float copy =
      timer.Us([&] { CK(cudaMemcpyAsync(d_a, d_in, n * sizeof(T), cudaMemcpyDeviceToDevice)); });
  std::vector<T> ya(n), yb(n);
  for (int m : tap_counts) {
    detail::ConvGeometry g;
    detail::RowGeometry(1, n, m, ConvolveMode::kSame, &g);
    std::vector<double> taps(m);
    for (int k = 0; k < m; ++k) taps[k] = Quantized<double>(k, 9);
    auto resident = [&] {
      CK(detail::LaunchWithGrid<T>(d_in, d_a, g, taps.data(), launch, /*per_tile=*/false));
    };
    auto per_tile = [&] {
      CK(detail::LaunchWithGrid<T>(d_in, d_b, g, taps.data(), launch, /*per_tile=*/true));
    };
    const float r1 = timer.Us(resident), p1 = timer.Us(per_tile);
    const float r2 = timer.Us(resident), p2 = timer.Us(per_tile);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(ya.data(), d_a, n * sizeof(T), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(yb.data(), d_b, n * sizeof(T), cudaMemcpyDeviceToHost));
    const bool equal = memcmp(ya.data(), yb.data(), n * sizeof(T)) == 0;
    printf("%s n %lld taps %2d: copy %.1f us | resident %.1f / %.1f us | a block a tile %.1f / "
           "%.1f us | resident / per tile %.3f | outputs equal: %s\n",
           sizeof(T) == 4 ? "float32" : "float64", static_cast<long long>(n), m, copy, r1, r2,
           p1, p2, std::min(r1, r2) / std::min(p1, p2), equal ? "yes" : "NO");
  }
  CK(cudaFree(d_in));
  CK(cudaFree(d_a));
  CK(cudaFree(d_b));
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? atoi(argv[1]) : 20;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  LaunchConfig cfg;
  cfg.multiprocessors = prop.multiProcessorCount;
  cfg.pdl = true;
  printf("%s, %d SMs\n", prop.name, prop.multiProcessorCount);
  Compare<float>(int64_t{1} << 28, {1, 3, 5, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 56, 63, 64},
                 cfg, reps);
  Compare<double>(int64_t{1} << 26, {1, 5, 8, 16, 24, 32, 40, 48, 63, 64}, cfg, reps);
  Compare<float>(int64_t{1} << 24, {5, 16, 32, 40, 63}, cfg, reps);
  Compare<float>(int64_t{1} << 20, {5, 16, 63}, cfg, reps);
  return 0;
}
