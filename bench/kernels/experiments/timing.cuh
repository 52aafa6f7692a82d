// What the standalone convolution experiments (convolve_grid.cu, convolve_lead.cu) share: a
// check that ends the program on a CUDA error, the quantized input of kernels_bench, and the
// median device time of a launch.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench/cuda_check.cuh"

// Odd multiples of 1/256 in (-1, 1) from a hash of the index.
template <typename T>
T Quantized(uint64_t i, uint32_t seed) {
  uint64_t x = i * 0x9E3779B97F4A7C15ull + seed;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return T((2.0 * static_cast<double>(x & 255) - 255) / 256.0);
}

// The median over `reps` runs (after 3 unmeasured) of what `fn` enqueues on the default
// stream, in microseconds, between two events.
class MedianTimer {
 public:
  explicit MedianTimer(int reps) : reps_(reps) {
    CK(cudaEventCreate(&start_));
    CK(cudaEventCreate(&stop_));
  }
  ~MedianTimer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  MedianTimer(const MedianTimer&) = delete;
  MedianTimer& operator=(const MedianTimer&) = delete;

  template <typename Fn>
  float Us(Fn fn) {
    std::vector<float> t;
    for (int i = 0; i < reps_ + 3; ++i) {
      CK(cudaEventRecord(start_));
      fn();
      CK(cudaEventRecord(stop_));
      CK(cudaEventSynchronize(stop_));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, start_, stop_));
      if (i >= 3) t.push_back(ms * 1000);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }

 private:
  const int reps_;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};
