// RowCumsum and RowHistogram vs the CPU references, every input type, on fresh random data
// (the seed is printed with every failure; GPUPIPE_TEST_SEED replays it).
//
// What is compared, and how exactly:
//  - cumsum on integer-valued data (small integers, any float type) is bit-exact: every partial
//    sum the kernels form (thread, warp, block, tile aggregates, look-back prefixes, carries) is
//    an integer far below 2^24, so float accumulation is exact and both sides round the same
//    value to the output type. This catches any tile or carry that is dropped or counted twice.
//  - cumsum on real-valued data: |gpu - ref| <= 64 * eps(acc) * sum_{j<=i} |x_j| (float32 and
//    float16 accumulate in float, eps = 2^-24; float64 in double, eps = 2^-53), plus for float16
//    output one float16 ulp, 2^-10 * |ref| (the float and double sums may round to neighbouring
//    float16 values).
//  - int32 cumsum (int64 output) and every histogram: exact. The histogram's bin placement is one
//    function shared by both sides (kernels/common/histogram_bin.h).
//  - Elements past the end of each output stay untouched (a poisoned guard).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cumsum_reference.h"
#include "common/float16.h"
#include "kernels/cpu/histogram_reference.h"
#include "kernels/cuda/cumsum.h"
#include "kernels/cuda/histogram.h"
#include "tests/testing/random_tensor.h"
#include "tests/testing/cuda_device.h"
#include "tests/testing/param_names.h"

namespace gpupipe::kernels::cuda {
namespace {

#define ASSERT_CUDA(expr) ASSERT_EQ((expr), cudaSuccess) << cudaGetErrorString(cudaGetLastError())

constexpr size_t kGuardBytes = 256;

const ElementType kTypes[] = {ElementType::kFloat32, ElementType::kFloat64,
                              ElementType::kFloat16, ElementType::kInt32};

size_t OutSize(ElementType t) { return t == ElementType::kInt32 ? 8 : ElementSize(t); }

class DeviceBytes {
 public:
  explicit DeviceBytes(size_t bytes) : bytes_(bytes) {
    if (cudaMalloc(&ptr_, bytes ? bytes : 16) != cudaSuccess) ptr_ = nullptr;
  }
  ~DeviceBytes() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  char* get() const { return static_cast<char*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_;
};

// Host values as doubles, for tolerances.
double ValueAt(const std::vector<char>& v, ElementType t, int64_t i) {
  switch (t) {
    case ElementType::kFloat32: { float f; std::memcpy(&f, v.data() + 4 * i, 4); return f; }
    case ElementType::kFloat64: { double d; std::memcpy(&d, v.data() + 8 * i, 8); return d; }
    case ElementType::kFloat16: {
      uint16_t h; std::memcpy(&h, v.data() + 2 * i, 2); return HalfToFloat(h);
    }
    case ElementType::kInt32: { int32_t x; std::memcpy(&x, v.data() + 4 * i, 4); return x; }
    case ElementType::kInt64: { int64_t x; std::memcpy(&x, v.data() + 8 * i, 8); return double(x); }
  }
  return 0;
}

// n random elements of type t: small integers (integral = true) or uniform reals in [lo, hi].
std::vector<char> RandomData(ElementType t, int64_t n, uint64_t seed, bool integral,
                             double lo = -4, double hi = 4) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> real(lo, hi);
  std::uniform_int_distribution<int> small(-3, 3);
  std::vector<char> v(static_cast<size_t>(n) * ElementSize(t));
  for (int64_t i = 0; i < n; ++i) {
    const double x = integral ? small(rng) : real(rng);
    switch (t) {
      case ElementType::kFloat32: { const float f = float(x); std::memcpy(&v[4 * i], &f, 4); break; }
      case ElementType::kFloat64: std::memcpy(&v[8 * i], &x, 8); break;
      case ElementType::kFloat16: {
        const uint16_t h = FloatToHalf(float(x));
        std::memcpy(&v[2 * i], &h, 2);
        break;
      }
      case ElementType::kInt32: {
        const int32_t k = integral ? int32_t(x) : int32_t(std::llround(x * 1e6));
        std::memcpy(&v[4 * i], &k, 4);
        break;
      }
      case ElementType::kInt64: break;
    }
  }
  return v;
}

class CumsumHistogramTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = gpupipe::testing::NoCudaDeviceReason()) GTEST_SKIP() << *why;
    ASSERT_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    int mp = 0;
    ASSERT_CUDA(cudaDeviceGetAttribute(&mp, cudaDevAttrMultiProcessorCount, 0));
    config_.stream = stream_;
    config_.multiprocessors = mp;
    seed_ = gpupipe::testing::FreshSeed();
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  std::string Trace(ElementType t, int64_t rows, int64_t cols) const {
    return std::string("seed ") + std::to_string(seed_) + " type " + ElementTypeName(t) + " " +
           std::to_string(rows) + "x" + std::to_string(cols) + " pdl " +
           std::to_string(config_.pdl);
  }

