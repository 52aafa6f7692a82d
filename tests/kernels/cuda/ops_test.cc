// CUDA kernels vs the CPU reference, on fresh random data each run. The seed is printed with
// every failure (SCOPED_TRACE); to reproduce, hard-code it in SetUp.
#include "kernels/cuda/ops.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cpu/reference_ops.h"

namespace gpupipe::kernels::cuda {
namespace {

#define ASSERT_CUDA(expr) ASSERT_EQ((expr), cudaSuccess) << cudaGetErrorString(cudaGetLastError())

// Elements past the end of every output, poisoned and checked to stay untouched.
constexpr int64_t kGuard = 64;
constexpr uint32_t kPoisonBits = 0xffffffffu;  // a NaN: cudaMemset(0xFF)

EwInstr Affine(float a, float b) { return {EwOpcode::kAffine, a, b}; }
EwInstr Relu() { return {EwOpcode::kRelu, 0.0f, 0.0f}; }
EwProgram Program(std::initializer_list<EwInstr> instrs) {
  EwProgram p;
  for (const EwInstr& in : instrs) p.Append(in);
  return p;
}

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t count) : count_(count) {
    void* p = nullptr;
    if (cudaMalloc(&p, (count ? count : 1) * sizeof(T)) == cudaSuccess) ptr_ = static_cast<T*>(p);
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* get() const { return ptr_; }
  size_t bytes() const { return count_ * sizeof(T); }

 private:
  T* ptr_ = nullptr;
  size_t count_;
};

std::string Describe(const LaunchConfig& c) {
  std::ostringstream os;
  os << "staging=" << (c.staging == Staging::kDirect ? "direct" : "pipeline")
     << " stages=" << c.stages << " pdl=" << c.pdl;
  return os.str();
}

class CudaOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int devices = 0;
    const cudaError_t err = cudaGetDeviceCount(&devices);
    if (err != cudaSuccess || devices == 0) {
      (void)cudaGetLastError();
      GTEST_SKIP() << "no usable CUDA device (cudaGetDeviceCount: " << cudaGetErrorString(err)
                   << ", " << devices << " devices)";
    }
    ASSERT_CUDA(cudaDeviceGetAttribute(&multiprocessors_, cudaDevAttrMultiProcessorCount, 0));
    ASSERT_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    seed_ = std::random_device{}();
    rng_.seed(seed_);
    trace_.emplace(__FILE__, __LINE__, "random seed " + std::to_string(seed_));
  }

  void TearDown() override {
    if (stream_ != nullptr) {
      EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
      EXPECT_EQ(cudaStreamDestroy(stream_), cudaSuccess);
    }
  }

  std::vector<LaunchConfig> AllConfigs() const {
    std::vector<LaunchConfig> configs;
    for (Staging staging : {Staging::kDirect, Staging::kPipeline}) {
      for (int stages : {1, 2, 4, 8}) {
        for (bool pdl : {false, true}) {
          LaunchConfig c;
          c.stream = stream_;
          c.staging = staging;
          c.stages = stages;
          c.pdl = pdl;
          c.multiprocessors = multiprocessors_;
          configs.push_back(c);
        }
      }
    }
    return configs;
  }

  LaunchConfig DefaultConfig() const {
    LaunchConfig c;
    c.stream = stream_;
    c.multiprocessors = multiprocessors_;
    return c;
  }

  std::vector<float> Random(int64_t n, float lo, float hi) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng_);
    return v;
  }

  // Both complete before returning: the stream is non-blocking, so nothing else orders them
  // with later work.
  void Upload(const std::vector<float>& host, float* d) {
    ASSERT_CUDA(cudaMemcpyAsync(d, host.data(), host.size() * sizeof(float),
                                cudaMemcpyHostToDevice, stream_));
    ASSERT_CUDA(cudaStreamSynchronize(stream_));
  }
  // Fills n + kGuard floats with NaN.
  void Poison(float* d, int64_t n) {
    ASSERT_CUDA(cudaMemsetAsync(d, 0xff, (n + kGuard) * sizeof(float), stream_));
    ASSERT_CUDA(cudaStreamSynchronize(stream_));
  }
  // Waits for the stream and downloads n + kGuard floats.
  std::vector<float> Download(const float* d, int64_t n) {
    std::vector<float> host(n + kGuard);
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(host.data(), d, host.size() * sizeof(float), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return host;
  }

  cudaStream_t stream_ = nullptr;
  int multiprocessors_ = 0;
  unsigned seed_ = 0;
  std::mt19937 rng_;
  std::optional<::testing::ScopedTrace> trace_;
};

