// Helpers of the typed kernel tests (convolve, topk): host arrays of any ElementType as raw
// bytes, conversions to and from double for comparison, device buffers, and a fixture that
// skips without a CUDA device and prints its fresh random seed with every failure.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kernels/common/element_type.h"
#include "common/float16.h"
#include "kernels/cuda/ops.h"
#include "tests/testing/random_tensor.h"
#include "tests/testing/cuda_device.h"

namespace gpupipe::kernels::cuda::testing {

#define ASSERT_CUDA_OK(expr) \
  ASSERT_EQ((expr), cudaSuccess) << cudaGetErrorString(cudaGetLastError())

// `count` elements of `type` stored as bytes.
struct HostArray {
  ElementType type = ElementType::kFloat32;
  std::vector<unsigned char> bytes;

  HostArray() = default;
  HostArray(ElementType t, int64_t count)
      : type(t), bytes(static_cast<size_t>(count) * ElementSize(t)) {}
  int64_t size() const { return static_cast<int64_t>(bytes.size() / ElementSize(type)); }
  void* data() { return bytes.data(); }
  const void* data() const { return bytes.data(); }

  double Get(int64_t i) const {
    const unsigned char* p = bytes.data() + i * ElementSize(type);
    switch (type) {
      case ElementType::kFloat32: { float v; std::memcpy(&v, p, 4); return v; }
      case ElementType::kFloat64: { double v; std::memcpy(&v, p, 8); return v; }
      case ElementType::kFloat16: {
        uint16_t v;
        std::memcpy(&v, p, 2);
        return HalfToFloat(v);
      }
      case ElementType::kInt32: { int32_t v; std::memcpy(&v, p, 4); return v; }
      case ElementType::kInt64: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    }
    return 0;
  }
  // Stores v rounded to the type (to nearest even; int32 truncates).
  void Set(int64_t i, double v) {
    unsigned char* p = bytes.data() + i * ElementSize(type);
    switch (type) {
      case ElementType::kFloat32: { const float f = static_cast<float>(v); std::memcpy(p, &f, 4); return; }
      case ElementType::kFloat64: std::memcpy(p, &v, 8); return;
      case ElementType::kFloat16: {
        const uint16_t h = DoubleToHalf(v);
        std::memcpy(p, &h, 2);
        return;
      }
      case ElementType::kInt32: { const int32_t x = static_cast<int32_t>(v); std::memcpy(p, &x, 4); return; }
      case ElementType::kInt64: { const int64_t x = static_cast<int64_t>(v); std::memcpy(p, &x, 8); return; }
    }
  }
};

// Device memory of `bytes` bytes plus a guard of `guard_bytes` poisoned with 0xFF, which
// GuardIntact checks is still untouched. The poison is complete when the constructor returns:
// cudaMemset runs on the legacy stream, which does not order against the tests' non-blocking
// stream, so without the synchronization it could land after a kernel's writes.
class DeviceBytes {
 public:
  DeviceBytes(size_t bytes, size_t guard_bytes = 256) : bytes_(bytes), guard_(guard_bytes) {
    void* p = nullptr;
    if (cudaMalloc(&p, bytes + guard_bytes + 16) == cudaSuccess) {
      ptr_ = static_cast<unsigned char*>(p);
      (void)cudaMemset(ptr_, 0xFF, bytes + guard_bytes + 16);
      (void)cudaDeviceSynchronize();
    }
  }
  ~DeviceBytes() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  unsigned char* get() const { return ptr_; }
  // Guard bytes after [offset, offset + bytes()).
  bool GuardIntact(size_t offset = 0) const {
    std::vector<unsigned char> g(guard_);
    if (cudaMemcpy(g.data(), ptr_ + offset + bytes_, guard_, cudaMemcpyDeviceToHost) !=
        cudaSuccess) {
      return false;
    }
    for (unsigned char c : g) {
      if (c != 0xFF) return false;
    }
    return true;
  }
  size_t bytes() const { return bytes_; }

 private:
  unsigned char* ptr_ = nullptr;
  size_t bytes_;
  size_t guard_;
};

class TypedKernelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = gpupipe::testing::NoCudaDeviceReason()) GTEST_SKIP() << *why;
    ASSERT_CUDA_OK(cudaDeviceGetAttribute(&multiprocessors_, cudaDevAttrMultiProcessorCount, 0));
    ASSERT_CUDA_OK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    seed_ = gpupipe::testing::FreshSeed();
    rng_.seed(seed_);
    trace_.emplace(__FILE__, __LINE__, "random seed " + std::to_string(seed_) +
                                           " (replay with GPUPIPE_TEST_SEED)");
  }
  void TearDown() override {
    if (stream_ != nullptr) {
      EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
      EXPECT_EQ(cudaStreamDestroy(stream_), cudaSuccess);
    }
  }
  // Copies host data to the device, complete on return. Not cudaMemcpy: from pageable memory
  // it returns once the data is staged, before the DMA has landed, and the tests' stream is
  // non-blocking, so a kernel launched next could read the poisoned buffer.
  cudaError_t Upload(void* d_dst, const void* src, size_t bytes) {
    const cudaError_t err = cudaMemcpyAsync(d_dst, src, bytes, cudaMemcpyHostToDevice, stream_);
    return err != cudaSuccess ? err : cudaStreamSynchronize(stream_);
  }
  LaunchConfig Config(bool pdl = true) const {
    LaunchConfig c;
    c.stream = stream_;
    c.pdl = pdl;
    c.multiprocessors = multiprocessors_;
    return c;
  }

  int multiprocessors_ = 0;
  cudaStream_t stream_ = nullptr;
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
  std::optional<::testing::ScopedTrace> trace_;
};

inline std::string TypeName(ElementType t) { return ElementTypeName(t); }

}  // namespace gpupipe::kernels::cuda::testing