  // Runs RowCumsum twice (the second run checks that the look-back state is reset inside the
  // op) with input at element offset `offset` (misaligned vectors), and compares with the CPU.
  void CheckCumsum(ElementType t, int64_t rows, int64_t cols, bool integral, int64_t offset = 0) {
    SCOPED_TRACE(Trace(t, rows, cols) + " integral " + std::to_string(integral) + " offset " +
                 std::to_string(offset));
    const int64_t n = rows * cols;
    const std::vector<char> x = RandomData(t, n, seed_ ^ static_cast<uint64_t>(n), integral);
    std::vector<char> want(static_cast<size_t>(n) * OutSize(t));
    ASSERT_TRUE(cpu::RowCumsum(x.data(), t, want.data(), rows, cols));

    const size_t in_off = static_cast<size_t>(offset) * ElementSize(t);
    const size_t out_off = static_cast<size_t>(offset) * OutSize(t);
    DeviceBytes d_in(x.size() + in_off);
    DeviceBytes d_out(want.size() + out_off + kGuardBytes);
    const size_t ws_bytes = RowCumsumWorkspaceBytes(rows, cols);
    DeviceBytes d_ws(ws_bytes);
    ASSERT_NE(d_in.get(), nullptr);
    ASSERT_NE(d_out.get(), nullptr);
    ASSERT_CUDA(cudaMemcpy(d_in.get() + in_off, x.data(), x.size(), cudaMemcpyHostToDevice));
    ASSERT_CUDA(cudaDeviceSynchronize());  // legacy-stream copy/set: order it before work on stream_
    ASSERT_CUDA(cudaMemset(d_out.get(), 0xFF, d_out.bytes()));
    ASSERT_CUDA(cudaDeviceSynchronize());  // legacy-stream copy/set: order it before work on stream_
    ASSERT_CUDA(cudaMemset(d_ws.get(), 0xAB, ws_bytes ? ws_bytes : 16));
    ASSERT_CUDA(cudaDeviceSynchronize());  // legacy-stream copy/set: order it before work on stream_  // garbage state
    for (int run = 0; run < 2; ++run) {
      int kernels = 0;
      ASSERT_CUDA(RowCumsum(d_in.get() + in_off, t, d_out.get() + out_off, rows, cols, nullptr,
                            d_ws.get(), ws_bytes, config_, &kernels));
      EXPECT_EQ(static_cast<size_t>(kernels), DescribeRowCumsum(t, rows, cols, config_).size());
    }
    ASSERT_CUDA(cudaStreamSynchronize(stream_));
    std::vector<char> got(d_out.bytes());
    ASSERT_CUDA(cudaMemcpy(got.data(), d_out.get(), got.size(), cudaMemcpyDeviceToHost));
    for (size_t i = out_off + want.size(); i < got.size(); ++i) {
      ASSERT_EQ(static_cast<unsigned char>(got[i]), 0xFF) << "guard byte " << i << " written";
    }
    got.erase(got.begin(), got.begin() + static_cast<std::ptrdiff_t>(out_off));
    got.resize(want.size());
    CompareCumsum(t, rows, cols, x, want, got, integral);
  }