::testing::AssertionResult GuardIntact(const std::vector<float>& got, int64_t n) {
  for (int64_t i = n; i < n + kGuard; ++i) {
    if (Bits(got[i]) != kPoisonBits) {
      return ::testing::AssertionFailure() << "write past the end at element " << i;
    }
  }
  return ::testing::AssertionSuccess();
}

// Exact (bitwise) equality; any NaN matches any NaN (the GPU returns the canonical NaN).
::testing::AssertionResult BitwiseEqual(const std::vector<float>& got,
                                        const std::vector<float>& want) {
  int64_t bad = 0;
  std::ostringstream first;
  for (size_t i = 0; i < want.size(); ++i) {
    const bool ok = (std::isnan(got[i]) && std::isnan(want[i])) || Bits(got[i]) == Bits(want[i]);
    if (!ok && bad++ < 5) first << "\n  [" << i << "] got " << got[i] << " want " << want[i];
  }
  if (bad == 0) return GuardIntact(got, static_cast<int64_t>(want.size()));
  return ::testing::AssertionFailure() << bad << " of " << want.size() << " differ:" << first.str();
}

// |got - want| <= tol[i]; a NaN (unwritten poison included) always fails.
::testing::AssertionResult Near(const std::vector<float>& got, const std::vector<float>& want,
                                const std::vector<double>& tol) {
  int64_t bad = 0;
  std::ostringstream first;
  for (size_t i = 0; i < want.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(err <= tol[i]) && bad++ < 5) {
      first << "\n  [" << i << "] got " << got[i] << " want " << want[i] << " tol " << tol[i];
    }
  }
  if (bad == 0) return GuardIntact(got, static_cast<int64_t>(want.size()));
  return ::testing::AssertionFailure() << bad << " of " << want.size() << " out of tolerance:"
                                       << first.str();
}

// ---- Elementwise -------------------------------------------------------------------------------

const std::vector<int64_t> kSizes = {1, 31, 4096, (int64_t{1} << 20) + 3};

std::vector<EwProgram> TestPrograms() {
  return {
      Program({Affine(1.5f, -0.25f)}),
      Program({Relu()}),
      Program({Affine(0.7f, 0.1f), Relu(), Affine(-3.0f, 2.0f), Relu(), Affine(1e-3f, 5.0f)}),
  };
}

TEST_F(CudaOpsTest, ElementwiseMatchesReferenceBitwise) {
  for (int64_t n : kSizes) {
    SCOPED_TRACE("n=" + std::to_string(n));
    std::vector<float> in = Random(n, -8.0f, 8.0f);
    // Special values where they fit: signed zeros, infinities, NaN, a denormal.
    const float specials[] = {-0.0f, 0.0f, std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity(),
                              std::numeric_limits<float>::quiet_NaN(), 1e-40f};
    for (size_t i = 0; i < std::size(specials) && 2 * i < in.size(); ++i) in[2 * i] = specials[i];

    DeviceBuffer<float> d_in(n), d_out(n + kGuard);
    ASSERT_NE(d_in.get(), nullptr);
    ASSERT_NE(d_out.get(), nullptr);
    Upload(in, d_in.get());
    for (const EwProgram& program : TestPrograms()) {
      SCOPED_TRACE("program of " + std::to_string(program.count) + " instructions");
      std::vector<float> want(n);
      cpu::Elementwise(in.data(), want.data(), n, program);
      for (const LaunchConfig& config : AllConfigs()) {
        SCOPED_TRACE(Describe(config));
        Poison(d_out.get(), n);
        int kernels = -1;
        ASSERT_CUDA(Elementwise(d_in.get(), d_out.get(), n, program, config, &kernels));
        EXPECT_EQ(kernels, 1);
        EXPECT_TRUE(BitwiseEqual(Download(d_out.get(), n), want));
      }
    }
  }
}

