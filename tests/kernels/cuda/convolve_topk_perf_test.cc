// Throughput of convolve and topk on their target shapes, printed, not asserted (disabled by
// default; run on the H200 with --gtest_also_run_disabled_tests --gtest_filter='*Perf*').
// Bytes count one read of the input and one write of the output. Peers (ANCHORS.md, same
// H200): conv1d 63 taps 'same' on 2^28 float32, 244 GB/s; torch.topk(16) on 16384 x 16384
// float32, 333 GB/s. Targets: 10x and 5x those.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "kernels/cuda/convolve.h"
#include "kernels/cuda/topk.h"
#include "tests/kernels/cuda/typed_test_util.h"

namespace gpupipe::kernels::cuda {
namespace {

using testing::DeviceBytes;

class PerfTest : public testing::TypedKernelTest {
 protected:
  // Uniform floats in [-1, 1) from a fast generator (the values matter to topk's insertions).
  std::vector<float> Floats(int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    uint64_t s = seed_ | 1;
    for (float& x : v) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      x = static_cast<float>(static_cast<int32_t>(s >> 32)) * 0x1p-31f;
    }
    return v;
  }

  // Median of `reps` timed runs of `launch` (after one warm-up), in milliseconds.
  template <typename Launch>
  float MedianMs(Launch&& launch, int reps = 15) {
    cudaEvent_t start, stop;
    EXPECT_EQ(cudaEventCreate(&start), cudaSuccess);
    EXPECT_EQ(cudaEventCreate(&stop), cudaSuccess);
    EXPECT_EQ(launch(), cudaSuccess);
    std::vector<float> ms;
    for (int i = 0; i < reps; ++i) {
      EXPECT_EQ(cudaEventRecord(start, stream_), cudaSuccess);
      EXPECT_EQ(launch(), cudaSuccess);
      EXPECT_EQ(cudaEventRecord(stop, stream_), cudaSuccess);
      EXPECT_EQ(cudaEventSynchronize(stop), cudaSuccess);
      float t = 0;
      EXPECT_EQ(cudaEventElapsedTime(&t, start, stop), cudaSuccess);
      ms.push_back(t);
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }
};

TEST_F(PerfTest, DISABLED_ConvolveSame63TapsOneRowOf2To28) {
  const int64_t n = int64_t{1} << 28;
  const std::vector<float> x = Floats(n);
  std::vector<double> h(63);
  for (int j = 0; j < 63; ++j) h[j] = 1.0 / (j + 1);
  DeviceBytes d_in(n * 4), d_out(n * 4);
  ASSERT_CUDA_OK(Upload(d_in.get(), x.data(), n * 4));
  for (ElementType type : {ElementType::kFloat32, ElementType::kFloat16}) {
    const int64_t elems = type == ElementType::kFloat32 ? n : n * 2;  // same bytes
    const float ms = MedianMs([&] {
      return RowConvolve(d_in.get(), type, d_out.get(), 1, elems, h.data(), 63,
                         ConvolveMode::kSame, nullptr, 0, Config());
    });
    const double gbs = 2.0 * n * 4 / (ms * 1e-3) / 1e9;
    std::printf("convolve %s 63 taps same, %lld elements: %.3f ms, %.0f GB/s (%.1fx conv1d)\n",
                ElementTypeName(type), static_cast<long long>(elems), ms, gbs, gbs / 244.0);
  }
  for (int m : {1, 2, 64, 1024}) {
    const std::vector<double> hm(m, 0.5);
    const float ms = MedianMs([&] {
      return RowConvolve(d_in.get(), ElementType::kFloat32, d_out.get(), 1, n - 1024, hm.data(),
                         m, ConvolveMode::kValid, nullptr, 0, Config());
    }, 5);
    std::printf("convolve float32 %d taps valid, 2^28 elements: %.3f ms, %.0f GB/s\n", m, ms,
                2.0 * n * 4 / (ms * 1e-3) / 1e9);
  }
}

TEST_F(PerfTest, DISABLED_Topk16Rows16384x16384) {
  const int64_t rows = 16384;
  const int64_t cols = 16384;
  const std::vector<float> x = Floats(rows * cols);
  DeviceBytes d_in(rows * cols * 4), d_out(rows * 1024 * 4);
  ASSERT_CUDA_OK(Upload(d_in.get(), x.data(), rows * cols * 4));
  for (int k : {1, 16, 32, 33, 1024}) {
    const size_t ws = RowTopkWorkspaceBytes(rows, cols, k, ElementType::kFloat32);
    DeviceBytes d_ws(ws);
    const float ms = MedianMs([&] {
      return RowTopk(d_in.get(), ElementType::kFloat32, d_out.get(), rows, cols, k, d_ws.get(),
                     ws, Config());
    }, k > 32 ? 3 : 15);
    const double gbs = static_cast<double>(rows) * cols * 4 / (ms * 1e-3) / 1e9;
    std::printf("topk(%d) float32 16384 x 16384: %.3f ms, %.0f GB/s (%.1fx torch.topk(16))\n", k,
                ms, gbs, gbs / 333.0);
  }
  // One long row goes through the split path.
  for (int k : {16, 1024}) {
    const int64_t n = rows * cols;
    const size_t ws = RowTopkWorkspaceBytes(1, n, k, ElementType::kFloat32);
    DeviceBytes d_ws(ws);
    const float ms = MedianMs([&] {
      return RowTopk(d_in.get(), ElementType::kFloat32, d_out.get(), 1, n, k, d_ws.get(), ws,
                     Config());
    }, 5);
    std::printf("topk(%d) float32 one row of 2^28: %.3f ms, %.0f GB/s\n", k, ms,
                static_cast<double>(n) * 4 / (ms * 1e-3) / 1e9);
  }
}

}  // namespace
}  // namespace gpupipe::kernels::cuda