  static void CompareCumsum(ElementType t, int64_t rows, int64_t cols, const std::vector<char>& x,
                            const std::vector<char>& want, const std::vector<char>& got,
                            bool integral) {
    if (integral || t == ElementType::kInt32) {
      if (want == got) return;
      for (int64_t i = 0; i < rows * cols; ++i) {
        const ElementType out_t = t == ElementType::kInt32 ? ElementType::kInt64 : t;
        ASSERT_EQ(ValueAt(got, out_t, i), ValueAt(want, out_t, i))
            << "row " << i / cols << " col " << i % cols;
      }
      return;
    }
    const double eps = t == ElementType::kFloat64 ? std::ldexp(1.0, -53) : std::ldexp(1.0, -24);
    for (int64_t r = 0; r < rows; ++r) {
      double abs_prefix = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t i = r * cols + c;
        abs_prefix += std::fabs(ValueAt(x, t, i));
        const double w = ValueAt(want, t, i);
        const double g = ValueAt(got, t, i);
        double tol = 64 * eps * abs_prefix;
        if (t == ElementType::kFloat16) tol += std::ldexp(std::fabs(w), -10);
        ASSERT_LE(std::fabs(g - w), tol) << "row " << r << " col " << c << " got " << g
                                         << " want " << w;
      }
    }
  }

  // np.histogram per row; values around and on the edges, NaN and infinities mixed in.
  void CheckHistogram(ElementType t, int64_t rows, int64_t cols, int32_t bins, double lo,
                      double hi, int64_t offset = 0) {
    SCOPED_TRACE(Trace(t, rows, cols) + " bins " + std::to_string(bins) + " offset " +
                 std::to_string(offset));
    const int64_t n = rows * cols;
    const double margin = (hi - lo) * 0.05;
    std::vector<char> x = RandomData(t, n, seed_ ^ static_cast<uint64_t>(n * 31 + bins), false,
                                     lo - margin, hi + margin);
    if (t == ElementType::kInt32) {
      x = RandomData(t, 0, 0, true);
      x.resize(static_cast<size_t>(n) * 4);
      std::mt19937_64 rng(seed_ + 7);
      std::uniform_int_distribution<int64_t> d(static_cast<int64_t>(std::floor(lo - margin)) - 1,
                                               static_cast<int64_t>(std::ceil(hi + margin)) + 1);
      for (int64_t i = 0; i < n; ++i) {
        const auto k = static_cast<int32_t>(d(rng));
        std::memcpy(&x[4 * i], &k, 4);
      }
    } else {
      // Every 97th value: an edge, lo, hi, NaN or an infinity, as the input type holds it.
      const double step = (hi - lo) / bins;
      std::mt19937_64 rng(seed_ + 11);
      for (int64_t i = 0; i < n; i += 97) {
        double v;
        switch (rng() % 6) {
          case 0: v = lo; break;
          case 1: v = hi; break;
          case 2: v = std::nan(""); break;
          case 3: v = (rng() & 1) ? INFINITY : -INFINITY; break;
          default: v = static_cast<double>(rng() % (bins + 1)) * step + lo; break;
        }
        if (t == ElementType::kFloat32) { const float f = float(v); std::memcpy(&x[4 * i], &f, 4); }
        if (t == ElementType::kFloat64) std::memcpy(&x[8 * i], &v, 8);
        if (t == ElementType::kFloat16) {
          const uint16_t h = FloatToHalf(float(v));
          std::memcpy(&x[2 * i], &h, 2);
        }
      }
    }
    CheckHistogramOf(x, t, rows, cols, bins, lo, hi, offset);
  }

  // Counts `x` (rows x cols of type t) on the device and compares with the CPU reference.
  void CheckHistogramOf(const std::vector<char>& x, ElementType t, int64_t rows, int64_t cols,
                        int32_t bins, double lo, double hi, int64_t offset = 0) {
    std::vector<int64_t> want(static_cast<size_t>(rows) * bins);
    ASSERT_TRUE(cpu::RowHistogram(x.data(), t, want.data(), rows, cols, bins, lo, hi, false));

    const size_t in_off = static_cast<size_t>(offset) * ElementSize(t);
    DeviceBytes d_in(x.size() + in_off);
    const size_t count_bytes = want.size() * sizeof(int64_t);
    DeviceBytes d_counts(count_bytes + kGuardBytes);
    ASSERT_CUDA(cudaMemcpy(d_in.get() + in_off, x.data(), x.size(), cudaMemcpyHostToDevice));
    ASSERT_CUDA(cudaDeviceSynchronize());  // legacy-stream copy/set: order it before work on stream_
    ASSERT_CUDA(cudaMemset(d_counts.get(), 0xFF, d_counts.bytes()));
    ASSERT_CUDA(cudaDeviceSynchronize());  // legacy-stream copy/set: order it before work on stream_
    auto* counts = reinterpret_cast<int64_t*>(d_counts.get());
    for (int run = 0; run < 2; ++run) {  // overwriting: the second run gives the same counts
      int kernels = 0;
      ASSERT_CUDA(RowHistogram(d_in.get() + in_off, t, counts, rows, cols, bins, lo, hi, false,
                               nullptr, 0, config_, &kernels));
      EXPECT_EQ(static_cast<size_t>(kernels),
                DescribeRowHistogram(t, rows, cols, bins, false, config_).size());
    }
    ASSERT_CUDA(cudaStreamSynchronize(stream_));
    std::vector<char> got(d_counts.bytes());
    ASSERT_CUDA(cudaMemcpy(got.data(), d_counts.get(), got.size(), cudaMemcpyDeviceToHost));
    for (size_t i = count_bytes; i < got.size(); ++i) {
      ASSERT_EQ(static_cast<unsigned char>(got[i]), 0xFF) << "guard byte " << i << " written";
    }
    std::vector<int64_t> got_counts(want.size());
    std::memcpy(got_counts.data(), got.data(), count_bytes);
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(got_counts[i], want[i]) << "row " << i / bins << " bin " << i % bins;
    }
  }

  cudaStream_t stream_ = nullptr;
  LaunchConfig config_;
  uint64_t seed_ = 0;
};