TEST_F(CudaOpsTest, ElementwiseInPlace) {
  for (int64_t n : kSizes) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const std::vector<float> in = Random(n, -8.0f, 8.0f);
    const EwProgram program = TestPrograms().back();
    std::vector<float> want(n);
    cpu::Elementwise(in.data(), want.data(), n, program);
    DeviceBuffer<float> d_buf(n + kGuard);
    ASSERT_NE(d_buf.get(), nullptr);
    for (const LaunchConfig& config : AllConfigs()) {
      SCOPED_TRACE(Describe(config));
      Poison(d_buf.get(), n);
      Upload(in, d_buf.get());
      ASSERT_CUDA(Elementwise(d_buf.get(), d_buf.get(), n, program, config));
      EXPECT_TRUE(BitwiseEqual(Download(d_buf.get(), n), want));
    }
  }
}

TEST_F(CudaOpsTest, ElementwiseUnalignedOutput) {
  // d_out carries no alignment promise: one float past a 16-byte boundary.
  const int64_t n = 3 * 4096 + 5;
  const std::vector<float> in = Random(n, -8.0f, 8.0f);
  const EwProgram program = TestPrograms().front();
  std::vector<float> want(n);
  cpu::Elementwise(in.data(), want.data(), n, program);
  DeviceBuffer<float> d_in(n), d_out(n + 1 + kGuard);
  ASSERT_NE(d_in.get(), nullptr);
  ASSERT_NE(d_out.get(), nullptr);
  Upload(in, d_in.get());
  for (const LaunchConfig& config : AllConfigs()) {
    SCOPED_TRACE(Describe(config));
    Poison(d_out.get(), n + 1);
    ASSERT_CUDA(Elementwise(d_in.get(), d_out.get() + 1, n, program, config));
    const std::vector<float> got = Download(d_out.get(), n + 1);
    EXPECT_EQ(Bits(got[0]), kPoisonBits) << "write before the start";
    EXPECT_TRUE(BitwiseEqual(std::vector<float>(got.begin() + 1, got.end()), want));
  }
}

TEST_F(CudaOpsTest, ElementwiseEmptyLaunchesNothing) {
  int kernels = -1;
  EXPECT_EQ(Elementwise(nullptr, nullptr, 0, TestPrograms().front(), DefaultConfig(), &kernels),
            cudaSuccess);
  EXPECT_EQ(kernels, 0);
}

// ---- RowSum / RowSoftmax -----------------------------------------------------------------------

struct Shape {
  int64_t rows;
  int64_t cols;
};

// Covers every path of the row plan on an H200-sized grid: short rows by lane groups (incl.
// cols = 1 and odd widths), block per row, rows split over blocks (few long rows), more
// segments than the grid (grid-stride), and more rows than the softmax workspace holds at once
// (several batches).
const std::vector<Shape> kShapes = {
    {3, 5},    {1000, 33}, {64, 4097},  {2, (int64_t{1} << 20) + 1}, {4096, 1},
    {1, int64_t{1} << 22}, {3000, 1500}, {300000, 3},
};

std::string Describe(Shape s) {
  return "shape " + std::to_string(s.rows) + "x" + std::to_string(s.cols);
}

class CudaRowOpsTest : public CudaOpsTest {
 protected:
  void SetUp() override {
    CudaOpsTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    workspace_.emplace(RowOpsWorkspaceBytes());
    ASSERT_NE(workspace_->get(), nullptr);
  }
  std::optional<DeviceBuffer<unsigned char>> workspace_;
};

TEST_F(CudaRowOpsTest, WorkspaceIsAFewMiB) {
  EXPECT_GT(RowOpsWorkspaceBytes(), 0u);
  EXPECT_LE(RowOpsWorkspaceBytes(), size_t{8} << 20);
}

