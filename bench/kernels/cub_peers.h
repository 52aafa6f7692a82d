// The CUB peers of kernels_bench (CCCL shipped with the CUDA toolkit), float32 only. Each peer
// is an object built once per shape: Create sizes and allocates CUB's temporary storage (and
// the segment offsets), so Run only enqueues, as our kernels do.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>

namespace gpupipe::bench {

enum class CubAlgo {
  kTransformAffine,  // cub::DeviceTransform::Transform, y = fmaf(2, x, 1)
  kReduceSum,        // cub::DeviceReduce::Sum over rows * cols values, one float out
  kSegmentedSum,     // cub::DeviceSegmentedReduce::Sum, one float per row
  kInclusiveSum,     // cub::DeviceScan::InclusiveSum over rows * cols values (rows must be 1)
  kHistogramEven,    // cub::DeviceHistogram::HistogramEven, `bins` int32 counters over [lo, hi)
};

// "major.minor.patch" of the CCCL the peers were compiled with.
std::string CcclVersion();

class CubPeer {
 public:
  // Allocates what Run needs; d_out of Run holds float32 results, or int32 counts for
  // kHistogramEven.
  static std::unique_ptr<CubPeer> Create(CubAlgo algo, int64_t rows, int64_t cols, int bins,
                                         float lo, float hi, cudaStream_t stream,
                                         cudaError_t* error);
  ~CubPeer();

  cudaError_t Run(const float* d_in, void* d_out) const;
  const char* name() const;

 private:
  CubPeer() = default;
  CubAlgo algo_{};
  int64_t rows_ = 0, cols_ = 0;
  int bins_ = 0;
  float lo_ = 0, hi_ = 0;
  cudaStream_t stream_ = nullptr;
  void* d_temp_ = nullptr;
  size_t temp_bytes_ = 0;
  int64_t* d_offsets_ = nullptr;  // rows + 1 segment boundaries (kSegmentedSum)
};

}  // namespace gpupipe::bench