// The checks that loop over shapes and paths run once per type, each a separate gtest, so
// compute-sanitizer runs can shard them.
class CumsumHistogramPerTypeTest : public CumsumHistogramTest,
                                   public ::testing::WithParamInterface<ElementType> {};

// ---- cumsum -----------------------------------------------------------------------------------

TEST_P(CumsumHistogramPerTypeTest, CumsumEdgeShapes) {
  const std::vector<std::pair<int64_t, int64_t>> shapes = {
      {1, 1}, {1, 7}, {3, 1}, {1, 255}, {1, 257}, {1, 2048}, {1, 2049}, {2, 4095},
      {1, 4097}, {5, 8193}, {3, 12289}, {17, 3001}, {1000, 1}, {100001, 33}, {600, 2100},
      {700, 5003}, {7, 100003}, {2, 8192}, {1, 16385}, {3, 270000}};
  const ElementType t = GetParam();
  for (auto [rows, cols] : shapes) {
    for (bool pdl : {true, false}) {
      config_.pdl = pdl;
      CheckCumsum(t, rows, cols, /*integral=*/true);
      CheckCumsum(t, rows, cols, /*integral=*/false);
    }
  }
}

TEST_P(CumsumHistogramPerTypeTest, CumsumMisalignedInputAndOutput) {
  const ElementType t = GetParam();
  for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 10001}, {9, 4099}, {2000, 2051}, {300, 100}}) {
    CheckCumsum(t, rows, cols, true, /*offset=*/1);
    CheckCumsum(t, rows, cols, true, /*offset=*/3);
  }
}

TEST_F(CumsumHistogramTest, CumsumOneLongRow) {
  // 2^26 + 7 elements: 8193 look-back tiles, the last one partial.
  const int64_t n = (int64_t{1} << 26) + 7;
  for (ElementType t : kTypes) {
    CheckCumsum(t, 1, n, /*integral=*/true);
  }
  CheckCumsum(ElementType::kFloat32, 1, n, /*integral=*/false);
  CheckCumsum(ElementType::kFloat64, 1, n, /*integral=*/false);
}