TEST_F(CudaRowOpsTest, RowSumMatchesReference) {
  const std::vector<EwProgram> pres = {EwProgram{}, Program({Affine(1.25f, -0.5f), Relu()})};
  for (const Shape& shape : kShapes) {
    SCOPED_TRACE(Describe(shape));
    const int64_t n = shape.rows * shape.cols;
    const std::vector<float> in = Random(n, -4.0f, 4.0f);
    DeviceBuffer<float> d_in(n), d_out(shape.rows + kGuard);
    ASSERT_NE(d_in.get(), nullptr);
    ASSERT_NE(d_out.get(), nullptr);
    Upload(in, d_in.get());
    for (const EwProgram& pre : pres) {
      SCOPED_TRACE("pre of " + std::to_string(pre.count) + " instructions");
      std::vector<float> x(n);
      cpu::Elementwise(in.data(), x.data(), n, pre);
      std::vector<float> want(shape.rows);
      cpu::RowSum(x.data(), want.data(), shape.rows, shape.cols);
      std::vector<double> tol(shape.rows);
      for (int64_t r = 0; r < shape.rows; ++r) {
        double abs_sum = 0.0;
        for (int64_t c = 0; c < shape.cols; ++c) abs_sum += std::fabs(x[r * shape.cols + c]);
        tol[r] = 1e-5 * abs_sum + 1e-6;
      }
      for (const LaunchConfig& config : AllConfigs()) {
        SCOPED_TRACE(Describe(config));
        Poison(d_out.get(), shape.rows);
        int kernels = -1;
        ASSERT_CUDA(RowSum(d_in.get(), d_out.get(), shape.rows, shape.cols, pre,
                           workspace_->get(), workspace_->bytes(), config, &kernels));
        EXPECT_TRUE(kernels == 1 || kernels == 2) << kernels << " kernels";
        EXPECT_TRUE(Near(Download(d_out.get(), shape.rows), want, tol));
      }
    }
  }
}

TEST_F(CudaRowOpsTest, RowSoftmaxMatchesReference) {
  // The second pre shifts everything near 1000, where a naive exp overflows.
  const std::vector<EwProgram> pres = {EwProgram{}, Program({Affine(0.5f, 1000.0f)})};
  for (const Shape& shape : kShapes) {
    SCOPED_TRACE(Describe(shape));
    const int64_t n = shape.rows * shape.cols;
    const std::vector<float> in = Random(n, -10.0f, 10.0f);
    DeviceBuffer<float> d_in(n), d_out(n + kGuard);
    ASSERT_NE(d_in.get(), nullptr);
    ASSERT_NE(d_out.get(), nullptr);
    Upload(in, d_in.get());
    for (const EwProgram& pre : pres) {
      SCOPED_TRACE("pre of " + std::to_string(pre.count) + " instructions");
      std::vector<float> x(n);
      cpu::Elementwise(in.data(), x.data(), n, pre);
      std::vector<float> want(n);
      cpu::RowSoftmax(x.data(), want.data(), shape.rows, shape.cols);
      std::vector<double> tol(n);
      for (int64_t i = 0; i < n; ++i) tol[i] = 1e-6 + 1e-5 * want[i];
      for (const LaunchConfig& config : AllConfigs()) {
        SCOPED_TRACE(Describe(config));
        Poison(d_out.get(), n);
        int kernels = -1;
        ASSERT_CUDA(RowSoftmax(d_in.get(), d_out.get(), shape.rows, shape.cols, pre,
                               workspace_->get(), workspace_->bytes(), config, &kernels));
        EXPECT_TRUE(kernels >= 2 && kernels % 2 == 0) << kernels << " kernels";
        EXPECT_TRUE(Near(Download(d_out.get(), n), want, tol));
      }
    }
  }
}

TEST_F(CudaRowOpsTest, RowSoftmaxSpecialValues) {
  // Row 0: -inf entries get 0; row 1: a NaN makes the row NaN; row 2: all -inf is NaN.
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const int64_t rows = 3, cols = 4;
  const std::vector<float> in = {-kInf, 0.0f, 1.0f, -kInf,                       //
                                 1.0f, std::numeric_limits<float>::quiet_NaN(), 2.0f, 3.0f,  //
                                 -kInf, -kInf, -kInf, -kInf};
  std::vector<float> want(in.size());
  cpu::RowSoftmax(in.data(), want.data(), rows, cols);
  DeviceBuffer<float> d_in(in.size()), d_out(in.size() + kGuard);
  ASSERT_NE(d_in.get(), nullptr);
  ASSERT_NE(d_out.get(), nullptr);
  Upload(in, d_in.get());
  Poison(d_out.get(), rows * cols);
  ASSERT_CUDA(RowSoftmax(d_in.get(), d_out.get(), rows, cols, EwProgram{}, workspace_->get(),
                         workspace_->bytes(), DefaultConfig()));
  const std::vector<float> got = Download(d_out.get(), rows * cols);
  for (int64_t i = 0; i < rows * cols; ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "element " << i << " = " << got[i];
    } else {
      EXPECT_NEAR(got[i], want[i], 1e-6 + 1e-5 * want[i]) << "element " << i;
    }
  }
}

// ---- argument errors ---------------------------------------------------------------------------

