// One instantiation of each CUB algorithm, float32 only: this file dominates the bench's
// compile time, so nothing here is templated further.
#include "bench/kernels/cub_peers.h"

#include <cub/device/device_histogram.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_segmented_reduce.cuh>
#include <cub/device/device_transform.cuh>
#include <vector>

namespace gpupipe::bench {
namespace {

struct AffineOp {
  __device__ float operator()(float x) const { return fmaf(2.0f, x, 1.0f); }
};

}  // namespace

// Dispatch for sizing (d_temp == nullptr) and running; the same arguments both times.
static cudaError_t Dispatch(CubAlgo algo, void* d_temp, size_t& temp_bytes, const float* d_in,
                            void* d_out, int64_t rows, int64_t cols, int bins, float lo,
                            float hi, const int64_t* d_offsets, cudaStream_t stream) {
  const int64_t n = rows * cols;
  switch (algo) {
    case CubAlgo::kTransformAffine:
      if (d_temp == nullptr) {
        temp_bytes = 0;
        return cudaSuccess;
      }
      return cub::DeviceTransform::Transform(d_in, static_cast<float*>(d_out), n, AffineOp{},
                                             stream);
    case CubAlgo::kReduceSum:
      return cub::DeviceReduce::Sum(d_temp, temp_bytes, d_in, static_cast<float*>(d_out), n,
                                    stream);
    case CubAlgo::kSegmentedSum:
      return cub::DeviceSegmentedReduce::Sum(d_temp, temp_bytes, d_in,
                                             static_cast<float*>(d_out), rows, d_offsets,
                                             d_offsets + 1, stream);
    case CubAlgo::kInclusiveSum:
      return cub::DeviceScan::InclusiveSum(d_temp, temp_bytes, d_in, static_cast<float*>(d_out),
                                           n, stream);
    case CubAlgo::kHistogramEven:
      // int sample count: CUB's histogram offsets are 32-bit friendly and 2^28 fits.
      return cub::DeviceHistogram::HistogramEven(d_temp, temp_bytes, d_in,
                                                 static_cast<int*>(d_out), bins + 1, lo, hi,
                                                 static_cast<int>(n), stream);
  }
  return cudaErrorInvalidValue;
}

std::string CcclVersion() {
#ifdef CCCL_VERSION
  return std::to_string(CCCL_MAJOR_VERSION) + "." + std::to_string(CCCL_MINOR_VERSION) + "." +
         std::to_string(CCCL_PATCH_VERSION);
#else
  return std::to_string(CUB_VERSION);
#endif
}

std::unique_ptr<CubPeer> CubPeer::Create(CubAlgo algo, int64_t rows, int64_t cols, int bins,
                                         float lo, float hi, cudaStream_t stream,
                                         cudaError_t* error) {
  std::unique_ptr<CubPeer> p(new CubPeer());
  p->algo_ = algo;
  p->rows_ = rows;
  p->cols_ = cols;
  p->bins_ = bins;
  p->lo_ = lo;
  p->hi_ = hi;
  p->stream_ = stream;
  *error = cudaSuccess;
  if (algo == CubAlgo::kInclusiveSum && rows != 1) *error = cudaErrorInvalidValue;
  if (*error == cudaSuccess && algo == CubAlgo::kSegmentedSum) {
    std::vector<int64_t> offsets(rows + 1);
    for (int64_t r = 0; r <= rows; ++r) offsets[r] = r * cols;
    *error = cudaMalloc(&p->d_offsets_, offsets.size() * sizeof(int64_t));
    if (*error == cudaSuccess) {
      *error = cudaMemcpy(p->d_offsets_, offsets.data(), offsets.size() * sizeof(int64_t),
                          cudaMemcpyHostToDevice);
    }
  }
  if (*error == cudaSuccess) {
    *error = Dispatch(algo, nullptr, p->temp_bytes_, nullptr, nullptr, rows, cols, bins, lo, hi,
                      p->d_offsets_, stream);
  }
  if (*error == cudaSuccess) *error = cudaMalloc(&p->d_temp_, p->temp_bytes_ + 16);
  if (*error != cudaSuccess) return nullptr;
  return p;
}

CubPeer::~CubPeer() {
  cudaFree(d_temp_);
  cudaFree(d_offsets_);
}

cudaError_t CubPeer::Run(const float* d_in, void* d_out) const {
  size_t bytes = temp_bytes_;
  return Dispatch(algo_, d_temp_, bytes, d_in, d_out, rows_, cols_, bins_, lo_, hi_, d_offsets_,
                  stream_);
}

const char* CubPeer::name() const {
  switch (algo_) {
    case CubAlgo::kTransformAffine: return "cub::DeviceTransform::Transform";
    case CubAlgo::kReduceSum: return "cub::DeviceReduce::Sum";
    case CubAlgo::kSegmentedSum: return "cub::DeviceSegmentedReduce::Sum";
    case CubAlgo::kInclusiveSum: return "cub::DeviceScan::InclusiveSum";
    case CubAlgo::kHistogramEven: return "cub::DeviceHistogram::HistogramEven";
  }
  return "?";
}

}  // namespace gpupipe::bench
