// CUDA kernels vs the CPU reference, on fresh random data each run. The seed is printed with
// every failure (SCOPED_TRACE); to reproduce, hard-code it in SetUp.
//
// Tolerances (against the CPU reference, which accumulates in double):
//  - Elementwise: bit-exact for kAffine, kRelu, kClamp, kAbs, kSqrt; within EwHostDeviceUlp(op)
//    ulp for the single transcendental instruction kExp, kLog, kSigmoid, kTanh, kPow;
//  - sum: 1e-5 * sum|x| + 1e-6 (float accumulation over at most a few thousand terms per
//    thread plus a tree); mean: the same divided by cols; norm2: 1e-5 relative;
//  - min, max, argmax: exact (only exact opcodes in their `pre`);
//  - softmax: 1e-6 + 1e-5 * y;
//  - l2normalize: 1e-6 + 1e-5 * |y|; standardize: 1e-5 * (max|x| / std + |y|), i.e. the float
//    rounding of the mean (relative to the row's magnitude) seen through the division by std;
//  - NaN where the reference is NaN.
#include "kernels/cuda/ops.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
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
#include "kernels/cuda/device_caps.h"
#include "kernels/cuda/tuning/staging_table.h"
#include "tests/testing/cuda_device.h"
#include "tests/testing/param_names.h"

namespace gpupipe::kernels::cuda {
namespace {

#define ASSERT_CUDA(expr) ASSERT_EQ((expr), cudaSuccess) << cudaGetErrorString(cudaGetLastError())

// Elements past the end of every output, poisoned and checked to stay untouched.
constexpr int64_t kGuard = 64;
constexpr uint32_t kPoisonBits = 0xffffffffu;  // a NaN: cudaMemset(0xFF)

EwInstr Affine(float a, float b) { return {EwOpcode::kAffine, a, b}; }
EwInstr Relu() { return {EwOpcode::kRelu, 0.0f, 0.0f}; }
EwInstr Op(EwOpcode op, float a = 0.0f, float b = 0.0f) { return {op, a, b}; }
EwProgram Program(std::initializer_list<EwInstr> instrs) {
  EwProgram p;
  for (const EwInstr& in : instrs) p.Append(in);
  return p;
}

// float32 shorthands of the untyped host API, for the float32 tests of this file (the other
// element types are covered in dtypes_test.cc).
cudaError_t Elementwise(const float* d_in, float* d_out, int64_t n, const EwProgram& program,
                        const LaunchConfig& config, int* kernels = nullptr) {
  return cuda::Elementwise(d_in, ElementType::kFloat32, d_out, n, program, config, kernels);
}
cudaError_t RowReduce(const float* d_in, float* d_out, int64_t rows, int64_t cols,
                      RowReduceKind kind, const EwProgram& pre, void* ws, size_t ws_bytes,
                      const LaunchConfig& config, int* kernels = nullptr) {
  return cuda::RowReduce(d_in, ElementType::kFloat32, d_out, rows, cols, kind, pre, ws, ws_bytes,
                         config, kernels);
}
cudaError_t RowSum(const float* d_in, float* d_out, int64_t rows, int64_t cols,
                   const EwProgram& pre, void* ws, size_t ws_bytes, const LaunchConfig& config,
                   int* kernels = nullptr) {
  return cuda::RowSum(d_in, ElementType::kFloat32, d_out, rows, cols, pre, ws, ws_bytes, config,
                      kernels);
}
cudaError_t RowArgmax(const float* d_in, int64_t* d_out, int64_t rows, int64_t cols,
                      const EwProgram& pre, void* ws, size_t ws_bytes,
                      const LaunchConfig& config, int* kernels = nullptr) {
  return cuda::RowArgmax(d_in, ElementType::kFloat32, d_out, rows, cols, pre, ws, ws_bytes,
                         config, kernels);
}
cudaError_t RowSoftmax(const float* d_in, float* d_out, int64_t rows, int64_t cols,
                       const EwProgram& pre, void* ws, size_t ws_bytes,
                       const LaunchConfig& config, int* kernels = nullptr) {
  return cuda::RowSoftmax(d_in, ElementType::kFloat32, d_out, rows, cols, pre, ws, ws_bytes,
                          config, kernels);
}
cudaError_t RowNormalize(const float* d_in, float* d_out, int64_t rows, int64_t cols,
                         RowNormalizeKind kind, const EwProgram& pre, void* ws, size_t ws_bytes,
                         const LaunchConfig& config, int* kernels = nullptr) {
  return cuda::RowNormalize(d_in, ElementType::kFloat32, d_out, rows, cols, kind, pre, ws,
                            ws_bytes, config, kernels);
}
std::vector<KernelLaunchInfo> DescribeElementwise(int64_t n, const LaunchConfig& config) {
  return cuda::DescribeElementwise(n, ElementType::kFloat32, config);
}
std::vector<KernelLaunchInfo> DescribeRowReduce(int64_t rows, int64_t cols, RowReduceKind kind,
                                                const LaunchConfig& config) {
  return cuda::DescribeRowReduce(rows, cols, ElementType::kFloat32, kind, config);
}
std::vector<KernelLaunchInfo> DescribeRowArgmax(int64_t rows, int64_t cols,
                                                const LaunchConfig& config) {
  return cuda::DescribeRowArgmax(rows, cols, ElementType::kFloat32, config);
}
std::vector<KernelLaunchInfo> DescribeRowSoftmax(int64_t rows, int64_t cols,
                                                 const LaunchConfig& config) {
  return cuda::DescribeRowSoftmax(rows, cols, ElementType::kFloat32, config);
}
std::vector<KernelLaunchInfo> DescribeRowNormalize(int64_t rows, int64_t cols,
                                                   RowNormalizeKind kind,
                                                   const LaunchConfig& config) {
  return cuda::DescribeRowNormalize(rows, cols, ElementType::kFloat32, kind, config);
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
  os << "staging=" << StagingName(c.staging)
     << " stages=" << c.stages << " pdl=" << c.pdl;
  return os.str();
}

const Staging kAllStagings[] = {Staging::kDirect,     Staging::kPipeline, Staging::kPipelineThread,
                                Staging::kPrimitives, Staging::kBulk,     Staging::kAuto};
const Staging kStagedStagings[] = {Staging::kPipeline, Staging::kPipelineThread,
                                   Staging::kPrimitives, Staging::kBulk};

// Whether this device runs `staging` with this build's code: bulk copies need sm_90 code
// (kernels/cuda/device_caps.h); elsewhere they are refused, and their cases skip.
bool RunsHere(Staging staging) {
  return staging != Staging::kBulk || CurrentDeviceCaps().bulk_copy();
}

class CudaOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = gpupipe::testing::NoCudaDeviceReason()) GTEST_SKIP() << *why;
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

  // Every staging strategy x stages x PDL off/on.
  std::vector<LaunchConfig> AllConfigs(std::initializer_list<int> stage_counts = {1, 2, 4}) const {
    std::vector<LaunchConfig> configs;
    for (Staging staging : kAllStagings) {
      if (!RunsHere(staging)) continue;
      for (const LaunchConfig& c : ConfigsOf(staging, stage_counts)) configs.push_back(c);
    }
    return configs;
  }

