// RowConvolve / RowConvolveWindow vs the CPU reference on fresh random data.
//
// Tolerance per output n: the reference sums in double, the GPU in the compute type, so
//   |gpu - ref| <= (M + 2) * eps_acc * B[n] + eps_out * B[n],   B[n] = sum_j |h_j| |x[n - j]|,
// with eps_acc = 2^-24 (float32 and float16 data) or 2^-53 (float64), and eps_out the output
// type's rounding (2^-24, 2^-53, and 2^-10 for float16: two roundings, GPU from float and
// reference from double), plus one float16 subnormal step for float16. Windows must equal one
// call bit for bit.
#include "kernels/cuda/convolve.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/convolve_reference.h"
#include "kernels/cuda/tuning/convolve_policy.h"
#include "tests/kernels/cuda/typed_test_util.h"
#include "tests/testing/param_names.h"

namespace gpupipe::kernels::cuda {
namespace {

using testing::DeviceBytes;
using testing::HostArray;

const char* ModeName(ConvolveMode m) {
  switch (m) {
    case ConvolveMode::kFull: return "full";
    case ConvolveMode::kSame: return "same";
    case ConvolveMode::kValid: return "valid";
  }
  return "?";
}

double EpsAcc(ElementType t) { return t == ElementType::kFloat64 ? 0x1p-53 : 0x1p-24; }
double EpsOut(ElementType t) {
  switch (t) {
    case ElementType::kFloat64: return 0x1p-53;
    case ElementType::kFloat16: return 0x1p-10;
    default: return 0x1p-24;
  }
}

// Below the relative bound's reach: float16 subnormal outputs differ by up to one subnormal
// step (the GPU rounds its float product first).
double EpsAbs(ElementType t) { return t == ElementType::kFloat16 ? 0x1p-24 : 1e-300; }

class ConvolveTest : public testing::TypedKernelTest {
 protected:
  HostArray Random(ElementType type, int64_t n) {
    std::uniform_real_distribution<double> dist(-1.0, 1.0);
    HostArray a(type, n);
    for (int64_t i = 0; i < n; ++i) a.Set(i, dist(rng_));
    return a;
  }
  std::vector<double> RandomTaps(int m) {
    std::uniform_real_distribution<double> dist(-1.0, 1.0);
    std::vector<double> h(static_cast<size_t>(m));
    for (double& v : h) v = dist(rng_);
    return h;
  }

  // Checks gpu[o] against the reference for outputs [out_begin + o] of one row (window w),
  // with the bound of the file comment computed from the window's input.
  void ExpectClose(const HostArray& x, const ConvolveWindow& w, const std::vector<double>& h,
                   const HostArray& gpu, int64_t gpu_offset, const std::string& what) {
    const ElementType type = x.type;
    const int m = static_cast<int>(h.size());
    HostArray ref(type, w.out_count);
    ASSERT_TRUE(cpu::RowConvolveWindow(x.data(), type, ref.data(), w, h.data(), m));
    // Bound: |x| (as float64) convolved with |h|.
    std::vector<double> ax(static_cast<size_t>(x.size()));
    for (int64_t i = 0; i < x.size(); ++i) ax[i] = std::fabs(x.Get(i));
    std::vector<double> ah(h.size());
    for (size_t j = 0; j < h.size(); ++j) ah[j] = std::fabs(h[j]);
    std::vector<double> bound(static_cast<size_t>(w.out_count));
    ASSERT_TRUE(cpu::RowConvolveWindow(ax.data(), ElementType::kFloat64, bound.data(), w,
                                       ah.data(), m));
    int reported = 0;
    for (int64_t o = 0; o < w.out_count; ++o) {
      const double g = gpu.Get(gpu_offset + o);
      const double r = ref.Get(o);
      const double tol = ((m + 2) * EpsAcc(type) + EpsOut(type)) * bound[o] + EpsAbs(type);
      if (!(std::fabs(g - r) <= tol)) {
        ADD_FAILURE() << what << ": output " << (w.out_begin + o) << " gpu " << g << " ref " << r
                      << " tol " << tol;
        if (++reported >= 5) return;
      }
    }
  }

