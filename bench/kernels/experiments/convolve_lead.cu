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

#include "bench/kernels/experiments/timing.cuh"
#include "kernels/cuda/convolve_short.cu"

using namespace gpupipe::kernels;
using namespace gpupipe::kernels::cuda;

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
  MedianTimer timer(reps);
  detail::Launcher launch(cfg, static_cast<int*>(nullptr));
  const float copy =
      timer.Us([&] { CK(cudaMemcpyAsync(d_a, d_in, n * sizeof(T), cudaMemcpyDeviceToDevice)); });
  for (int m : tap_counts) {
    detail::ConvGeometry g;
    detail::RowGeometry(1, n, m, ConvolveMode::kSame, &g);
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
    const float g1 = timer.Us(guarded), l1 = timer.Us(lead);
    const float g2 = timer.Us(guarded), l2 = timer.Us(lead);
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
