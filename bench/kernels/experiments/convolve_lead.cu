// The short-tap convolution kernel (kernels/cuda/convolve_short.cu) in its two tap
// arrangements (detail::TapArrangement), tap count by tap count: the partial block of taps last
// and guarded, against right-aligned taps with the partial block first, entered through one
// jump. 'same' on one row (2^28 float32, 2^26 float64), the median of `reps` launches twice for
// each arrangement, alternating, against cudaMemcpy D2D of the input in the same process, and
// the two outputs compared on the device (tests/kernels/cuda/convolve_arrangement_test.cu checks
// both against a tap-order reference at every count). bench/results/kernels-h200.md, "The
// lead-first arrangement, tap count by tap count", has a run and the set it chose
// (ConvolvePolicy::ShortTile<T>::kLeadFirstLeads).
//
// Build and run on a GPU host, from the repository root:
//   nvcc -O3 -std=c++17 -arch=sm_90 -I. -DGPUPIPE_CUDA_ARCHITECTURES='"90"' \
//     -o convolve_lead bench/kernels/experiments/convolve_lead.cu kernels/cuda/device_caps.cu
//   ./convolve_lead [reps]   (default 20)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cuda/convolve_short.cu"

using namespace gpupipe::kernels;
using namespace gpupipe::kernels::cuda;

#define CK(x)                                                                          \
  do {                                                                                 \
    const cudaError_t e_ = (x);                                                        \
    if (e_ != cudaSuccess) {                                                           \
      printf("CUDA %s at line %d\n", cudaGetErrorString(e_), __LINE__);                \
      exit(2);                                                                         \
    }                                                                                  \
  } while (0)

namespace {

using detail::TapArrangement;

template <typename T>
__global__ void CountDifferences(const T* a, const T* b, int64_t n, unsigned long long* count) {
  unsigned long long local = 0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
    local += *reinterpret_cast<const Bits*>(&a[i]) != *reinterpret_cast<const Bits*>(&b[i]);
  }
  if (local) atomicAdd(count, local);
}

// Odd multiples of 1/256 in (-1, 1) from a hash of the index.
template <typename T>
T Quantized(uint64_t i, uint32_t seed) {
  uint64_t x = i * 0x9E3779B97F4A7C15ull + seed;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return T((2.0 * static_cast<double>(x & 255) - 255) / 256.0);
}

detail::ConvGeometry Geometry(int64_t rows, int64_t cols, int m, ConvolveMode mode) {
  detail::ConvGeometry g;
  g.rows = rows;
  g.in_row_stride = cols;
  g.window.row_length = cols;
  g.window.in_begin = 0;
  g.window.in_count = cols;
  ConvolveOutputRange(cols, m, mode, &g.window.out_begin, &g.window.out_count);
  g.out_row_stride = g.window.out_count;
  g.tiles_per_row = 0;
  g.taps = m;
  return g;
}

template <typename T>
void Time(int64_t n, const std::vector<int>& tap_counts, const LaunchConfig& cfg, int reps) {
  T *d_in, *d_a, *d_b;
  unsigned long long* d_count;
  CK(cudaMalloc(&d_in, n * sizeof(T)));
  CK(cudaMalloc(&d_a, n * sizeof(T)));
  CK(cudaMalloc(&d_b, n * sizeof(T)));
  CK(cudaMalloc(&d_count, sizeof(unsigned long long)));
  std::vector<T> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = Quantized<T>(i, 7);
  CK(cudaMemcpy(d_in, x.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  auto median_us = [&](auto fn) {
    std::vector<float> t;
    for (int i = 0; i < reps + 3; ++i) {
      CK(cudaEventRecord(a));
      fn();
      CK(cudaEventRecord(b));
      CK(cudaEventSynchronize(b));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, a, b));
      if (i >= 3) t.push_back(ms * 1000);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  detail::Launcher launch(cfg, static_cast<int*>(nullptr));
  const float copy =
      median_us([&] { CK(cudaMemcpyAsync(d_a, d_in, n * sizeof(T), cudaMemcpyDeviceToDevice)); });
  for (int m : tap_counts) {
    const detail::ConvGeometry g = Geometry(1, n, m, ConvolveMode::kSame);
    std::vector<double> taps(m);
    for (int k = 0; k < m; ++k) taps[k] = Quantized<double>(k, 9);
    auto guarded = [&] {
      CK(detail::LaunchArranged<T>(d_in, d_a, g, taps.data(), launch,
                                   TapArrangement::kGuardedLast));
    };
    auto lead = [&] {
      CK(detail::LaunchArranged<T>(d_in, d_b, g, taps.data(), launch,
                                   TapArrangement::kLeadFirst));
    };
    const float g1 = median_us(guarded), l1 = median_us(lead);
    const float g2 = median_us(guarded), l2 = median_us(lead);
    CK(cudaMemset(d_count, 0, sizeof(unsigned long long)));
    CountDifferences<T><<<1024, 256>>>(d_a, d_b, g.window.out_count, d_count);
    unsigned long long differ = 0;
    CK(cudaMemcpy(&differ, d_count, sizeof(differ), cudaMemcpyDeviceToHost));
    const int kr = detail::ShortLayout<T>::kR;
    const int lead_taps = (kr - m % kr) % kr;  // taps its blocks miss
    const char* chosen =
        detail::ShortTapArrangement<T>(m) == TapArrangement::kLeadFirst ? "lead-first"
                                                                        : "guarded-last";
    printf("%s n %lld taps %2d (lead %2d): copy %.1f us | guarded-last %.1f / %.1f us | "
           "lead-first %.1f / %.1f us | lead-first / guarded-last %.3f | outputs differ: %llu | "
           "the policy takes %s\n",
           sizeof(T) == 4 ? "float32" : "float64", static_cast<long long>(n), m, lead_taps, copy,
           g1, g2, l1, l2, std::min(l1, l2) / std::min(g1, g2), differ, chosen);
  }
  CK(cudaFree(d_in));
  CK(cudaFree(d_a));
  CK(cudaFree(d_b));
  CK(cudaFree(d_count));
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
  std::vector<int> f32;
  for (int m = 1; m <= 64; ++m) f32.push_back(m);
  Time<float>(int64_t{1} << 28, f32, cfg, reps);
  std::vector<int> f64;
  for (int m = 33; m <= 64; ++m) f64.push_back(m);
  Time<double>(int64_t{1} << 26, f64, cfg, reps);
  return 0;
}
