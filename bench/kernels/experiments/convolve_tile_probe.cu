// The short-tap convolution kernel (kernels/cuda/convolve_short.cu) under whichever
// ConvolvePolicy the include path finds first, float32, tap count by tap count: its time in both
// tap arrangements, against cudaMemcpy D2D of the input in the same process, and a hash of each
// output's bits. The input is random at full precision, so the hash changes with the order of
// any output's sums: two builds under different tiles (outputs a thread, threads a block) give
// the same hashes only if every output is the same sum in the same order, which is the
// kernels' contract (kernels/cuda/detail/convolve_tile.cuh). bench/results/kernels-h200.md,
// "Experiments of 2026-12-05, evening: 32 outputs a thread", has a run.
//
// Build the committed tile and another, and run both on a GPU host, from the repository root:
//   nvcc -O3 -std=c++17 -arch=sm_90 -I. -DGPUPIPE_CUDA_ARCHITECTURES='"90"' \
//     -o probe16 bench/kernels/experiments/convolve_tile_probe.cu kernels/cuda/device_caps.cu
//   mkdir -p /tmp/policy/kernels/cuda/tuning
//   sed -e '/ShortTile<float> {/,/};/ {s/kThreads = 128/kThreads = 64/; s/kPerThread = 16/kPerThread = 32/}' \
//     kernels/cuda/tuning/convolve_policy.h > /tmp/policy/kernels/cuda/tuning/convolve_policy.h
//   nvcc -O3 -std=c++17 -arch=sm_90 -I/tmp/policy -I. -DGPUPIPE_CUDA_ARCHITECTURES='"90"' \
//     -o probe32 bench/kernels/experiments/convolve_tile_probe.cu kernels/cuda/device_caps.cu
//   ./probe16 [reps [log2 n [first taps [last taps]]]]   (default 20 28 1 64), then ./probe32
// (That tile keeps 7 blocks an SM, which its shared memory allows; for 96 threads of 32 outputs
// set kThreads = 96 and kBlocksPerSm = 5. A kBlocksPerSm that the shared memory does not allow
// still builds, and its grid then runs in two waves.)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench/kernels/experiments/timing.cuh"
#include "kernels/cuda/convolve_short.cu"

using namespace gpupipe::kernels;
using namespace gpupipe::kernels::cuda;

namespace {

using detail::TapArrangement;

// Adds a hash of each (index, bits) pair to *out: the sum does not depend on the order in
// which the threads add, and any changed bit at any index changes it.
__global__ void HashBits(const uint32_t* a, int64_t n, unsigned long long* out) {
  unsigned long long h = 0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    unsigned long long x =
        (a[i] + 0x9E3779B97F4A7C15ull) * (static_cast<unsigned long long>(i) * 2 + 1);
    x ^= x >> 29;
    h += x * 0xBF58476D1CE4E5B9ull;
  }
  atomicAdd(out, h);
}

// Uniform in [-1, 1] (the conversion to float may round to either end) with every mantissa bit
// random.
__global__ void FillRandom(float* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    uint64_t v = static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull + 12345;
    v ^= v >> 31;
    v *= 0xBF58476D1CE4E5B9ull;
    v ^= v >> 29;
    x[i] = static_cast<float>(static_cast<double>(v >> 11) / 9007199254740992.0 * 2 - 1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? atoi(argv[1]) : 20;
  const int log2n = argc > 2 ? atoi(argv[2]) : 28;
  const int first = argc > 3 ? atoi(argv[3]) : 1;
  const int last = argc > 4 ? atoi(argv[4]) : detail::kShortConvolveTaps;
  const int64_t n = int64_t{1} << log2n;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  int clock_khz = 0;
  CK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  LaunchConfig cfg;
  cfg.multiprocessors = prop.multiProcessorCount;
  cfg.pdl = true;
  printf("%s, %d SMs at %.2f GHz; float32 tile: %d outputs a thread, %d threads, %d blocks an SM; "
         "n 2^%d\n",
         prop.name, prop.multiProcessorCount, clock_khz / 1e6, detail::ShortLayout<float>::kR,
         detail::ShortTuning<float>::kThreads, detail::ShortTuning<float>::kBlocksPerSm, log2n);
  float *d_in, *d_a, *d_b;
  unsigned long long* d_hash;
  CK(cudaMalloc(&d_in, n * sizeof(float)));
  CK(cudaMalloc(&d_a, n * sizeof(float)));
  CK(cudaMalloc(&d_b, n * sizeof(float)));
  CK(cudaMalloc(&d_hash, 2 * sizeof(unsigned long long)));
  FillRandom<<<1024, 256>>>(d_in, n);
  CK(cudaGetLastError());
  MedianTimer timer(reps);
  detail::Launcher launch(cfg, static_cast<int*>(nullptr));
  const float copy = timer.Us(
      [&] { CK(cudaMemcpyAsync(d_a, d_in, n * sizeof(float), cudaMemcpyDeviceToDevice)); });
  // The FP32 FMA peak: 128 lanes an SM at the device's clock.
  const double fma_per_us = prop.multiProcessorCount * 128.0 * clock_khz * 1e-3;
  for (int m = first; m <= last; ++m) {
    detail::ConvGeometry g;
    if (!detail::RowGeometry(1, n, m, ConvolveMode::kSame, &g)) {
      fprintf(stderr, "no geometry for %d taps\n", m);
      return 1;
    }
    std::vector<double> taps(m);
    for (int k = 0; k < m; ++k) taps[k] = Quantized<double>(k, 9) + 1e-3 * k;
    auto guarded = [&] {
      CK(detail::LaunchArranged<float>(d_in, d_a, g, taps.data(), launch,
                                       TapArrangement::kGuardedLast));
    };
    auto lead = [&] {
      CK(detail::LaunchArranged<float>(d_in, d_b, g, taps.data(), launch,
                                       TapArrangement::kLeadFirst));
    };
    const float g1 = timer.Us(guarded), l1 = timer.Us(lead);
    const float g2 = timer.Us(guarded), l2 = timer.Us(lead);
    CK(cudaMemset(d_hash, 0, 2 * sizeof(unsigned long long)));
    HashBits<<<1024, 256>>>(reinterpret_cast<const uint32_t*>(d_a), g.window.out_count, d_hash);
    HashBits<<<1024, 256>>>(reinterpret_cast<const uint32_t*>(d_b), g.window.out_count,
                            d_hash + 1);
    unsigned long long hash[2];
    CK(cudaMemcpy(hash, d_hash, sizeof(hash), cudaMemcpyDeviceToHost));
    const float best = std::min({g1, g2, l1, l2});
    printf("taps %2d: copy %.1f us | guarded-last %.1f / %.1f us | lead-first %.1f / %.1f us | "
           "best %.1f us, %.1f%% of the FMA peak | hashes %016llx %016llx (%s)\n",
           m, copy, g1, g2, l1, l2, best, 100.0 * static_cast<double>(n) * m / fma_per_us / best,
           hash[0], hash[1], hash[0] == hash[1] ? "same" : "DIFFERENT");
  }
  CK(cudaFree(d_in));
  CK(cudaFree(d_a));
  CK(cudaFree(d_b));
  CK(cudaFree(d_hash));
  return 0;
}
