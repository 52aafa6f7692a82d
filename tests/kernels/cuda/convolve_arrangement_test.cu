// Both tap arrangements of the short-tap convolution kernel (detail::TapArrangement), whichever
// the policy picks for a tap count: at every tap count of both types, each output is bit for
// bit what a CPU reference gives that sums the products in tap order with fma, so the two
// arrangements agree with each other and with the kernel's rule that a row computed in several
// windows equals one call. Random data, the three modes, pointers off 16-byte alignment, a block
// a tile and the resident grid whose blocks loop over tiles across rows.
//
// The kernel file is included, not linked, to reach its internal launcher; this test is a
// program of its own for that reason.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/convolve_short.cu"
#include "tests/testing/cuda_device.h"

namespace gpupipe::kernels::cuda::detail {
namespace {

// Each output o of row r: the sum over k = 0 .. m - 1, in that order, of taps[m - 1 - k] times
// x[o - (m - 1) + k] (zero outside the row), each step one fma in T.
template <typename T>
std::vector<T> TapOrderReference(const std::vector<T>& x, int64_t cols, const ConvGeometry& g,
                                 const std::vector<double>& taps) {
  const int m = g.taps;
  std::vector<T> y(static_cast<size_t>(g.rows * g.window.out_count));
  for (int64_t r = 0; r < g.rows; ++r) {
    for (int64_t i = 0; i < g.window.out_count; ++i) {
      const int64_t o = g.window.out_begin + i;
      T acc = T(0);
      for (int k = 0; k < m; ++k) {
        const int64_t at = o - (m - 1) + k;
        const T xv = at >= 0 && at < cols ? x[static_cast<size_t>(r * cols + at)] : T(0);
        acc = std::fma(static_cast<T>(taps[static_cast<size_t>(m - 1 - k)]), xv, acc);
      }
      y[static_cast<size_t>(r * g.window.out_count + i)] = acc;
    }
  }
  return y;
}

class ConvolveArrangementTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = gpupipe::testing::NoCudaDeviceReason()) GTEST_SKIP() << *why;
    cudaDeviceProp prop{};
    ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
    multiprocessors_ = prop.multiProcessorCount;
  }

  // One launch of `arrangement` on rows x cols random data, d_in and d_out `offset` elements
  // into their buffers, grids sized for `multiprocessors`; every output against the reference.
  template <typename T>
  void Check(int64_t rows, int64_t cols, int m, ConvolveMode mode, int64_t offset,
             int multiprocessors, TapArrangement arrangement) {
    SCOPED_TRACE(std::string(sizeof(T) == 4 ? "float32" : "float64") + " " +
                 std::to_string(rows) + "x" + std::to_string(cols) + " taps " +
                 std::to_string(m) + " mode " + std::to_string(static_cast<int>(mode)) +
                 " offset " + std::to_string(offset) + " SMs " +
                 std::to_string(multiprocessors) +
                 (arrangement == TapArrangement::kLeadFirst ? " lead-first" : " guarded-last"));
    ConvGeometry g;
    ASSERT_TRUE(RowGeometry(rows, cols, m, mode, &g));
    const int64_t outs = g.rows * g.window.out_count;
    if (outs <= 0) return;
    std::uniform_real_distribution<double> uniform(-1, 1);
    std::vector<double> taps(static_cast<size_t>(m));
    for (double& t : taps) t = uniform(rng_);
    std::vector<T> x(static_cast<size_t>(rows * cols));
    for (T& v : x) v = static_cast<T>(uniform(rng_));
    const std::vector<T> ref = TapOrderReference(x, cols, g, taps);
    T* d_in = nullptr;
    T* d_out = nullptr;
    ASSERT_EQ(cudaMalloc(&d_in, (x.size() + offset) * sizeof(T)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_out, (outs + offset) * sizeof(T)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_in + offset, x.data(), x.size() * sizeof(T), cudaMemcpyHostToDevice),
              cudaSuccess);
    ASSERT_EQ(cudaMemset(d_out, 0xff, (outs + offset) * sizeof(T)), cudaSuccess);
    LaunchConfig config;
    config.multiprocessors = multiprocessors;
    config.pdl = true;
    Launcher launch(config, static_cast<int*>(nullptr));
    ASSERT_EQ(LaunchArranged<T>(d_in + offset, d_out + offset, g, taps.data(), launch,
                                arrangement),
              cudaSuccess);
    std::vector<T> y(static_cast<size_t>(outs));
    ASSERT_EQ(cudaMemcpy(y.data(), d_out + offset, outs * sizeof(T), cudaMemcpyDeviceToHost),
              cudaSuccess);
    cudaFree(d_in);
    cudaFree(d_out);
    int reported = 0;
    for (int64_t i = 0; i < outs && reported < 5; ++i) {
      if (std::memcmp(&y[static_cast<size_t>(i)], &ref[static_cast<size_t>(i)], sizeof(T)) != 0) {
        ADD_FAILURE() << "output " << i << ": gpu " << y[static_cast<size_t>(i)] << ", reference "
                      << ref[static_cast<size_t>(i)];
        ++reported;
      }
    }
  }

  template <typename T>
  void CheckEveryTapCount() {
    const ConvolveMode modes[] = {ConvolveMode::kFull, ConvolveMode::kSame, ConvolveMode::kValid};
    for (int m = 1; m <= kShortConvolveTaps; ++m) {
      for (TapArrangement a : {TapArrangement::kGuardedLast, TapArrangement::kLeadFirst}) {
        for (ConvolveMode mode : modes) {
          Check<T>(3, 1000, m, mode, /*offset=*/1, multiprocessors_, a);
          Check<T>(1, 7, m, mode, /*offset=*/0, multiprocessors_, a);
        }
        Check<T>(200, 33, m, ConvolveMode::kFull, /*offset=*/3, multiprocessors_, a);
        Check<T>(1, 5003, m, ConvolveMode::kSame, /*offset=*/0, multiprocessors_, a);
        // Two SMs' worth of resident blocks for 40 rows of a tile or two each: every block
        // loops over tiles, across rows (the resident grid is the one above kTileGridMaxTaps).
        Check<T>(40, 2500, m, ConvolveMode::kSame, /*offset=*/1, /*multiprocessors=*/2, a);
        if (HasFailure()) return;
      }
    }
  }

  std::mt19937_64 rng_{std::random_device{}()};
  int multiprocessors_ = 0;
};

TEST_F(ConvolveArrangementTest, BothArrangementsSumInTapOrderAtEveryFloat32TapCount) {
  CheckEveryTapCount<float>();
}

TEST_F(ConvolveArrangementTest, BothArrangementsSumInTapOrderAtEveryFloat64TapCount) {
  CheckEveryTapCount<double>();
}

}  // namespace
}  // namespace gpupipe::kernels::cuda::detail