  // One RowConvolve call on `rows` x `cols` random data; d_in and d_out start `offset` elements
  // into their buffers (any element alignment is allowed). `multiprocessors` > 0 sizes the
  // grids as for a device of that many SMs (the kernels run on this one all the same).
  void CheckRows(ElementType type, int64_t rows, int64_t cols, int m, ConvolveMode mode,
                 int64_t offset = 0, bool pdl = true, int multiprocessors = 0) {
    const std::string what = std::string(ElementTypeName(type)) + " " + std::to_string(rows) +
                             "x" + std::to_string(cols) + " taps " + std::to_string(m) + " " +
                             ModeName(mode) + " offset " + std::to_string(offset);
    SCOPED_TRACE(what);
    const size_t elem = ElementSize(type);
    const HostArray x = Random(type, rows * cols);
    const std::vector<double> h = RandomTaps(m);
    const int64_t out_len = ConvolveOutputLength(cols, m, mode);
    DeviceBytes d_in((rows * cols + offset) * elem);
    DeviceBytes d_out((rows * out_len + offset) * elem);
    ASSERT_NE(d_in.get(), nullptr);
    ASSERT_NE(d_out.get(), nullptr);
    ASSERT_CUDA_OK(Upload(d_in.get() + offset * elem, x.data(), rows * cols * elem));
    int kernels = -1;
    LaunchConfig config = Config(pdl);
    if (multiprocessors > 0) config.multiprocessors = multiprocessors;
    ASSERT_CUDA_OK(RowConvolve(d_in.get() + offset * elem, type, d_out.get() + offset * elem,
                               rows, cols, h.data(), m, mode, nullptr, 0, config, &kernels));
    EXPECT_EQ(kernels, 1);
    EXPECT_EQ(DescribeRowConvolve(rows, cols, m, mode, type, Config()).size(), 1u);
    HostArray gpu(type, rows * out_len);
    ASSERT_CUDA_OK(cudaMemcpyAsync(gpu.data(), d_out.get() + offset * elem, rows * out_len * elem,
                                   cudaMemcpyDeviceToHost, stream_));
    ASSERT_CUDA_OK(cudaStreamSynchronize(stream_));
    EXPECT_TRUE(d_out.GuardIntact(0)) << "wrote past the output";
    ConvolveWindow w;
    w.row_length = cols;
    w.in_begin = 0;
    w.in_count = cols;
    ConvolveOutputRange(cols, m, mode, &w.out_begin, &w.out_count);
    for (int64_t r = 0; r < rows; ++r) {
      HostArray xr(type, cols);
      std::memcpy(xr.data(), x.bytes.data() + r * cols * elem, cols * elem);
      ExpectClose(xr, w, h, gpu, r * out_len, what + " row " + std::to_string(r));
      if (HasFailure()) return;
    }
  }
};

constexpr ElementType kTypes[] = {ElementType::kFloat32, ElementType::kFloat64,
                                  ElementType::kFloat16};
constexpr ConvolveMode kModes[] = {ConvolveMode::kFull, ConvolveMode::kSame, ConvolveMode::kValid};

TEST_F(ConvolveTest, MatchesReferenceForEveryTypeModeAndTapCount) {
  struct Shape {
    int64_t rows, cols;
  };
  const Shape shapes[] = {{1, 1}, {1, 7}, {3, 1000}, {5, 4099}, {1, 20001}, {200, 33}};
  for (ElementType type : kTypes) {
    for (ConvolveMode mode : kModes) {
      for (int m : {1, 2, 63, 64, 1024}) {
        for (const Shape& s : shapes) {
          CheckRows(type, s.rows, s.cols, m, mode);
          if (HasFailure()) return;
        }
      }
    }
  }
}

TEST_F(ConvolveTest, UnalignedPointersAndNoPdl) {
  for (ElementType type : kTypes) {
    for (int64_t offset : {1, 3}) {
      CheckRows(type, 3, 1001, 63, ConvolveMode::kSame, offset);
      CheckRows(type, 2, 5000, 5, ConvolveMode::kFull, offset, /*pdl=*/false);
      if (HasFailure()) return;
    }
  }
}

TEST_F(ConvolveTest, ManyShortRows) {
  for (ElementType type : kTypes) {
    CheckRows(type, 4096, 3, 2, ConvolveMode::kFull);
    CheckRows(type, 1000, 17, 63, ConvolveMode::kSame);
    CheckRows(type, 3000, 1, 1, ConvolveMode::kValid);
    if (HasFailure()) return;
  }
}

// Every tap count of the short-tap kernel, so that each number of taps missing from a whole
// block (0 to kPerThread - 1) runs, in the arrangement tuning/convolve_policy.h gives it (the
// partial block last and guarded, or first: kLeadFirstLeads), on unaligned pointers too.
TEST_F(ConvolveTest, EveryTapCountOfTheShortKernelMatchesTheReference) {
  for (ElementType type : {ElementType::kFloat32, ElementType::kFloat64}) {
    for (int m = 1; m <= tuning::ConvolvePolicy::kShortMaxTaps; ++m) {
      CheckRows(type, 3, 1000, m, ConvolveMode::kSame, /*offset=*/1);
      CheckRows(type, 1, 5003, m, ConvolveMode::kFull);
      CheckRows(type, 2, 2001, m, ConvolveMode::kValid, /*offset=*/3);
      if (HasFailure()) return;
    }
  }
}

// The short-tap kernel's grid: a block a tile up to ShortTile<T>::kTileGridMaxTaps taps, the
// resident grid (blocks looping over tiles, the next one's copies in flight) above. On either
// side of the threshold the results are the reference's; with the grids sized for two SMs the
// resident grid's blocks loop over many tiles, across rows too.
TEST_F(ConvolveTest, ShortTapGridFollowsTheTapCount) {
  using tuning::ConvolvePolicy;
  const LaunchConfig config = Config();
  ASSERT_GT(config.multiprocessors, 0);
  const int64_t n = int64_t{1} << 24;  // thousands of tiles of either type
  auto blocks = [&](ElementType type, int m) {
    const std::vector<KernelLaunchInfo> plan =
        DescribeRowConvolve(1, n, m, ConvolveMode::kSame, type, config);
    return plan.size() == 1 ? plan[0].blocks : int64_t{-1};
  };
  const int f32_max = ConvolvePolicy::ShortTile<float>::kTileGridMaxTaps;
  const int64_t f32_resident =
      int64_t{config.multiprocessors} * ConvolvePolicy::ShortTile<float>::kBlocksPerSm;
  const int64_t f32_tiles = blocks(ElementType::kFloat32, 1);
  EXPECT_GT(f32_tiles, f32_resident);
  EXPECT_EQ(blocks(ElementType::kFloat32, f32_max), f32_tiles);
  if (f32_max < ConvolvePolicy::kShortMaxTaps) {
    EXPECT_EQ(blocks(ElementType::kFloat32, f32_max + 1), f32_resident);
  }
  const int f64_max = ConvolvePolicy::ShortTile<double>::kTileGridMaxTaps;
  const int64_t f64_resident =
      int64_t{config.multiprocessors} * ConvolvePolicy::ShortTile<double>::kBlocksPerSm;
  EXPECT_GT(blocks(ElementType::kFloat64, f64_max), f64_resident);
  if (f64_max < ConvolvePolicy::kShortMaxTaps) {
    EXPECT_EQ(blocks(ElementType::kFloat64, f64_max + 1), f64_resident);
  }
  for (ElementType type : {ElementType::kFloat32, ElementType::kFloat64}) {
    const int max = type == ElementType::kFloat32 ? f32_max : f64_max;
    std::vector<int> taps = {max};
    if (max < ConvolvePolicy::kShortMaxTaps) taps.push_back(max + 1);
    for (int m : taps) {
      constexpr int kTwoSms = 2;
      CheckRows(type, 3, 300001, m, ConvolveMode::kSame, /*offset=*/1, /*pdl=*/true, kTwoSms);
      CheckRows(type, 1, 200003, m, ConvolveMode::kFull, /*offset=*/0, /*pdl=*/true, kTwoSms);
      CheckRows(type, 1000, 17, m, ConvolveMode::kSame, /*offset=*/0, /*pdl=*/true, kTwoSms);
      if (HasFailure()) return;
    }
  }
}

// One row of 2^26 + 7 float32 with 63 taps, 'same': sampled stretches checked (beginning, a
// tile boundary region in the middle, the end).
TEST_F(ConvolveTest, HugeRow) {
  const ElementType type = ElementType::kFloat32;
  const int64_t n = (int64_t{1} << 26) + 7;
  const int m = 63;
  const HostArray x = Random(type, n);
  const std::vector<double> h = RandomTaps(m);
  DeviceBytes d_in(n * 4), d_out(n * 4);
  ASSERT_NE(d_in.get(), nullptr);
  ASSERT_NE(d_out.get(), nullptr);
  ASSERT_CUDA_OK(Upload(d_in.get(), x.data(), n * 4));
  ASSERT_CUDA_OK(RowConvolve(d_in.get(), type, d_out.get(), 1, n, h.data(), m,
                             ConvolveMode::kSame, nullptr, 0, Config()));
  HostArray gpu(type, n);
  ASSERT_CUDA_OK(cudaMemcpyAsync(gpu.data(), d_out.get(), n * 4, cudaMemcpyDeviceToHost, stream_));
  ASSERT_CUDA_OK(cudaStreamSynchronize(stream_));
  EXPECT_TRUE(d_out.GuardIntact());
  int64_t same_begin = 0;
  int64_t same_count = 0;
  ConvolveOutputRange(n, m, ConvolveMode::kSame, &same_begin, &same_count);
  for (int64_t start : {int64_t{0}, n / 2 - 5000, n - 20000}) {
    ConvolveWindow w;
    w.row_length = n;
    w.out_begin = same_begin + start;
    w.out_count = 20000;
    ConvolveWindowInput(n, m, w.out_begin, w.out_count, &w.in_begin, &w.in_count);
    HostArray xs(type, w.in_count);
    std::memcpy(xs.data(), x.bytes.data() + w.in_begin * 4, w.in_count * 4);
    ExpectClose(xs, w, h, gpu, start, "huge row from " + std::to_string(start));
  }
}

// The engine's chunking: a row's outputs computed in two windows (inputs with halo read in
// place, outputs written in place at arbitrary offsets) equal one call bit for bit.
class ConvolvePerTypeTest : public ConvolveTest,
                             public ::testing::WithParamInterface<ElementType> {};

TEST_P(ConvolvePerTypeTest, TwoWindowsEqualOneCall) {
  const ElementType type = GetParam();
  for (int m : {1, 2, 63, 1024}) {
    for (ConvolveMode mode : kModes) {
      const int64_t n = (int64_t{3} << 20) + 5;
      const size_t elem = ElementSize(type);
      SCOPED_TRACE(std::string(ElementTypeName(type)) + " taps " + std::to_string(m) + " " +
                   ModeName(mode));
      const HostArray x = Random(type, n);
      const std::vector<double> h = RandomTaps(m);
      int64_t b = 0;
      int64_t c = 0;
      ConvolveOutputRange(n, m, mode, &b, &c);
      DeviceBytes d_in(n * elem), d_one(c * elem), d_two(c * elem);
      ASSERT_CUDA_OK(Upload(d_in.get(), x.data(), n * elem));
      ASSERT_CUDA_OK(RowConvolve(d_in.get(), type, d_one.get(), 1, n, h.data(), m, mode,
                                 nullptr, 0, Config()));
      const int64_t split = c / 2 + 13;
      for (int part = 0; part < 2; ++part) {
        ConvolveWindow w;
        w.row_length = n;
        w.out_begin = part == 0 ? b : b + split;
        w.out_count = part == 0 ? split : c - split;
        ConvolveWindowInput(n, m, w.out_begin, w.out_count, &w.in_begin, &w.in_count);
        int kernels = -1;
        ASSERT_CUDA_OK(RowConvolveWindow(d_in.get() + w.in_begin * elem, type,
                                         d_two.get() + (w.out_begin - b) * elem, w, h.data(),
                                         m, nullptr, 0, Config(), &kernels));
        EXPECT_EQ(kernels, 1);
      }
      std::vector<unsigned char> one(c * elem), two(c * elem);
      ASSERT_CUDA_OK(cudaMemcpyAsync(one.data(), d_one.get(), c * elem, cudaMemcpyDeviceToHost,
                                     stream_));
      ASSERT_CUDA_OK(cudaMemcpyAsync(two.data(), d_two.get(), c * elem, cudaMemcpyDeviceToHost,
                                     stream_));
      ASSERT_CUDA_OK(cudaStreamSynchronize(stream_));
      ASSERT_TRUE(one == two);
      EXPECT_TRUE(d_two.GuardIntact());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, ConvolvePerTypeTest, ::testing::ValuesIn(kTypes),
                         ::gpupipe::testing::ElementTypeParamName);

TEST_F(ConvolveTest, InfinityReachesOnlyOutputsThatReadIt) {
  // A tap count that is not a multiple of the per-thread block: padding must not multiply
  // the infinity by zero.
  HostArray x(ElementType::kFloat32, 100);
  for (int64_t i = 0; i < 100; ++i) x.Set(i, 1.0);
  x.Set(50, INFINITY);
  const std::vector<double> h(7, 1.0);
  DeviceBytes d_in(400), d_out(106 * 4);
  ASSERT_CUDA_OK(Upload(d_in.get(), x.data(), 400));
  ASSERT_CUDA_OK(RowConvolve(d_in.get(), ElementType::kFloat32, d_out.get(), 1, 100, h.data(), 7,
                             ConvolveMode::kFull, nullptr, 0, Config()));
  HostArray gpu(ElementType::kFloat32, 106);
  ASSERT_CUDA_OK(cudaMemcpyAsync(gpu.data(), d_out.get(), 106 * 4, cudaMemcpyDeviceToHost,
                                 stream_));
  ASSERT_CUDA_OK(cudaStreamSynchronize(stream_));
  for (int64_t n = 0; n < 106; ++n) {
    const bool reads_inf = n >= 50 && n <= 56;
    if (reads_inf) {
      EXPECT_EQ(gpu.Get(n), INFINITY) << n;
    } else {
      EXPECT_TRUE(std::isfinite(gpu.Get(n))) << n;
    }
  }
}

TEST_F(ConvolveTest, RejectsInvalidArguments) {
  DeviceBytes d(4096);
  const double h[2] = {1, 1};
  const LaunchConfig c = Config();
  EXPECT_EQ(RowConvolve(d.get(), ElementType::kInt32, d.get() + 2048, 1, 4, h, 2,
                        ConvolveMode::kFull, nullptr, 0, c),
            cudaErrorInvalidValue);
  EXPECT_EQ(RowConvolve(d.get(), ElementType::kFloat32, d.get() + 2048, 1, 4, h, 0,
                        ConvolveMode::kFull, nullptr, 0, c),
            cudaErrorInvalidValue);
  EXPECT_EQ(RowConvolve(d.get(), ElementType::kFloat32, d.get() + 2048, 1, 4, h, 1025,
                        ConvolveMode::kFull, nullptr, 0, c),
            cudaErrorInvalidValue);
  EXPECT_EQ(RowConvolve(d.get() + 1, ElementType::kFloat32, d.get() + 2048, 1, 4, h, 2,
                        ConvolveMode::kFull, nullptr, 0, c),
            cudaErrorInvalidValue);
  LaunchConfig null_stream = c;
  null_stream.stream = nullptr;
  EXPECT_EQ(RowConvolve(d.get(), ElementType::kFloat32, d.get() + 2048, 1, 4, h, 2,
                        ConvolveMode::kFull, nullptr, 0, null_stream),
            cudaErrorInvalidValue);
  ConvolveWindow w;
  w.row_length = 10;
  w.in_begin = 2;
  w.in_count = 8;
  w.out_begin = 0;
  w.out_count = 5;  // reads elements 0 and 1, outside the window
  EXPECT_EQ(RowConvolveWindow(d.get(), ElementType::kFloat32, d.get() + 2048, w, h, 2, nullptr, 0,
                              c),
            cudaErrorInvalidValue);
  EXPECT_TRUE(DescribeRowConvolveWindow(w, 2, ElementType::kFloat32, c).empty());
}

}  // namespace
}  // namespace gpupipe::kernels::cuda