// Few multiprocessors for many look-back tiles: each block takes tile after tile, across row
// boundaries, and a single block takes them all.
TEST_P(CumsumHistogramPerTypeTest, CumsumFewBlocksManyTiles) {
  const ElementType t = GetParam();
  for (auto [mp, rows, cols] : std::vector<std::tuple<int, int64_t, int64_t>>{
           {1, 1, 100003}, {1, 3, 30001}, {2, 7, 20001}, {2, 5, 50000}, {5, 19, 9000}}) {
    config_.multiprocessors = mp;
    SCOPED_TRACE("multiprocessors " + std::to_string(mp));
    CheckCumsum(t, rows, cols, /*integral=*/true);
  }
}

TEST_F(CumsumHistogramTest, CumsumManyLongRows) {
  CheckCumsum(ElementType::kFloat32, 2048, 16384, true);
  CheckCumsum(ElementType::kInt32, 1024, 16384, true);
}

// Scanning each row in two pieces with one carry per row equals scanning it whole.
TEST_P(CumsumHistogramPerTypeTest, CumsumCarryChainsTwoPieces) {
  const ElementType t = GetParam();
  for (auto [rows, cols, split] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {1, 1000003, 500001}, {3, 20011, 7}, {1, 9, 4}, {700, 5000, 2500},
           {1000, 300, 123}}) {
    SCOPED_TRACE(Trace(t, rows, cols) + " split " + std::to_string(split));
    const int64_t n = rows * cols;
    const std::vector<char> x = RandomData(t, n, seed_ + 3, /*integral=*/true);
    std::vector<char> want(static_cast<size_t>(n) * OutSize(t));
    ASSERT_TRUE(cpu::RowCumsum(x.data(), t, want.data(), rows, cols));
    const size_t es = ElementSize(t);
    const size_t os = OutSize(t);
    const size_t acc = t == ElementType::kFloat32 || t == ElementType::kFloat16 ? 4 : 8;
    std::vector<char> got(want.size());
    DeviceBytes d_carry(static_cast<size_t>(rows) * acc);
    ASSERT_CUDA(cudaMemset(d_carry.get(), 0, d_carry.bytes()));
    ASSERT_CUDA(cudaDeviceSynchronize());  // legacy-stream copy/set: order it before work on stream_
    for (auto [begin, width] : {std::pair<int64_t, int64_t>{0, split}, {split, cols - split}}) {
      // The piece as its own contiguous rows x width tensor, as a chunk would arrive.
      std::vector<char> piece(static_cast<size_t>(rows * width) * es);
      for (int64_t r = 0; r < rows; ++r) {
        std::memcpy(&piece[r * width * es], &x[(r * cols + begin) * es], width * es);
      }
      DeviceBytes d_in(piece.size());
      DeviceBytes d_out(static_cast<size_t>(rows * width) * os);
      const size_t ws_bytes = RowCumsumWorkspaceBytes(rows, width);
      DeviceBytes d_ws(ws_bytes);
      ASSERT_CUDA(cudaMemcpy(d_in.get(), piece.data(), piece.size(), cudaMemcpyHostToDevice));
      ASSERT_CUDA(cudaDeviceSynchronize());  // legacy-stream copy/set: order it before work on stream_
      ASSERT_CUDA(RowCumsum(d_in.get(), t, d_out.get(), rows, width, d_carry.get(), d_ws.get(),
                            ws_bytes, config_));
      ASSERT_CUDA(cudaStreamSynchronize(stream_));
      std::vector<char> out(d_out.bytes());
      ASSERT_CUDA(cudaMemcpy(out.data(), d_out.get(), out.size(), cudaMemcpyDeviceToHost));
      for (int64_t r = 0; r < rows; ++r) {
        std::memcpy(&got[(r * cols + begin) * os], &out[r * width * os], width * os);
      }
    }
    CompareCumsum(t, rows, cols, x, want, got, true);
  }
}