TEST_F(CudaRowOpsTest, InvalidArgumentsAreRejected) {
  DeviceBuffer<float> d_a(1024), d_b(1024);
  ASSERT_NE(d_a.get(), nullptr);
  ASSERT_NE(d_b.get(), nullptr);
  float* in = d_a.get();
  float* out = d_b.get();
  void* ws = workspace_->get();
  const size_t ws_bytes = workspace_->bytes();
  const EwProgram prog = Program({Relu()});
  const LaunchConfig ok = DefaultConfig();

  auto with = [&](auto edit) {
    LaunchConfig c = ok;
    edit(c);
    return c;
  };
  const std::vector<std::pair<std::string, LaunchConfig>> bad_configs = {
      {"null stream", with([](LaunchConfig& c) { c.stream = nullptr; })},
      {"legacy stream", with([](LaunchConfig& c) { c.stream = cudaStreamLegacy; })},
      {"stages 0", with([](LaunchConfig& c) { c.stages = 0; })},
      {"stages 9", with([](LaunchConfig& c) { c.stages = kMaxStages + 1; })},
      {"0 multiprocessors", with([](LaunchConfig& c) { c.multiprocessors = 0; })},
      {"bad staging", with([](LaunchConfig& c) { c.staging = static_cast<Staging>(7); })},
  };
  for (const auto& [what, config] : bad_configs) {
    SCOPED_TRACE(what);
    int k = -1;
    EXPECT_EQ(Elementwise(in, out, 16, prog, config, &k), cudaErrorInvalidValue);
    EXPECT_EQ(k, 0);
    EXPECT_EQ(RowSum(in, out, 4, 4, prog, ws, ws_bytes, config, &k), cudaErrorInvalidValue);
    EXPECT_EQ(RowSoftmax(in, out, 4, 4, prog, ws, ws_bytes, config, &k), cudaErrorInvalidValue);
    EXPECT_EQ(k, 0);
  }

  EwProgram too_long;
  too_long.count = kMaxEwInstrs + 1;
  EwProgram bad_op = prog;
  bad_op.instrs[0].op = static_cast<EwOpcode>(99);

  EXPECT_EQ(Elementwise(in, out, -1, prog, ok), cudaErrorInvalidValue);
  EXPECT_EQ(Elementwise(in + 1, out, 16, prog, ok), cudaErrorInvalidValue);  // unaligned d_in
  EXPECT_EQ(Elementwise(nullptr, out, 16, prog, ok), cudaErrorInvalidValue);
  EXPECT_EQ(Elementwise(in, out, 16, too_long, ok), cudaErrorInvalidValue);
  EXPECT_EQ(Elementwise(in, out, 16, bad_op, ok), cudaErrorInvalidValue);

  using RowOp = cudaError_t (*)(const float*, float*, int64_t, int64_t, const EwProgram&, void*,
                                size_t, const LaunchConfig&, int*);
  for (RowOp op : {static_cast<RowOp>(&RowSum), static_cast<RowOp>(&RowSoftmax)}) {
    EXPECT_EQ(op(in, out, 0, 4, prog, ws, ws_bytes, ok, nullptr), cudaErrorInvalidValue);
    EXPECT_EQ(op(in, out, 4, 0, prog, ws, ws_bytes, ok, nullptr), cudaErrorInvalidValue);
    EXPECT_EQ(op(in, out, -4, 4, prog, ws, ws_bytes, ok, nullptr), cudaErrorInvalidValue);
    EXPECT_EQ(op(in, out, INT64_MAX / 2, 4, prog, ws, ws_bytes, ok, nullptr),
              cudaErrorInvalidValue);
    EXPECT_EQ(op(in, out, 4, 4, prog, ws, ws_bytes - 1, ok, nullptr), cudaErrorInvalidValue);
    EXPECT_EQ(op(in, out, 4, 4, prog, nullptr, ws_bytes, ok, nullptr), cudaErrorInvalidValue);
    EXPECT_EQ(op(in + 1, out, 4, 4, prog, ws, ws_bytes, ok, nullptr), cudaErrorInvalidValue);
    EXPECT_EQ(op(in, nullptr, 4, 4, prog, ws, ws_bytes, ok, nullptr), cudaErrorInvalidValue);
    EXPECT_EQ(op(in, out, 4, 4, bad_op, ws, ws_bytes, ok, nullptr), cudaErrorInvalidValue);
  }
  // Rejections leave no error behind for the next unrelated check.
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace
}  // namespace gpupipe::kernels::cuda
