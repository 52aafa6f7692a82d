// DeviceCaps against the device and the build, and the kernels' gating by it: sm_90 paths run
// where the code has them and are refused (explicit) or avoided (auto) where it has not. A
// build that carries only compute_80 PTX, JIT-compiled on an sm_90 device, takes the second
// branches; the usual build the first.
#include "kernels/cuda/device_caps.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "kernels/cuda/ops.h"
#include "tests/testing/cuda_device.h"
#include "tests/testing/random_tensor.h"

namespace gpupipe::kernels::cuda {
namespace {

class DeviceCapsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = gpupipe::testing::NoCudaDeviceReason()) GTEST_SKIP() << *why;
    ASSERT_EQ(cudaGetDevice(&device_), cudaSuccess);
    ASSERT_EQ(QueryDeviceCaps(device_, &caps_), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) EXPECT_EQ(cudaStreamDestroy(stream_), cudaSuccess);
  }

  int device_ = 0;
  DeviceCaps caps_;
  cudaStream_t stream_ = nullptr;
};

TEST_F(DeviceCapsTest, MatchTheDeviceAndTheLoadedCode) {
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDeviceProperties(&prop, device_), cudaSuccess);
  EXPECT_EQ(caps_.compute_capability, prop.major * 10 + prop.minor);
  EXPECT_EQ(caps_.multiprocessors, prop.multiProcessorCount);
  EXPECT_EQ(caps_.max_smem_per_block, static_cast<int>(prop.sharedMemPerBlockOptin));
  // The loaded code was compiled from PTX no newer than its SASS, and SASS no newer than the
  // device.
  EXPECT_GE(caps_.ptx_arch, 50);
  EXPECT_LE(caps_.ptx_arch, caps_.binary_arch);
  EXPECT_LE(caps_.binary_arch, caps_.compute_capability);
  EXPECT_EQ(caps_.feature_arch(), std::min(caps_.ptx_arch, caps_.compute_capability));
  EXPECT_EQ(caps_.bulk_copy(), caps_.feature_arch() >= 90);
  EXPECT_EQ(caps_.pdl(), caps_.feature_arch() >= 90);
  // The cached copy is the same.
  EXPECT_EQ(CurrentDeviceCaps().feature_arch(), caps_.feature_arch());
  EXPECT_EQ(CurrentDeviceCaps().max_smem_per_block, caps_.max_smem_per_block);
  EXPECT_FALSE(std::string(BuiltCudaArchitectures()).empty());
  std::cout << "device sm_" << caps_.compute_capability << ", code: PTX " << caps_.ptx_arch
            << ", SASS " << caps_.binary_arch << ", built for " << BuiltCudaArchitectures()
            << ", bulk copies " << caps_.bulk_copy() << ", pdl " << caps_.pdl() << "\n";
}

TEST_F(DeviceCapsTest, BulkStagingRunsOnlyWhereTheCodeHasIt) {
  const int64_t n = (int64_t{1} << 20) + 3;
  const std::vector<float> in = gpupipe::testing::RandomFloats(n, gpupipe::testing::FreshSeed());
  float* d_in = nullptr;
  float* d_out = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d_in), n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d_out), n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d_in, in.data(), n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(d_out, 0, n * sizeof(float)), cudaSuccess);
  // cudaMemset runs on the legacy stream, asynchronously to the host: without this it may run
  // after the kernel on the non-blocking stream_ and clear its result.
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EwProgram program;
  program.Append({EwOpcode::kAffine, 2.0, 1.0});
  LaunchConfig config;
  config.stream = stream_;
  config.staging = Staging::kBulk;
  int kernels = -1;
  const cudaError_t err =
      Elementwise(d_in, ElementType::kFloat32, d_out, n, program, config, &kernels);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  std::vector<float> out(n);
  ASSERT_EQ(cudaMemcpy(out.data(), d_out, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  if (caps_.bulk_copy()) {
    EXPECT_EQ(err, cudaSuccess);
    EXPECT_EQ(kernels, 1);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], in[i] * 2.0f + 1.0f) << i;
  } else {
    EXPECT_EQ(err, cudaErrorNotSupported);
    EXPECT_EQ(kernels, 0);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], 0.0f) << i;  // nothing ran
  }
  // auto never picks bulk where the code lacks it, and describes what it launches.
  config.staging = Staging::kAuto;
  const std::vector<KernelLaunchInfo> launches =
      DescribeElementwise(n, ElementType::kFloat32, config);
  ASSERT_EQ(launches.size(), 1u);
  if (!caps_.bulk_copy()) EXPECT_NE(std::string(launches[0].name), "elementwise.bulk");
  EXPECT_EQ(Elementwise(d_in, ElementType::kFloat32, d_out, n, program, config), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(out.data(), d_out, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], in[i] * 2.0f + 1.0f) << i;
  cudaFree(d_in);
  cudaFree(d_out);
}

// A device that gives a block less shared memory than the shared-memory row path wants takes
// the two-kernel path, with the same results: modelled here with a smaller
// max_smem_per_block on this device.
TEST_F(DeviceCapsTest, SmallSharedMemoryTakesTheTwoKernelRowPath) {
  // Enough rows that none is split across blocks (a split row is never a shared-memory row).
  const int64_t rows = 8 * caps_.multiprocessors, cols = 20000;  // 80 KB float32 rows
  const std::vector<float> in =
      gpupipe::testing::RandomFloats(rows * cols, gpupipe::testing::FreshSeed());
  float* d_in = nullptr;
  float* d_out = nullptr;
  void* d_ws = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d_in), in.size() * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d_out), in.size() * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_ws, RowOpsWorkspaceBytes()), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d_in, in.data(), in.size() * sizeof(float), cudaMemcpyHostToDevice),
            cudaSuccess);
  std::vector<std::vector<float>> outs;
  std::vector<std::string> first_kernels;
  for (int smem : {caps_.max_smem_per_block, 99 << 10, 48 << 10}) {
    LaunchConfig config;
    config.stream = stream_;
    config.staging = Staging::kDirect;
    config.max_smem_per_block = smem;
    int kernels = 0;
    ASSERT_EQ(RowSoftmax(d_in, ElementType::kFloat32, d_out, rows, cols, EwProgram{}, d_ws,
                         RowOpsWorkspaceBytes(), config, &kernels),
              cudaSuccess)
        << smem;
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    const std::vector<KernelLaunchInfo> launches =
        DescribeRowSoftmax(rows, cols, ElementType::kFloat32, config);
    EXPECT_EQ(launches.size(), static_cast<size_t>(kernels)) << smem;
    first_kernels.push_back(launches.empty() ? "" : launches[0].name);
    outs.emplace_back(in.size());
    ASSERT_EQ(
        cudaMemcpy(outs.back().data(), d_out, in.size() * sizeof(float), cudaMemcpyDeviceToHost),
        cudaSuccess);
  }
  // 80 KB rows fit the full device (one kernel) but not 48 KiB (two kernels).
  EXPECT_EQ(first_kernels[0], "softmax.rows");
  EXPECT_EQ(first_kernels[2], "softmax.stats");
  for (size_t k = 1; k < outs.size(); ++k) {
    for (size_t i = 0; i < in.size(); i += 97) {
      ASSERT_NEAR(outs[k][i], outs[0][i], 1e-6f * std::max(1.0f, std::abs(outs[0][i])))
          << "smem config " << k << " element " << i;
    }
  }
  cudaFree(d_in);
  cudaFree(d_out);
  cudaFree(d_ws);
}

}  // namespace
}  // namespace gpupipe::kernels::cuda