TEST_F(CumsumHistogramTest, CumsumRejectsBadArguments) {
  DeviceBytes d(1024);
  EXPECT_EQ(RowCumsum(d.get(), ElementType::kInt64, d.get(), 1, 4, nullptr, nullptr, 0, config_),
            cudaErrorInvalidValue);
  EXPECT_EQ(RowCumsum(d.get(), ElementType::kFloat32, d.get(), 0, 4, nullptr, nullptr, 0, config_),
            cudaErrorInvalidValue);
  EXPECT_EQ(RowCumsum(d.get() + 1, ElementType::kFloat32, d.get(), 1, 4, nullptr, nullptr, 0,
                      config_),
            cudaErrorInvalidValue);
  // A look-back shape without its workspace.
  EXPECT_EQ(RowCumsum(d.get(), ElementType::kFloat32, d.get(), 1, 100000, nullptr, nullptr, 0,
                      config_),
            cudaErrorInvalidValue);
  LaunchConfig null_stream = config_;
  null_stream.stream = nullptr;
  EXPECT_EQ(RowCumsum(d.get(), ElementType::kFloat32, d.get(), 1, 4, nullptr, nullptr, 0,
                      null_stream),
            cudaErrorInvalidValue);
}

// ---- histogram --------------------------------------------------------------------------------

TEST_P(CumsumHistogramPerTypeTest, HistogramEdgeShapes) {
  const std::vector<std::pair<int64_t, int64_t>> shapes = {
      {1, 1}, {1, 7}, {3, 1}, {1, 1001}, {5, 4099}, {300, 257}, {20000, 9}, {1000, 3003}};
  const ElementType t = GetParam();
  for (auto [rows, cols] : shapes) {
    for (bool pdl : {true, false}) {
      config_.pdl = pdl;
      CheckHistogram(t, rows, cols, 256, 0, 1);
      CheckHistogram(t, rows, cols, 7, -3, 100);
    }
  }
}

TEST_P(CumsumHistogramPerTypeTest, HistogramBinCountsAcrossPaths) {
  // 1 bin; the largest shared-memory histogram (one copy); the first global-atomics count;
  // the maximum; and ranges whose edges round (0.1 steps).
  const ElementType t = GetParam();
  for (int32_t bins : {1, 3, 12288, 12289, 65536}) {
    CheckHistogram(t, 1, 300007, bins, -1, 1);
    CheckHistogram(t, 2000, 517, bins, 0, 0.3);
  }
}

// float32 and float16 bins come from a float estimate checked against the exact edges, or,
// for power-of-two widths with lo a whole number of widths, from exact float arithmetic: the
// floats next to every edge (and the edges rounded each way) land where NumPy puts them, also
// for ranges whose edges no float represents. The later ranges have power-of-two bin widths
// whose edges are all floats, negative and tiny ones among them. Each float path runs
// (histogram_float_bin.h): pow2 for (256, 0, 1), (64, -2, 2), (2, -1, 1), (256, 0, 256),
// (8, 3, 5) and (65536, -32768, 32768), where 65536 bins count through global atomics;
// checked for (256, 1e6, 1e6 + 1); double for the last two; adjacent for the rest.
TEST_F(CumsumHistogramTest, HistogramFloatValuesAtEdges) {
  struct Range {
    int32_t bins;
    double lo, hi;
  };
  for (const Range& r : std::vector<Range>{{256, 0, 1},
                                           {1000, 0, 0.3},
                                           {7, -3, 100},
                                           {256, 1e6, 1e6 + 1},
                                           {4096, -1e-3, 2.5e-3},
                                           {3, 0.1, 0.7},
                                           {64, -2, 2},
                                           {2, -1, 1},
                                           {256, 0, 256},
                                           {8, 3, 5},
                                           {4, 0, std::ldexp(1.0, -124)},
                                           {4, -std::ldexp(1.0, -120), std::ldexp(1.0, -120)},
                                           {65536, -32768, 32768},
                                           {4096, 1e12, 1e12 + 1e3},
                                           {8, -1e30, 1e30}}) {
    SCOPED_TRACE("bins " + std::to_string(r.bins) + " range " + std::to_string(r.lo) + " " +
                 std::to_string(r.hi));
    const double step = (r.hi - r.lo) / r.bins;
    std::vector<float> f;
    for (int32_t i = 0; i <= r.bins; ++i) {
      const double e = i == r.bins ? r.hi : static_cast<double>(i) * step + r.lo;
      const float n = static_cast<float>(e);
      for (float v : {std::nextafter(n, -INFINITY), n, std::nextafter(n, INFINITY),
                      std::nextafter(std::nextafter(n, INFINITY), INFINITY)}) {
        f.push_back(v);
      }
    }
    std::vector<char> x(f.size() * sizeof(float));
    std::memcpy(x.data(), f.data(), x.size());
    CheckHistogramOf(x, ElementType::kFloat32, 1, static_cast<int64_t>(f.size()), r.bins, r.lo,
                     r.hi);
    std::vector<char> h(f.size() * 2);
    for (size_t i = 0; i < f.size(); ++i) {
      const uint16_t b = FloatToHalf(f[i]);
      std::memcpy(&h[2 * i], &b, 2);
    }
    CheckHistogramOf(h, ElementType::kFloat16, 1, static_cast<int64_t>(f.size()), r.bins, r.lo,
                     r.hi);
  }
}