  // One staging strategy x stages x PDL off/on.
  std::vector<LaunchConfig> ConfigsOf(Staging staging,
                                      std::initializer_list<int> stage_counts = {1, 2, 4}) const {
    std::vector<LaunchConfig> configs;
    for (int stages : stage_counts) {
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
    return configs;
  }

  // Defined below the elementwise tests.
  // Every staged strategy of `stagings` (default: all of them) x stages {1, 2, 4, 8} x PDL
  // off/on against direct and the CPU reference, bit for bit, over `sizes`.
  void StagedMatchesDirect(const std::vector<int64_t>& sizes,
                           const std::vector<Staging>& stagings = {
                               std::begin(kStagedStagings), std::end(kStagedStagings)});

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
  // Small integers as floats: long rows are full of exact ties.
  std::vector<float> RandomInts(int64_t n, int lo, int hi) {
    std::uniform_int_distribution<int> dist(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = static_cast<float>(dist(rng_));
    return v;
  }
  int64_t RandomIndex(int64_t n) {
    return std::uniform_int_distribution<int64_t>(0, n - 1)(rng_);
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
  // Waits for the stream and downloads n + kGuard values.
  template <typename T>
  std::vector<T> Download(const T* d, int64_t n) {
    std::vector<T> host(n + kGuard);
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(host.data(), d, host.size() * sizeof(T), cudaMemcpyDeviceToHost),
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

// |got - want| <= tol[i]; a NaN got (unwritten poison included) fails unless want is NaN
// too; equal infinities match.
::testing::AssertionResult Near(const std::vector<float>& got, const std::vector<float>& want,
                                const std::vector<double>& tol) {
  int64_t bad = 0;
  std::ostringstream first;
  for (size_t i = 0; i < want.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    const bool ok = std::isnan(want[i]) ? std::isnan(got[i])
                                        : (got[i] == want[i] || err <= tol[i]);
    if (!ok && bad++ < 5) {
      first << "\n  [" << i << "] got " << got[i] << " want " << want[i] << " tol " << tol[i];
    }
  }
  if (bad == 0) return GuardIntact(got, static_cast<int64_t>(want.size()));
  return ::testing::AssertionFailure() << bad << " of " << want.size() << " out of tolerance:"
                                       << first.str();
}

// Position of f on a line where adjacent floats are 1 apart (+0 and -0 both at 0; +inf right
// after FLT_MAX), so the difference of two positions is their distance in ulp, across zero,
// denormals and overflow alike.
int64_t UlpPosition(float f) {
  int32_t i;
  std::memcpy(&i, &f, sizeof(i));
  return i >= 0 ? int64_t{i} : int64_t{INT32_MIN} - i;
}

// Within `ulps` ulp; NaN only where the reference is NaN. ulps == 0 means bitwise (any NaN).
::testing::AssertionResult UlpNear(const std::vector<float>& got, const std::vector<float>& want,
                                   int ulps) {
  if (ulps == 0) return BitwiseEqual(got, want);
  int64_t bad = 0;
  std::ostringstream first;
  for (size_t i = 0; i < want.size(); ++i) {
    const bool ok = std::isnan(want[i]) || std::isnan(got[i])
                        ? std::isnan(want[i]) && std::isnan(got[i])
                        : std::llabs(UlpPosition(got[i]) - UlpPosition(want[i])) <= ulps;
    if (!ok && bad++ < 5) {
      first << "\n  [" << i << "] got " << got[i] << " want " << want[i] << " ("
            << (UlpPosition(got[i]) - UlpPosition(want[i])) << " ulp)";
    }
  }
  if (bad == 0) return GuardIntact(got, static_cast<int64_t>(want.size()));
  return ::testing::AssertionFailure() << bad << " of " << want.size() << " beyond " << ulps
                                       << " ulp:" << first.str();
}

::testing::AssertionResult IndicesEqual(const std::vector<int64_t>& got,
                                        const std::vector<int64_t>& want) {
  int64_t bad = 0;
  std::ostringstream first;
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i] != want[i] && bad++ < 5) {
      first << "\n  [" << i << "] got " << got[i] << " want " << want[i];
    }
  }
  for (size_t i = want.size(); i < got.size(); ++i) {
    if (got[i] != -1) return ::testing::AssertionFailure() << "write past the end at " << i;
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << want.size() << " differ:"
                                       << first.str();
}

// ---- Elementwise -------------------------------------------------------------------------------

const std::vector<int64_t> kSizes = {1, 31, 4096, (int64_t{1} << 20) + 3};

std::vector<EwProgram> TestPrograms() {
  return {
      Program({Affine(1.5f, -0.25f)}),
      Program({Relu()}),
      Program({Affine(0.7f, 0.1f), Relu(), Affine(-3.0f, 2.0f), Relu(), Affine(1e-3f, 5.0f)}),
      // The benchmark's six-instruction program.
      Program({Affine(2.0f, 1.0f), Relu(), Affine(0.5f, -1.0f), Op(EwOpcode::kSqrt),
               Affine(3.0f, 0.25f), Relu()}),
      // Every exact opcode: bit-identical too.
      Program({Op(EwOpcode::kAbs), Affine(3.0f, -4.0f), Op(EwOpcode::kClamp, -2.5f, 9.0f),
               Op(EwOpcode::kSqrt), Op(EwOpcode::kClamp, 3.0f, -3.0f)}),
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
      for (const LaunchConfig& config : AllConfigs({1, 2, 4, 8})) {
        SCOPED_TRACE(Describe(config));
        Poison(d_out.get(), n);
        int kernels = -1;
        ASSERT_CUDA(Elementwise(d_in.get(), d_out.get(), n, program, config, &kernels));
        EXPECT_EQ(kernels, 1);
        EXPECT_EQ(DescribeElementwise(n, config).size(), 1u);
        EXPECT_TRUE(BitwiseEqual(Download(d_out.get(), n), want));
      }
    }
  }
}

// One instruction per case, on data spanning the interesting range of the function plus every
// special value; compared within EwHostDeviceUlp(op) (bitwise for the exact opcodes).
TEST_F(CudaOpsTest, ElementwiseOpcodesMatchReference) {
  struct Case {
    const char* name;
    EwInstr instr;
    float lo, hi;
  };
  const Case cases[] = {
      {"clamp", Op(EwOpcode::kClamp, -1.5f, 2.0f), -4.0f, 4.0f},
      {"clamp lo>hi", Op(EwOpcode::kClamp, 3.0f, -3.0f), -4.0f, 4.0f},
      {"abs", Op(EwOpcode::kAbs), -10.0f, 10.0f},
      {"sqrt", Op(EwOpcode::kSqrt), -10.0f, 1000.0f},
      {"exp", Op(EwOpcode::kExp), -95.0f, 95.0f},  // overflow and denormal results included
      {"log", Op(EwOpcode::kLog), -10.0f, 1000.0f},
      {"sigmoid", Op(EwOpcode::kSigmoid), -110.0f, 110.0f},
      {"tanh", Op(EwOpcode::kTanh), -12.0f, 12.0f},
      {"pow 2.5", Op(EwOpcode::kPow, 2.5f), -5.0f, 50.0f},
      {"pow 3", Op(EwOpcode::kPow, 3.0f), -50.0f, 50.0f},
      {"pow -1.5", Op(EwOpcode::kPow, -1.5f), -5.0f, 50.0f},
  };
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), kInf, -kInf, 0.0f, -0.0f,
                            1.0f, -1.0f, 1e-40f, -1e-40f, 3.4e38f, -3.4e38f, 88.72f, -103.0f,
                            1e-30f, 0.5f, 2.0f};
  for (int64_t n : kSizes) {
    SCOPED_TRACE("n=" + std::to_string(n));
    DeviceBuffer<float> d_in(n), d_out(n + kGuard);
    ASSERT_NE(d_in.get(), nullptr);
    ASSERT_NE(d_out.get(), nullptr);
    for (const Case& c : cases) {
      SCOPED_TRACE(c.name);
      std::vector<float> in = Random(n, c.lo, c.hi);
      for (size_t i = 0; i < std::size(specials) && i < in.size(); ++i) in[i] = specials[i];
      Upload(in, d_in.get());
      const EwProgram program = Program({c.instr});
      std::vector<float> want(n);
      cpu::Elementwise(in.data(), want.data(), n, program);
      for (const LaunchConfig& config : AllConfigs()) {
        SCOPED_TRACE(Describe(config));
        Poison(d_out.get(), n);
        ASSERT_CUDA(Elementwise(d_in.get(), d_out.get(), n, program, config));
        EXPECT_TRUE(UlpNear(Download(d_out.get(), n), want, EwHostDeviceUlp(c.instr.op)));
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

// Every staged strategy x stages {1, 2, 4, 8} x PDL off/on against direct and the CPU reference,
// bit for bit, over `sizes`.
// The shapes where tiling goes wrong: 1 element, lengths that are not whole 16-byte vectors,
// lengths one below, at and one above a whole number of tiles (each strategy and depth has its
// own tile size, detail::StagedGeometry), and a few tiles plus a ragged tail.
TEST_F(CudaOpsTest, ElementwiseStagedEdgeShapes) {
  std::vector<int64_t> sizes = {1, 2, 3, 5, 7, 13, 4096 + 1, 4096 + 3};
  // Tile sizes in floats of every strategy and depth: 4 floats x ranks x vectors per rank,
  // with ranks 256 (224 for the partitioned pipeline, whose first warp only copies).
  for (int ranks : {256, 224}) {
    for (int stages : {1, 2, 4, 8}) {
      const int per_rank = std::max(1, 32768 / (16 * ranks * stages));
      const int64_t tile = int64_t{4} * ranks * per_rank;
      for (int64_t n : {tile - 1, tile, tile + 1, 2 * tile + 2, 7 * tile + 5}) sizes.push_back(n);
    }
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  StagedMatchesDirect(sizes);
}

// A large input (256 MiB in and out) with a ragged tail: every block walks many
// tiles, so the barriers cycle through many phases. One test per strategy, so that the
// sanitizer runs (a test a process) take them in parallel: together, under racecheck, they
// ran past 446 s.
class CudaOpsPerStagedStagingTest : public CudaOpsTest,
                                    public ::testing::WithParamInterface<Staging> {};

TEST_P(CudaOpsPerStagedStagingTest, ElementwiseStagedLargeRaggedTail) {
  if (!RunsHere(GetParam())) GTEST_SKIP() << "bulk copies need sm_90 code";
  StagedMatchesDirect({(int64_t{1} << 26) + 7}, {GetParam()});
}

INSTANTIATE_TEST_SUITE_P(Stagings, CudaOpsPerStagedStagingTest,
                         ::testing::ValuesIn(kStagedStagings),
                         ::gpupipe::testing::StagingParamName);

// Every staged strategy at every depth 1..kMaxStages with per-block tile counts around the
// barrier wrap-around: tiles per block t in {1, S, S + 1, 2S + 1} for S stages, with half the
// blocks of the persistent grid taking t tiles and the other half t - 1 (so fewer, exactly as
// many and more tiles than stages, and two full turns of the ring). Bitwise against the CPU
// reference (which direct matches bitwise, ElementwiseMatchesReferenceBitwise). The sizes are
// prefixes of one random input, whose reference is the prefix of one reference. The launches
// are sized for a one-SM device (a persistent grid of a few blocks), so the inputs stay small
// enough for the sanitizer runs while every block turns the ring several times.
TEST_F(CudaOpsTest, ElementwiseStagedEveryDepthAroundWrapAround) {
  const EwProgram program =
      Program({Affine(2.0f, 1.0f), Relu(), Affine(0.5f, -1.0f), Op(EwOpcode::kSqrt)});
  struct Case {
    LaunchConfig config;
    int64_t tiles_per_block;
    int64_t n;
  };
  std::vector<Case> cases;
  int64_t n_max = 0;
  for (Staging staging : kStagedStagings) {
    if (!RunsHere(staging)) continue;
    const int ranks = staging == Staging::kPipeline ? 224 : 256;
    for (int stages = kMinStages; stages <= kMaxStages; ++stages) {
      LaunchConfig config = DefaultConfig();
      config.staging = staging;
      config.stages = stages;
      config.pdl = stages % 2 == 0;
      config.multiprocessors = 1;
      const int64_t per_rank = std::max(1, 32768 / (16 * ranks * stages));
      const int64_t tile = int64_t{4} * ranks * per_rank;
      // The persistent grid's size: what a launch over plenty of tiles gets.
      const int64_t grid = DescribeElementwise(tile * (int64_t{1} << 20), config).at(0).blocks;
      for (int64_t t : {int64_t{1}, int64_t{stages}, int64_t{stages} + 1, 2 * int64_t{stages} + 1}) {
        const int64_t full_tiles = std::max<int64_t>(1, grid * t - grid / 2);
        cases.push_back({config, t, full_tiles * tile + 3});
        n_max = std::max(n_max, cases.back().n);
      }
    }
  }
  const std::vector<float> in = Random(n_max, -8.0f, 8.0f);
  std::vector<float> want(n_max);
  cpu::Elementwise(in.data(), want.data(), n_max, program);
  DeviceBuffer<float> d_in(n_max), d_out(n_max + kGuard);
  ASSERT_NE(d_in.get(), nullptr);
  ASSERT_NE(d_out.get(), nullptr);
  Upload(in, d_in.get());
  for (const Case& c : cases) {
    SCOPED_TRACE(Describe(c.config) + " tiles_per_block=" + std::to_string(c.tiles_per_block) +
                 " n=" + std::to_string(c.n));
    Poison(d_out.get(), c.n);
    ASSERT_CUDA(Elementwise(d_in.get(), d_out.get(), c.n, program, c.config));
    EXPECT_TRUE(BitwiseEqual(Download(d_out.get(), c.n),
                             std::vector<float>(want.begin(), want.begin() + c.n)));
  }
}

void CudaOpsTest::StagedMatchesDirect(const std::vector<int64_t>& sizes,
                                      const std::vector<Staging>& stagings) {
  const EwProgram program =
      Program({Affine(2.0f, 1.0f), Relu(), Affine(0.5f, -1.0f), Op(EwOpcode::kSqrt)});
  for (int64_t n : sizes) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const std::vector<float> in = Random(n, -8.0f, 8.0f);
    std::vector<float> want(n);
    cpu::Elementwise(in.data(), want.data(), n, program);
    DeviceBuffer<float> d_in(n), d_out(n + kGuard);
    ASSERT_NE(d_in.get(), nullptr);
    ASSERT_NE(d_out.get(), nullptr);
    Upload(in, d_in.get());

    LaunchConfig direct = DefaultConfig();
    direct.staging = Staging::kDirect;
    Poison(d_out.get(), n);
    ASSERT_CUDA(Elementwise(d_in.get(), d_out.get(), n, program, direct));
    std::vector<float> from_direct = Download(d_out.get(), n);
    ASSERT_TRUE(BitwiseEqual(from_direct, want));
    from_direct.resize(n);  // the reference for the staged runs: values only, no guard

    for (Staging staging : stagings) {
      if (!RunsHere(staging)) continue;
      for (int stages : {1, 2, 4, 8}) {
        for (bool pdl : {false, true}) {
          LaunchConfig config = DefaultConfig();
          config.staging = staging;
          config.stages = stages;
          config.pdl = pdl;
          SCOPED_TRACE(Describe(config));
          Poison(d_out.get(), n);
          int kernels = -1;
          ASSERT_CUDA(Elementwise(d_in.get(), d_out.get(), n, program, config, &kernels));
          EXPECT_EQ(kernels, 1);
          const std::vector<float> got = Download(d_out.get(), n);
          EXPECT_TRUE(BitwiseEqual(got, from_direct));
        }
      }
    }
  }
}

// Back-to-back staged launches on one stream with PDL, each reading the previous one's output:
// a staged kernel's copies must not start before its predecessor has finished writing.
TEST_F(CudaOpsTest, ElementwiseStagedChainsWithPdl) {
  const int64_t n = (int64_t{1} << 22) + 9;
  const std::vector<float> in = Random(n, -4.0f, 4.0f);
  const EwProgram program = Program({Affine(1.25f, 0.5f)});
  DeviceBuffer<float> d_a(n + kGuard), d_b(n + kGuard);
  ASSERT_NE(d_a.get(), nullptr);
  ASSERT_NE(d_b.get(), nullptr);
  for (Staging staging : kStagedStagings) {
    if (!RunsHere(staging)) continue;
    for (int stages : {1, 3, 8}) {
      LaunchConfig config = DefaultConfig();
      config.staging = staging;
      config.stages = stages;
      config.pdl = true;
      SCOPED_TRACE(Describe(config));
      std::vector<float> want = in;
      Poison(d_a.get(), n);  // the guard past the end of whichever buffer ends up the result
      Upload(in, d_a.get());
      Poison(d_b.get(), n);
      float* src = d_a.get();
      float* dst = d_b.get();
      for (int step = 0; step < 6; ++step) {
        ASSERT_CUDA(Elementwise(src, dst, n, program, config));
        std::vector<float> next(n);
        cpu::Elementwise(want.data(), next.data(), n, program);
        want = std::move(next);
        std::swap(src, dst);
      }
      EXPECT_TRUE(BitwiseEqual(Download(src, n), want));
    }
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
// cols = 1 and odd widths; short and full register arrays for the single-pass ops), block per
// row (register-resident up to 8192 columns and beyond), rows split over blocks (few long
// rows), more segments than the grid (grid-stride), and more rows than the softmax workspace
// holds at once (several batches).
// The 1-row shapes are the Elementwise sizes as rows.
const std::vector<Shape> kShapes = {
    {1, 1},      {1, 31},    {1, 4096},   {1, (int64_t{1} << 20) + 3},
    {3, 5},      {1000, 33}, {64, 4097},  {2, (int64_t{1} << 20) + 1},
    {4096, 1},   {1, int64_t{1} << 22},   {3000, 1500}, {300000, 3},
    {1024, 1024}, {5, 700},  {2, 8192},   {3, 8193},
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
  // Defined below RowReduceMatchesReference.
  void StagedReduceMatchesReference(const std::vector<Shape>& shapes,
                                    const std::vector<RowReduceKind>& kinds,
                                    const std::vector<int>& stage_counts = {1, 2, 4, 8});

  std::optional<DeviceBuffer<unsigned char>> workspace_;
};

// The reference checks that run every shape x kind x pre under every config, one test per
// staging strategy: each is a separate gtest, so compute-sanitizer runs can shard them.
class CudaRowOpsPerStagingTest : public CudaRowOpsTest,
                                 public ::testing::WithParamInterface<Staging> {};

TEST_F(CudaRowOpsTest, WorkspaceIsAFewMiB) {
  EXPECT_GT(RowOpsWorkspaceBytes(), 0u);
  EXPECT_LE(RowOpsWorkspaceBytes(), size_t{8} << 20);
}

const char* Name(RowReduceKind kind) {
  switch (kind) {
    case RowReduceKind::kSum: return "sum";
    case RowReduceKind::kMin: return "min";
    case RowReduceKind::kMax: return "max";
    case RowReduceKind::kMean: return "mean";
    case RowReduceKind::kNorm2: return "norm2";
  }
  return "?";
}
const char* Name(RowNormalizeKind kind) {
  return kind == RowNormalizeKind::kL2Normalize ? "l2normalize" : "standardize";
}
constexpr RowReduceKind kReduceKinds[] = {RowReduceKind::kSum, RowReduceKind::kMin,
                                          RowReduceKind::kMax, RowReduceKind::kMean,
                                          RowReduceKind::kNorm2};
constexpr RowNormalizeKind kNormalizeKinds[] = {RowNormalizeKind::kL2Normalize,
                                                RowNormalizeKind::kStandardize};

// Exact opcodes only, so min/max/argmax stay exactly comparable; clamping creates ties.
EwProgram ExactPre() {
  return Program({Affine(1.25f, -0.5f), Op(EwOpcode::kAbs), Op(EwOpcode::kSqrt),
                  Op(EwOpcode::kClamp, 0.25f, 1.75f)});
}

std::vector<double> ReduceTolerance(RowReduceKind kind, const std::vector<float>& x,
                                    const std::vector<float>& want, Shape shape) {
  std::vector<double> tol(shape.rows, 0.0);
  for (int64_t r = 0; r < shape.rows; ++r) {
    double abs_sum = 0.0;
    for (int64_t c = 0; c < shape.cols; ++c) abs_sum += std::fabs(x[r * shape.cols + c]);
    switch (kind) {
      case RowReduceKind::kSum: tol[r] = 1e-5 * abs_sum + 1e-6; break;
      case RowReduceKind::kMean: tol[r] = (1e-5 * abs_sum + 1e-6) / shape.cols; break;
      case RowReduceKind::kNorm2: tol[r] = 1e-5 * std::fabs(want[r]) + 1e-30; break;
      default: break;  // min, max: exact
    }
  }
  return tol;
}

TEST_P(CudaRowOpsPerStagingTest, RowReduceMatchesReference) {
  if (!RunsHere(GetParam())) GTEST_SKIP() << "bulk copies need sm_90 code";
  const std::vector<EwProgram> pres = {EwProgram{}, ExactPre()};
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
      for (RowReduceKind kind : kReduceKinds) {
        SCOPED_TRACE(Name(kind));
        std::vector<float> want(shape.rows);
        cpu::RowReduce(x.data(), want.data(), shape.rows, shape.cols, kind);
        const std::vector<double> tol = ReduceTolerance(kind, x, want, shape);
        for (const LaunchConfig& config : ConfigsOf(GetParam())) {
          SCOPED_TRACE(Describe(config));
          Poison(d_out.get(), shape.rows);
          int kernels = -1;
          ASSERT_CUDA(RowReduce(d_in.get(), d_out.get(), shape.rows, shape.cols, kind, pre,
                                workspace_->get(), workspace_->bytes(), config, &kernels));
          EXPECT_TRUE(kernels == 1 || kernels == 2) << kernels << " kernels";
          EXPECT_EQ(DescribeRowReduce(shape.rows, shape.cols, kind, config).size(),
                    static_cast<size_t>(kernels));
          const std::vector<float> got = Download(d_out.get(), shape.rows);
          if (kind == RowReduceKind::kMin || kind == RowReduceKind::kMax) {
            EXPECT_TRUE(BitwiseEqual(got, want));
          } else {
            EXPECT_TRUE(Near(got, want, tol));
          }
        }
      }
    }
  }
}

// The staged strategies in the reduction's block path at every depth, on rows whose starts are
// not 16-byte aligned (odd cols: each row has a scalar head, whole staged tiles, a ragged rest)
// and on long rows split over blocks. Sum, mean and norm2 within tolerance of the reference
// (the staged order of accumulation differs from direct's), min and max exact.
void CudaRowOpsTest::StagedReduceMatchesReference(const std::vector<Shape>& shapes,
                                                  const std::vector<RowReduceKind>& kinds,
                                                  const std::vector<int>& stage_counts) {
  for (const Shape& shape : shapes) {
    SCOPED_TRACE(Describe(shape));
    const int64_t n = shape.rows * shape.cols;
    const std::vector<float> in = Random(n, -4.0f, 4.0f);
    DeviceBuffer<float> d_in(n), d_out(shape.rows + kGuard);
    ASSERT_NE(d_in.get(), nullptr);
    ASSERT_NE(d_out.get(), nullptr);
    Upload(in, d_in.get());
    for (RowReduceKind kind : kinds) {
      SCOPED_TRACE(Name(kind));
      std::vector<float> want(shape.rows);
      cpu::RowReduce(in.data(), want.data(), shape.rows, shape.cols, kind);
      const std::vector<double> tol = ReduceTolerance(kind, in, want, shape);
      for (Staging staging : kStagedStagings) {
        if (!RunsHere(staging)) continue;
        for (int stages : stage_counts) {
          LaunchConfig config = DefaultConfig();
          config.staging = staging;
          config.stages = stages;
          SCOPED_TRACE(Describe(config));
          Poison(d_out.get(), shape.rows);
          ASSERT_CUDA(RowReduce(d_in.get(), d_out.get(), shape.rows, shape.cols, kind,
                                EwProgram{}, workspace_->get(), workspace_->bytes(), config));
          const std::vector<float> got = Download(d_out.get(), shape.rows);
          if (kind == RowReduceKind::kMin || kind == RowReduceKind::kMax) {
            EXPECT_TRUE(BitwiseEqual(got, want));
          } else {
            EXPECT_TRUE(Near(got, want, tol));
          }
        }
      }
    }
  }
}

TEST_F(CudaRowOpsTest, RowReduceStagedShapes) {
  StagedReduceMatchesReference({{3, 100003}, {7, 65537}, {1, 4 * 32768 + 3}, {2, (1 << 20) + 1},
                                {600, 9001}},
                               {std::begin(kReduceKinds), std::end(kReduceKinds)});
}

// The segment loader calls its stager once per row segment, so the stage ring and its barrier
// phases carry over from one row to the next at arbitrary offsets: every depth 1..kMaxStages,
// many more rows than the grid has blocks (each visits several rows), rows of zero to a few
// tiles (4099 floats are less than one tile at depth 1), odd cols (a scalar head, whole tiles
// and a ragged rest per row).
TEST_F(CudaRowOpsTest, RowReduceStagedEveryDepthAcrossRows) {
  multiprocessors_ = 1;  // launches sized for one SM: a few blocks, each visiting many rows
  StagedReduceMatchesReference({{67, 9001}, {75, 4099}},
                               {RowReduceKind::kSum, RowReduceKind::kMax},
                               {1, 2, 3, 4, 5, 6, 7, 8});
}

TEST_F(CudaRowOpsTest, RowReduceStagedLargeRaggedTail) {
  StagedReduceMatchesReference({{1, (int64_t{1} << 26) + 7}},
                               {RowReduceKind::kSum, RowReduceKind::kMax});
}

TEST_F(CudaRowOpsTest, RowSumIsRowReduceSum) {
  const Shape shape = {64, 4097};
  const int64_t n = shape.rows * shape.cols;
  const std::vector<float> in = Random(n, -4.0f, 4.0f);
  DeviceBuffer<float> d_in(n), d_a(shape.rows + kGuard), d_b(shape.rows + kGuard);
  ASSERT_NE(d_in.get(), nullptr);
  ASSERT_NE(d_a.get(), nullptr);
  ASSERT_NE(d_b.get(), nullptr);
  Upload(in, d_in.get());
  Poison(d_a.get(), shape.rows);
  Poison(d_b.get(), shape.rows);
  const EwProgram pre = ExactPre();
  ASSERT_CUDA(RowSum(d_in.get(), d_a.get(), shape.rows, shape.cols, pre, workspace_->get(),
                     workspace_->bytes(), DefaultConfig()));
  ASSERT_CUDA(RowReduce(d_in.get(), d_b.get(), shape.rows, shape.cols, RowReduceKind::kSum, pre,
                        workspace_->get(), workspace_->bytes(), DefaultConfig()));
  const std::vector<float> b = Download(d_b.get(), shape.rows);
  EXPECT_TRUE(BitwiseEqual(Download(d_a.get(), shape.rows),
                           std::vector<float>(b.begin(), b.begin() + shape.rows)));
}

// NaN and infinities placed at random columns of the first rows, for every path (short rows,
// block per row, split rows).
TEST_F(CudaRowOpsTest, RowReduceAndArgmaxSpecialValues) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  const std::vector<Shape> shapes = {{3, 5}, {1000, 33}, {64, 4097}, {2, (int64_t{1} << 20) + 1},
                                     {1, int64_t{1} << 22}};
  for (const Shape& shape : shapes) {
    SCOPED_TRACE(Describe(shape));
    const int64_t n = shape.rows * shape.cols;
    std::vector<float> in = Random(n, -4.0f, 4.0f);
    // Row 0: two NaNs (the first must win argmax) and a +inf; row 1 (if any): +inf and -inf;
    // row 2 (if any): all -inf.
    auto at = [&](int64_t r) { return r * shape.cols + RandomIndex(shape.cols); };
    in[at(0)] = kInf;
    in[at(0)] = kNaN;
    in[at(0)] = kNaN;
    if (shape.rows > 1) {
      in[at(1)] = kInf;
      in[at(1)] = -kInf;
    }
    if (shape.rows > 2) std::fill(in.begin() + 2 * shape.cols, in.begin() + 3 * shape.cols, -kInf);
    DeviceBuffer<float> d_in(n), d_out(shape.rows + kGuard);
    DeviceBuffer<int64_t> d_idx(shape.rows + kGuard);
    ASSERT_NE(d_in.get(), nullptr);
    ASSERT_NE(d_out.get(), nullptr);
    ASSERT_NE(d_idx.get(), nullptr);
    Upload(in, d_in.get());
    std::vector<int64_t> want_idx(shape.rows);
    cpu::RowArgmax(in.data(), want_idx.data(), shape.rows, shape.cols);
    for (bool pdl : {false, true}) {
      LaunchConfig config = DefaultConfig();
      config.pdl = pdl;
      SCOPED_TRACE(Describe(config));
      for (RowReduceKind kind : kReduceKinds) {
        SCOPED_TRACE(Name(kind));
        std::vector<float> want(shape.rows);
        cpu::RowReduce(in.data(), want.data(), shape.rows, shape.cols, kind);
        Poison(d_out.get(), shape.rows);
        ASSERT_CUDA(RowReduce(d_in.get(), d_out.get(), shape.rows, shape.cols, kind, EwProgram{},
                              workspace_->get(), workspace_->bytes(), config));
        const std::vector<float> got = Download(d_out.get(), shape.rows);
        // Rows with specials have an exact result (NaN or +-inf) for every kind; the other rows
        // are covered by RowReduceMatchesReference.
        const int64_t special_rows = std::min<int64_t>(shape.rows, 3);
        for (int64_t r = 0; r < special_rows; ++r) {
          EXPECT_TRUE(std::isnan(want[r]) ? std::isnan(got[r]) : got[r] == want[r])
              << "row " << r << " got " << got[r] << " want " << want[r];
        }
        EXPECT_TRUE(GuardIntact(got, shape.rows));
      }
      ASSERT_CUDA(cudaMemsetAsync(d_idx.get(), 0xff, (shape.rows + kGuard) * sizeof(int64_t),
                                  stream_));
      ASSERT_CUDA(RowArgmax(d_in.get(), d_idx.get(), shape.rows, shape.cols, EwProgram{},
                            workspace_->get(), workspace_->bytes(), config));
      EXPECT_TRUE(IndicesEqual(Download(d_idx.get(), shape.rows), want_idx));
    }
  }
}

TEST_P(CudaRowOpsPerStagingTest, RowArgmaxMatchesReference) {
  if (!RunsHere(GetParam())) GTEST_SKIP() << "bulk copies need sm_90 code";
  // Integer-valued data: long rows hold the maximum many times, so "first" is tested; the
  // clamping pre creates more ties.
  const std::vector<EwProgram> pres = {EwProgram{}, ExactPre()};
  for (const Shape& shape : kShapes) {
    SCOPED_TRACE(Describe(shape));
    const int64_t n = shape.rows * shape.cols;
    const std::vector<float> in = RandomInts(n, -50, 50);
    DeviceBuffer<float> d_in(n);
    DeviceBuffer<int64_t> d_out(shape.rows + kGuard);
    ASSERT_NE(d_in.get(), nullptr);
    ASSERT_NE(d_out.get(), nullptr);
    Upload(in, d_in.get());
    for (const EwProgram& pre : pres) {
      SCOPED_TRACE("pre of " + std::to_string(pre.count) + " instructions");
      std::vector<float> x(n);
      cpu::Elementwise(in.data(), x.data(), n, pre);
      std::vector<int64_t> want(shape.rows);
      cpu::RowArgmax(x.data(), want.data(), shape.rows, shape.cols);
      for (const LaunchConfig& config : ConfigsOf(GetParam())) {
        SCOPED_TRACE(Describe(config));
        ASSERT_CUDA(cudaMemsetAsync(d_out.get(), 0xff, (shape.rows + kGuard) * sizeof(int64_t),
                                    stream_));
        int kernels = -1;
        ASSERT_CUDA(RowArgmax(d_in.get(), d_out.get(), shape.rows, shape.cols, pre,
                              workspace_->get(), workspace_->bytes(), config, &kernels));
        EXPECT_TRUE(kernels == 1 || kernels == 2) << kernels << " kernels";
        EXPECT_EQ(DescribeRowArgmax(shape.rows, shape.cols, config).size(),
                  static_cast<size_t>(kernels));
        EXPECT_TRUE(IndicesEqual(Download(d_out.get(), shape.rows), want));
      }
    }
  }
}

std::vector<double> NormalizeTolerance(RowNormalizeKind kind, const std::vector<float>& x,
                                       const std::vector<float>& want, Shape shape) {
  std::vector<double> tol(x.size());
  for (int64_t r = 0; r < shape.rows; ++r) {
    const float* xr = x.data() + r * shape.cols;
    double max_abs = 0.0, sum = 0.0;
    for (int64_t c = 0; c < shape.cols; ++c) {
      max_abs = std::max(max_abs, std::fabs(static_cast<double>(xr[c])));
      sum += xr[c];
    }
    const double mean = sum / shape.cols;
    double m2 = 0.0;
    for (int64_t c = 0; c < shape.cols; ++c) m2 += (xr[c] - mean) * (xr[c] - mean);
    const double sd = std::sqrt(m2 / shape.cols);
    for (int64_t c = 0; c < shape.cols; ++c) {
      const int64_t i = r * shape.cols + c;
      const double y = std::fabs(want[i]);
      tol[i] = kind == RowNormalizeKind::kL2Normalize ? 1e-6 + 1e-5 * y
                                                      : 1e-5 * (max_abs / sd + y);
    }
  }
  return tol;
}

TEST_P(CudaRowOpsPerStagingTest, RowNormalizeMatchesReference) {
  if (!RunsHere(GetParam())) GTEST_SKIP() << "bulk copies need sm_90 code";
  // The second pre moves every row to about 1e4 +- 2: |mean| / std ~ 1e4, where a variance
  // from E[x^2] - E[x]^2 in float would be dominated by rounding.
  const std::vector<EwProgram> pres = {EwProgram{}, Program({Affine(0.5f, 1e4f)})};
  for (const Shape& shape : kShapes) {
    SCOPED_TRACE(Describe(shape));
    const int64_t n = shape.rows * shape.cols;
    const std::vector<float> in = Random(n, -4.0f, 4.0f);
    DeviceBuffer<float> d_in(n), d_out(n + kGuard);
    ASSERT_NE(d_in.get(), nullptr);
    ASSERT_NE(d_out.get(), nullptr);
    Upload(in, d_in.get());
    for (const EwProgram& pre : pres) {
      SCOPED_TRACE("pre of " + std::to_string(pre.count) + " instructions");
      std::vector<float> x(n);
      cpu::Elementwise(in.data(), x.data(), n, pre);
      for (RowNormalizeKind kind : kNormalizeKinds) {
        SCOPED_TRACE(Name(kind));
        std::vector<float> want(n);
        cpu::RowNormalize(x.data(), want.data(), shape.rows, shape.cols, kind);
        const std::vector<double> tol = NormalizeTolerance(kind, x, want, shape);
        for (const LaunchConfig& config : ConfigsOf(GetParam())) {
          SCOPED_TRACE(Describe(config));
          Poison(d_out.get(), n);
          int kernels = -1;
          ASSERT_CUDA(RowNormalize(d_in.get(), d_out.get(), shape.rows, shape.cols, kind, pre,
                                   workspace_->get(), workspace_->bytes(), config, &kernels));
          // One kernel for register-resident rows, else stats + normalize per batch.
        EXPECT_TRUE(shape.cols <= 8192 ? kernels == 1 : kernels >= 2 && kernels % 2 == 0)
            << kernels << " kernels";
          EXPECT_EQ(DescribeRowNormalize(shape.rows, shape.cols, kind, config).size(),
                    static_cast<size_t>(kernels));
          EXPECT_TRUE(Near(Download(d_out.get(), n), want, tol));
        }
      }
    }
  }
}

TEST_F(CudaRowOpsTest, RowNormalizeZeroAndConstantRowsAreNaN) {
  // Row 0 zero, row 1 constant, row 2 ordinary; long rows too so the split path merges
  // empty-variance segments.
  for (int64_t cols : {int64_t{7}, int64_t{1} << 20}) {
    SCOPED_TRACE("cols=" + std::to_string(cols));
    const int64_t rows = 3, n = rows * cols;
    std::vector<float> in(n, 0.0f);
    std::fill(in.begin() + cols, in.begin() + 2 * cols, 0.3f);
    const std::vector<float> ordinary = Random(cols, -1.0f, 1.0f);
    std::copy(ordinary.begin(), ordinary.end(), in.begin() + 2 * cols);
    DeviceBuffer<float> d_in(n), d_out(n + kGuard);
    ASSERT_NE(d_in.get(), nullptr);
    ASSERT_NE(d_out.get(), nullptr);
    Upload(in, d_in.get());
    for (RowNormalizeKind kind : kNormalizeKinds) {
      SCOPED_TRACE(Name(kind));
      std::vector<float> want(n);
      cpu::RowNormalize(in.data(), want.data(), rows, cols, kind);
      // Set memory to 0 instead of NaN poison, so a NaN result proves it was written.
      ASSERT_CUDA(cudaMemsetAsync(d_out.get(), 0, n * sizeof(float), stream_));
      ASSERT_CUDA(RowNormalize(d_in.get(), d_out.get(), rows, cols, kind, EwProgram{},
                               workspace_->get(), workspace_->bytes(), DefaultConfig()));
      std::vector<float> got = Download(d_out.get(), n);
      got.resize(n);
      int64_t bad = 0;
      for (int64_t i = 0; i < n; ++i) {
        const bool ok = std::isnan(want[i])
                            ? std::isnan(got[i])
                            : std::fabs(got[i] - want[i]) <= 1e-5 * (1.0 + std::fabs(want[i]));
        if (!ok && bad++ < 5) {
          ADD_FAILURE() << "[" << i << "] got " << got[i] << " want " << want[i];
        }
      }
      // The zero row is NaN for both kinds; the constant row for standardize.
      EXPECT_TRUE(std::isnan(want[0]));
      if (kind == RowNormalizeKind::kStandardize) EXPECT_TRUE(std::isnan(want[cols]));
    }
  }
}

TEST_P(CudaRowOpsPerStagingTest, RowSoftmaxMatchesReference) {
  if (!RunsHere(GetParam())) GTEST_SKIP() << "bulk copies need sm_90 code";
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
      for (const LaunchConfig& config : ConfigsOf(GetParam())) {
        SCOPED_TRACE(Describe(config));
        Poison(d_out.get(), n);
        int kernels = -1;
        ASSERT_CUDA(RowSoftmax(d_in.get(), d_out.get(), shape.rows, shape.cols, pre,
                               workspace_->get(), workspace_->bytes(), config, &kernels));
        // One kernel for register-resident rows, else stats + normalize per batch.
        EXPECT_TRUE(shape.cols <= 8192 ? kernels == 1 : kernels >= 2 && kernels % 2 == 0)
            << kernels << " kernels";
        EXPECT_EQ(DescribeRowSoftmax(shape.rows, shape.cols, config).size(),
                  static_cast<size_t>(kernels));
        EXPECT_TRUE(Near(Download(d_out.get(), n), want, tol));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Stagings, CudaRowOpsPerStagingTest, ::testing::ValuesIn(kAllStagings),
                         ::gpupipe::testing::StagingParamName);

TEST_F(CudaRowOpsTest, RowSoftmaxSplitRowSpecialValues) {
  // Rows split into segments: row 0 starts with whole segments of -inf (empty statistics that
  // must drop out of the merge), row 1 holds a NaN inside an otherwise -inf stretch, row 2 is
  // all -inf.
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const int64_t rows = 3, cols = 10000;
  std::vector<float> in = Random(rows * cols, -10.0f, 10.0f);
  for (int64_t i = 0; i < 7000; ++i) in[i] = -kInf;
  for (int64_t i = cols; i < cols + 5000; ++i) in[i] = -kInf;
  in[cols + 10] = std::numeric_limits<float>::quiet_NaN();
  for (int64_t i = 2 * cols; i < 3 * cols; ++i) in[i] = -kInf;
  std::vector<float> want(in.size());
  cpu::RowSoftmax(in.data(), want.data(), rows, cols);
  DeviceBuffer<float> d_in(in.size()), d_out(in.size() + kGuard);
  ASSERT_NE(d_in.get(), nullptr);
  ASSERT_NE(d_out.get(), nullptr);
  Upload(in, d_in.get());
  for (const LaunchConfig& config : AllConfigs()) {
    SCOPED_TRACE(Describe(config));
    Poison(d_out.get(), rows * cols);
    ASSERT_CUDA(RowSoftmax(d_in.get(), d_out.get(), rows, cols, EwProgram{}, workspace_->get(),
                           workspace_->bytes(), config));
    const std::vector<float> got = Download(d_out.get(), rows * cols);
    int bad = 0;
    for (int64_t i = 0; i < rows * cols && bad < 10; ++i) {
      const bool ok = std::isnan(want[i]) ? std::isnan(got[i])
                                          : std::fabs(got[i] - want[i]) <= 1e-6 + 1e-5 * want[i];
      if (!ok) {
        ++bad;
        ADD_FAILURE() << "element " << i << " = " << got[i] << " want " << want[i];
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
    EXPECT_EQ(RowReduce(in, out, 4, 4, RowReduceKind::kMax, prog, ws, ws_bytes, config, &k),
              cudaErrorInvalidValue);
    EXPECT_EQ(k, 0);
    EXPECT_EQ(RowArgmax(in, reinterpret_cast<int64_t*>(out), 4, 4, prog, ws, ws_bytes, config, &k),
              cudaErrorInvalidValue);
    EXPECT_EQ(k, 0);
    EXPECT_EQ(RowNormalize(in, out, 4, 4, RowNormalizeKind::kStandardize, prog, ws, ws_bytes,
                           config, &k),
              cudaErrorInvalidValue);
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
  auto* idx = reinterpret_cast<int64_t*>(out);
  const auto bad_reduce = static_cast<RowReduceKind>(kRowReduceKindCount);
  const auto bad_norm = static_cast<RowNormalizeKind>(-1);
  EXPECT_EQ(RowReduce(in, out, 4, 4, bad_reduce, prog, ws, ws_bytes, ok), cudaErrorInvalidValue);
  EXPECT_EQ(RowReduce(in, out, 0, 4, RowReduceKind::kMin, prog, ws, ws_bytes, ok),
            cudaErrorInvalidValue);
  EXPECT_EQ(RowReduce(in, out, 4, 4, RowReduceKind::kMin, prog, ws, ws_bytes - 1, ok),
            cudaErrorInvalidValue);
  EXPECT_EQ(RowNormalize(in, out, 4, 4, bad_norm, prog, ws, ws_bytes, ok), cudaErrorInvalidValue);
  EXPECT_EQ(RowNormalize(in + 1, out, 4, 4, RowNormalizeKind::kL2Normalize, prog, ws, ws_bytes,
                         ok),
            cudaErrorInvalidValue);
  EXPECT_EQ(RowNormalize(in, out, 4, 4, RowNormalizeKind::kL2Normalize, bad_op, ws, ws_bytes, ok),
            cudaErrorInvalidValue);
  EXPECT_EQ(RowArgmax(in, nullptr, 4, 4, prog, ws, ws_bytes, ok), cudaErrorInvalidValue);
  EXPECT_EQ(RowArgmax(in, reinterpret_cast<int64_t*>(out + 1), 4, 4, prog, ws, ws_bytes, ok),
            cudaErrorInvalidValue);  // d_out not 8-byte aligned
  EXPECT_EQ(RowArgmax(in, idx, 4, 4, bad_op, ws, ws_bytes, ok), cudaErrorInvalidValue);
  EXPECT_EQ(RowArgmax(in, idx, 4, 4, prog, nullptr, ws_bytes, ok), cudaErrorInvalidValue);
  // Rejections leave no error behind for the next unrelated check.
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// ---- cross-op PDL chains ----------------------------------------------------------------------

// Ops back to back on one stream with PDL on every launch, ping-ponging two buffers as the
// engine does: each op writes the buffer the previous op read, so a kernel touching memory
// before its griddepcontrol wait would corrupt the previous op's input (WAR) or read its
// unfinished output (RAW). Repeated, so a race has several chances to show.
TEST_F(CudaRowOpsTest, PdlChainAcrossOpsMatchesReference) {
  const std::vector<Shape> shapes = {{1000, 33}, {64, 4097}, {2, (int64_t{1} << 20) + 1},
                                     {300000, 3}};
  const EwProgram first = Program({Affine(0.5f, 0.25f), Op(EwOpcode::kTanh),
                                   Op(EwOpcode::kClamp, -0.75f, 0.75f)});
  // log(softmax): values spread O(1) around -log(cols). Rows whose clamped values came out
  // (nearly) equal are ill-conditioned for standardize (the float mean's rounding, amplified
  // by 1/std), so max and norm2 are checked only on rows whose spread is clear.
  const EwProgram second = Program({Op(EwOpcode::kLog)});
  const EwProgram pre = Program({Affine(1.0f, 0.5f)});
  for (const Shape& shape : shapes) {
    SCOPED_TRACE(Describe(shape));
    const int64_t rows = shape.rows, cols = shape.cols, n = rows * cols;
    const std::vector<float> in = Random(n, -3.0f, 3.0f);

    // Reference: a -> e1 -> softmax -> e2 -> standardize (pre) -> {max, norm2}, argmax.
    std::vector<float> a(n), b(n), x(n);
    cpu::Elementwise(in.data(), a.data(), n, first);
    cpu::RowSoftmax(a.data(), b.data(), rows, cols);
    cpu::Elementwise(b.data(), a.data(), n, second);
    std::vector<float> normalized(n);
    cpu::Elementwise(a.data(), x.data(), n, pre);
    cpu::RowNormalize(x.data(), normalized.data(), rows, cols, RowNormalizeKind::kStandardize);
    std::vector<float> want_max(rows), want_norm(rows);
    std::vector<int64_t> want_arg(rows);
    cpu::RowReduce(normalized.data(), want_max.data(), rows, cols, RowReduceKind::kMax);
    cpu::RowReduce(normalized.data(), want_norm.data(), rows, cols, RowReduceKind::kNorm2);
    cpu::RowArgmax(normalized.data(), want_arg.data(), rows, cols);
    // Values after two normalizations carry well under 1e-3 error; argmax is checked only on
    // rows whose top two values are clearly apart.
    std::vector<bool> clear_arg(rows, true);
    std::vector<bool> well_conditioned(rows, true);
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = x.data() + r * cols;
      float lo = row[0], hi = row[0], scale = 0.0f;
      for (int64_t c = 0; c < cols; ++c) {
        lo = std::min(lo, row[c]);
        hi = std::max(hi, row[c]);
        scale = std::max(scale, std::fabs(row[c]));
      }
      well_conditioned[r] = hi - lo > 1e-3f * scale;
    }
    for (int64_t r = 0; r < rows; ++r) {
      const float* y = normalized.data() + r * cols;
      for (int64_t c = 0; c < cols; ++c) {
        if (c != want_arg[r] && !(y[want_arg[r]] - y[c] > 1e-2f)) clear_arg[r] = false;
      }
    }

    DeviceBuffer<float> d_a(n + kGuard), d_b(n + kGuard);
    DeviceBuffer<int64_t> d_arg(rows + kGuard);
    ASSERT_NE(d_a.get(), nullptr);
    ASSERT_NE(d_b.get(), nullptr);
    ASSERT_NE(d_arg.get(), nullptr);
    for (Staging staging : kAllStagings) {
      if (!RunsHere(staging)) continue;
      LaunchConfig config = DefaultConfig();
      config.pdl = true;
      config.staging = staging;
      SCOPED_TRACE(Describe(config));
      for (int rep = 0; rep < 3; ++rep) {
        SCOPED_TRACE("repetition " + std::to_string(rep));
        Poison(d_b.get(), n);
        Upload(in, d_a.get());
        void* ws = workspace_->get();
        const size_t wsb = workspace_->bytes();
        // No synchronization between the ops: they are chained on the stream only.
        ASSERT_CUDA(Elementwise(d_a.get(), d_b.get(), n, first, config));
        ASSERT_CUDA(RowSoftmax(d_b.get(), d_a.get(), rows, cols, EwProgram{}, ws, wsb, config));
        ASSERT_CUDA(Elementwise(d_a.get(), d_b.get(), n, second, config));
        ASSERT_CUDA(RowNormalize(d_b.get(), d_a.get(), rows, cols,
                                 RowNormalizeKind::kStandardize, pre, ws, wsb, config));
        // The reductions overwrite the input of the op before (d_b) while it may still run.
        ASSERT_CUDA(RowReduce(d_a.get(), d_b.get(), rows, cols, RowReduceKind::kMax, EwProgram{},
                              ws, wsb, config));
        ASSERT_CUDA(RowArgmax(d_a.get(), d_arg.get(), rows, cols, EwProgram{}, ws, wsb, config));
        ASSERT_CUDA(RowReduce(d_a.get(), d_b.get() + rows, rows, cols, RowReduceKind::kNorm2,
                              EwProgram{}, ws, wsb, config));
        std::vector<float> got = Download(d_b.get(), 2 * rows);
        const std::vector<int64_t> got_arg = Download(d_arg.get(), rows);
        int64_t bad = 0;
        for (int64_t r = 0; r < rows; ++r) {
          const bool max_ok =
              !well_conditioned[r] ||
              (std::isnan(want_max[r])
                   ? std::isnan(got[r])
                   : std::fabs(got[r] - want_max[r]) <= 1e-3 * (1 + want_max[r]));
          // The norm of a standardized row is sqrt(cols).
          const bool norm_ok =
              !well_conditioned[r] ||
              (std::isnan(want_norm[r])
                   ? std::isnan(got[rows + r])
                   : std::fabs(got[rows + r] - want_norm[r]) <= 1e-3 * want_norm[r]);
          const bool arg_ok = !clear_arg[r] || got_arg[r] == want_arg[r];
          if (!(max_ok && norm_ok && arg_ok) && bad++ < 5) {
            ADD_FAILURE() << "row " << r << ": max " << got[r] << " want " << want_max[r]
                          << ", norm2 " << got[rows + r] << " want " << want_norm[r]
                          << ", argmax " << got_arg[r] << " want " << want_arg[r];
          }
        }
      }
    }
  }
}

// ---- launch descriptions -----------------------------------------------------------------------

// Describe* need no device: these run everywhere.
LaunchConfig DescribeConfig() {
  LaunchConfig c;  // stream left null: describing ignores it
  // An H200's, so that the descriptions do not depend on the machine.
  c.multiprocessors = 132;
  c.arch = 90;
  c.max_smem_per_block = 227 << 10;
  return c;
}

std::vector<std::string> Names(const std::vector<KernelLaunchInfo>& launches) {
  std::vector<std::string> names;
  for (const KernelLaunchInfo& k : launches) {
    EXPECT_GE(k.blocks, 1) << k.name;
    // 256-thread blocks, 128 for register-resident rows of at most 1024 columns, or 512 for
    // shared-memory-resident rows.
    EXPECT_TRUE(k.threads == 256 || k.threads == 128 || k.threads == 512)
        << k.name << ": " << k.threads;
    names.push_back(k.name);
  }
  return names;
}

using Strings = std::vector<std::string>;

TEST(DescribeLaunches, Elementwise) {
  LaunchConfig c = DescribeConfig();
  c.staging = Staging::kDirect;
  EXPECT_EQ(Names(DescribeElementwise(1 << 20, c)), Strings{"elementwise.direct"});
  c.staging = Staging::kPipeline;
  EXPECT_EQ(Names(DescribeElementwise(1 << 20, c)), Strings{"elementwise.pipeline"});
  c.staging = Staging::kPipelineThread;
  EXPECT_EQ(Names(DescribeElementwise(1 << 20, c)), Strings{"elementwise.pipeline-thread"});
  c.staging = Staging::kPrimitives;
  EXPECT_EQ(Names(DescribeElementwise(1 << 20, c)), Strings{"elementwise.primitives"});
  c.staging = Staging::kBulk;
  EXPECT_EQ(Names(DescribeElementwise(1 << 20, c)), Strings{"elementwise.bulk"});
  // auto resolves through the tuning table, which holds no measured entries yet: direct.
  c.staging = Staging::kAuto;
  EXPECT_EQ(Names(DescribeElementwise(1 << 20, c)), Strings{"elementwise.direct"});
  c.staging = Staging::kPipeline;
  EXPECT_TRUE(DescribeElementwise(0, c).empty());
  EXPECT_TRUE(DescribeElementwise(-1, c).empty());
  c.stages = 0;
  EXPECT_TRUE(DescribeElementwise(16, c).empty());
  // Persistent grids are capped by the multiprocessor count.
  c = DescribeConfig();
  const std::vector<KernelLaunchInfo> big = DescribeElementwise(int64_t{1} << 30, c);
  ASSERT_EQ(big.size(), 1u);
  EXPECT_LE(big[0].blocks, 132 * 8);
}

// The `auto` table: well-formed entries, and until the H200 measurements are in, `direct` for
// every family, type and size class. Host-only: runs without a GPU.
TEST(StagingTable, EntriesAreValidAndDefaultToDirect) {
  for (const tuning::StagingTableEntry& e : tuning::kStagingTable) {
    EXPECT_NE(e.staging, Staging::kAuto);
    EXPECT_TRUE(e.stages == 0 || (e.stages >= kMinStages && e.stages <= kMaxStages));
    EXPECT_NE(std::string(e.provenance), "");
  }
  EXPECT_EQ(tuning::SizeClassOf(tuning::StagingFamily::kElementwise, 1, 1 << 30, 132),
            tuning::SizeClass::kElementwise);
  EXPECT_EQ(tuning::SizeClassOf(tuning::StagingFamily::kRowReduce, 4096, 8192, 132),
            tuning::SizeClass::kShortRows);
  EXPECT_EQ(tuning::SizeClassOf(tuning::StagingFamily::kRowReduce, 4, 8193, 132),
            tuning::SizeClass::kFewLongRows);
  EXPECT_EQ(tuning::SizeClassOf(tuning::StagingFamily::kRowReduce, 132, 8193, 132),
            tuning::SizeClass::kManyLongRows);
  LaunchConfig c = DescribeConfig();
  c.staging = Staging::kAuto;
  c.stages = 3;
  for (auto family : {tuning::StagingFamily::kElementwise, tuning::StagingFamily::kRowReduce}) {
    for (ElementType type : {ElementType::kFloat32, ElementType::kFloat64,
                             ElementType::kFloat16, ElementType::kInt32}) {
      for (int64_t rows : {1, 4, 4096}) {
        const tuning::StagingChoice choice = tuning::ResolveStaging(c, family, type, rows, 1 << 20);
        EXPECT_EQ(choice.staging, Staging::kDirect);
        EXPECT_EQ(choice.stages, 3);
      }
    }
  }
  c.staging = Staging::kBulk;  // an explicit strategy is kept as is
  EXPECT_EQ(tuning::ResolveStaging(c, tuning::StagingFamily::kElementwise, ElementType::kFloat32,
                                   1, 1 << 20)
                .staging,
            Staging::kBulk);
}

TEST(DescribeLaunches, RowReduceAndArgmax) {
  const LaunchConfig c = DescribeConfig();
  EXPECT_EQ(Names(DescribeRowReduce(3000, 1500, RowReduceKind::kSum, c)), Strings{"sum.rows"});
  EXPECT_EQ(Names(DescribeRowReduce(1000, 33, RowReduceKind::kNorm2, c)), Strings{"norm2.rows"});
  // Few long rows: split over blocks, then combined.
  EXPECT_EQ(Names(DescribeRowReduce(2, (1 << 20) + 1, RowReduceKind::kSum, c)),
            (Strings{"sum.partials", "sum.combine"}));
  EXPECT_EQ(Names(DescribeRowReduce(1, 1 << 22, RowReduceKind::kMin, c)),
            (Strings{"min.partials", "min.combine"}));
  EXPECT_EQ(Names(DescribeRowReduce(1, 1 << 22, RowReduceKind::kMean, c)),
            (Strings{"mean.partials", "mean.combine"}));
  EXPECT_EQ(Names(DescribeRowReduce(1, 1 << 22, RowReduceKind::kMax, c)),
            (Strings{"max.partials", "max.combine"}));
  EXPECT_EQ(Names(DescribeRowArgmax(2, (1 << 20) + 1, c)),
            (Strings{"argmax.partials", "argmax.combine"}));
  EXPECT_EQ(Names(DescribeRowArgmax(300000, 3, c)), Strings{"argmax.rows"});
  EXPECT_TRUE(DescribeRowReduce(0, 4, RowReduceKind::kSum, c).empty());
  EXPECT_TRUE(DescribeRowReduce(4, 4, static_cast<RowReduceKind>(99), c).empty());
  EXPECT_TRUE(DescribeRowArgmax(4, 0, c).empty());
}

TEST(DescribeLaunches, MultipassOpsListEveryBatch) {
  const LaunchConfig c = DescribeConfig();
  // Rows that fit in registers (up to 8192 columns): one kernel, whatever the row count.
  EXPECT_EQ(Names(DescribeRowSoftmax(3000, 1500, c)), Strings{"softmax.rows"});
  EXPECT_EQ(Names(DescribeRowSoftmax(1024, 1024, c)), Strings{"softmax.rows"});
  EXPECT_EQ(Names(DescribeRowSoftmax(300000, 3, c)), Strings{"softmax.rows"});
  EXPECT_EQ(Names(DescribeRowSoftmax(2, 8192, c)), Strings{"softmax.rows"});
  EXPECT_EQ(Names(DescribeRowNormalize(64, 4097, RowNormalizeKind::kL2Normalize, c)),
            Strings{"l2normalize.rows"});
  EXPECT_EQ(Names(DescribeRowNormalize(300000, 3, RowNormalizeKind::kStandardize, c)),
            Strings{"standardize.rows"});
  // Enough rows too long for registers but short enough for shared memory: one kernel.
  EXPECT_EQ(Names(DescribeRowSoftmax(16384, 16384, c)), Strings{"softmax.rows"});
  EXPECT_EQ(Names(DescribeRowNormalize(16384, 16384, RowNormalizeKind::kStandardize, c)),
            Strings{"standardize.rows"});
  EXPECT_EQ(Names(DescribeRowNormalize(600, 8193, RowNormalizeKind::kL2Normalize, c)),
            Strings{"l2normalize.rows"});
  // Few such rows: split over blocks, statistics + normalization.
  EXPECT_EQ(Names(DescribeRowSoftmax(2, 8193, c)),
            (Strings{"softmax.stats", "softmax.normalize"}));
  EXPECT_EQ(Names(DescribeRowNormalize(64, 8193, RowNormalizeKind::kL2Normalize, c)),
            (Strings{"l2normalize.stats", "l2normalize.normalize"}));
  // 300000 one-segment rows too long for registers and shared memory: more statistics than
  // the workspace holds at once, so several batches, each a stats + normalize pair; 16-byte
  // normalize statistics need more batches than 8-byte softmax ones. (Described only:
  // nothing is allocated.)
  const Strings softmax = Names(DescribeRowSoftmax(300000, 60000, c));
  const Strings standardize =
      Names(DescribeRowNormalize(300000, 60000, RowNormalizeKind::kStandardize, c));
  ASSERT_GE(softmax.size(), 4u);
  ASSERT_GT(standardize.size(), softmax.size());
  for (size_t i = 0; i < standardize.size(); ++i) {
    EXPECT_EQ(standardize[i], i % 2 == 0 ? "standardize.stats" : "standardize.normalize");
  }
  for (size_t i = 0; i < softmax.size(); ++i) {
    EXPECT_EQ(softmax[i], i % 2 == 0 ? "softmax.stats" : "softmax.normalize");
  }
  EXPECT_TRUE(DescribeRowSoftmax(-1, 3, c).empty());
  EXPECT_TRUE(DescribeRowNormalize(3, 3, static_cast<RowNormalizeKind>(2), c).empty());
}

}  // namespace
}  // namespace gpupipe::kernels::cuda