TEST_P(CumsumHistogramPerTypeTest, HistogramMisalignedInput) {
  const ElementType t = GetParam();
  CheckHistogram(t, 1, 100003, 256, 0, 1, /*offset=*/1);
  CheckHistogram(t, 333, 1001, 64, 0, 1, /*offset=*/3);
}

TEST_P(CumsumHistogramPerTypeTest, HistogramOneLongRow) {
  const ElementType t = GetParam();
  CheckHistogram(t, 1, (int64_t{1} << 26) + 7, 256, 0, 1);
}

// Counting each row in two pieces with `accumulate` equals counting it whole.
TEST_P(CumsumHistogramPerTypeTest, HistogramAccumulatesTwoPieces) {
  const ElementType t = GetParam();
  for (auto [rows, cols, split] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {1, 1000003, 500001}, {3, 20011, 7}, {2000, 300, 123}}) {
    SCOPED_TRACE(Trace(t, rows, cols) + " split " + std::to_string(split));
    const int32_t bins = 100;
    const std::vector<char> x = RandomData(t, rows * cols, seed_ + 5, false, -0.2, 1.2);
    std::vector<int64_t> want(static_cast<size_t>(rows) * bins);
    ASSERT_TRUE(cpu::RowHistogram(x.data(), t, want.data(), rows, cols, bins, 0, 1, false));
    const size_t es = ElementSize(t);
    DeviceBytes d_counts(want.size() * 8);
    auto* counts = reinterpret_cast<int64_t*>(d_counts.get());
    ASSERT_CUDA(cudaMemset(d_counts.get(), 0xFF, d_counts.bytes()));
    ASSERT_CUDA(cudaDeviceSynchronize());  // legacy-stream copy/set: order it before work on stream_
    bool accumulate = false;
    for (auto [begin, width] : {std::pair<int64_t, int64_t>{0, split}, {split, cols - split}}) {
      std::vector<char> piece(static_cast<size_t>(rows * width) * es);
      for (int64_t r = 0; r < rows; ++r) {
        std::memcpy(&piece[r * width * es], &x[(r * cols + begin) * es], width * es);
      }
      DeviceBytes d_in(piece.size());
      ASSERT_CUDA(cudaMemcpy(d_in.get(), piece.data(), piece.size(), cudaMemcpyHostToDevice));
      ASSERT_CUDA(cudaDeviceSynchronize());  // legacy-stream copy/set: order it before work on stream_
      ASSERT_CUDA(RowHistogram(d_in.get(), t, counts, rows, width, bins, 0, 1, accumulate,
                               nullptr, 0, config_));
      ASSERT_CUDA(cudaStreamSynchronize(stream_));
      accumulate = true;
    }
    std::vector<int64_t> got(want.size());
    ASSERT_CUDA(cudaMemcpy(got.data(), counts, d_counts.bytes(), cudaMemcpyDeviceToHost));
    EXPECT_EQ(got, want);
  }
}

TEST_F(CumsumHistogramTest, HistogramRejectsBadArguments) {
  DeviceBytes d(1024);
  auto* counts = reinterpret_cast<int64_t*>(d.get());
  EXPECT_EQ(RowHistogram(d.get(), ElementType::kFloat32, counts, 1, 4, 0, 0, 1, false, nullptr, 0,
                         config_),
            cudaErrorInvalidValue);
  EXPECT_EQ(RowHistogram(d.get(), ElementType::kFloat32, counts, 1, 4, 65537, 0, 1, false,
                         nullptr, 0, config_),
            cudaErrorInvalidValue);
  EXPECT_EQ(RowHistogram(d.get(), ElementType::kFloat32, counts, 1, 4, 4, 1, 1, false, nullptr, 0,
                         config_),
            cudaErrorInvalidValue);
  EXPECT_EQ(RowHistogram(d.get(), ElementType::kInt64, counts, 1, 4, 4, 0, 1, false, nullptr, 0,
                         config_),
            cudaErrorInvalidValue);
  EXPECT_EQ(RowHistogram(d.get(), ElementType::kFloat32,
                         reinterpret_cast<int64_t*>(d.get() + 4), 1, 4, 4, 0, 1, false, nullptr,
                         0, config_),
            cudaErrorInvalidValue);
}

INSTANTIATE_TEST_SUITE_P(Types, CumsumHistogramPerTypeTest, ::testing::ValuesIn(kTypes),
                         ::gpupipe::testing::ElementTypeParamName);

TEST(CumsumHistogramDescribe, PathsByShape) {
  // Described for an sm_90 device with its shared memory, whatever code this build carries.
  LaunchConfig config;
  config.multiprocessors = 132;
  config.arch = 90;
  config.max_smem_per_block = 227 << 10;
  auto names = [](const std::vector<KernelLaunchInfo>& ks) {
    std::string s;
    for (const auto& k : ks) s += std::string(s.empty() ? "" : " ") + k.name;
    return s;
  };
  EXPECT_EQ(names(DescribeRowCumsum(ElementType::kFloat32, 1000, 100, config)),
            "cumsum.warp-rows");
  EXPECT_EQ(names(DescribeRowCumsum(ElementType::kFloat32, 16384, 16384, config)),
            "cumsum.block-rows");
  EXPECT_EQ(names(DescribeRowCumsum(ElementType::kFloat32, 1, int64_t{1} << 28, config)),
            "cumsum.init cumsum.streamed");
  EXPECT_EQ(DescribeRowCumsum(ElementType::kFloat32, 1, int64_t{1} << 28, config)[1].blocks,
            132);  // a persistent block an SM
  EXPECT_EQ(DescribeRowCumsum(ElementType::kFloat32, 1, 20000, config)[1].blocks,
            3);  // no more blocks than tiles of 8192
  EXPECT_EQ(names(DescribeRowCumsum(ElementType::kFloat64, 1, int64_t{1} << 28, config)),
            "cumsum.init cumsum.lookback");
  EXPECT_EQ(DescribeRowCumsum(ElementType::kFloat64, 1, int64_t{1} << 28, config)[1].blocks,
            32768);  // a block a tile of 8192
  EXPECT_TRUE(DescribeRowCumsum(ElementType::kInt64, 1, 10, config).empty());
  // Code below sm_90 has no bulk copies: one long float32 row takes the block-a-tile path.
  LaunchConfig sm80 = config;
  sm80.arch = 80;
  EXPECT_EQ(names(DescribeRowCumsum(ElementType::kFloat32, 1, int64_t{1} << 28, sm80)),
            "cumsum.init cumsum.lookback");
  EXPECT_EQ(names(DescribeRowHistogram(ElementType::kFloat32, 1, int64_t{1} << 28, 256, false,
                                       config)),
            "histogram.zero histogram.split");
  EXPECT_EQ(names(DescribeRowHistogram(ElementType::kFloat32, 1, 1000, 256, true, config)),
            "histogram.split");
  EXPECT_EQ(names(DescribeRowHistogram(ElementType::kFloat32, 10000, 1000, 256, false, config)),
            "histogram.rows");
  EXPECT_EQ(names(DescribeRowHistogram(ElementType::kFloat32, 10000, 1000, 65536, false,
                                       config)),
            "histogram.zero histogram.global");
  EXPECT_LE(RowCumsumWorkspaceBytes(1, int64_t{1} << 28), size_t{2} << 20);
}

}  // namespace
}  // namespace gpupipe::kernels::cuda
