// Every op of the CUDA host API in every element type it accepts (float32, float64, float16,
// int32) against the CPU reference, on fresh random data (the seed is printed with every
// failure; GPUPIPE_TEST_SEED replays a test), for each staging (direct, pipeline) and stage count
// (1, 2, 4), over edge shapes: 1 element, rows of length 1, lengths that are not multiples of
// the vector width (so rows start unaligned), many short rows, and long rows, up to one row of
// 2^26 + 7 for one op of each family and type.
//
// Tolerances (|gpu - reference|), by type; hulp(y) is one float16 ulp at the reference y:
//  - elementwise: exact opcodes bit-identical in every type; a transcendental program within
//    EwHostDeviceUlp(op) ulp for float32 and float64 (CUDA's double functions are within 2 ulp,
//    so the float32 bounds hold), and 1 hulp for float16 (the float32 results differ by a few
//    float ulp, which moves the rounding to float16 by at most one step); int32 exact;
//  - sum: e * sum|x| (+ 1 hulp for float16), e = 1e-5 for float32/float16 (float32
//    accumulation), 1e-13 for float64; mean: the same / cols; norm2: e * |y| (+ 1 hulp);
//  - min, max, argmax, and every int32 result: exact;
//  - softmax: 0.1 * e + e * |y| (+ 1 hulp);
//  - l2normalize: 0.1 * e + e * |y| (+ 1 hulp); standardize: e * (max|x| / std + |y|)
//    (+ 1 hulp), the rounding of the mean seen through the division by std;
//  - NaN where the reference is NaN; infinities equal.
// The float16 reference is the float32 reference rounded once (kernels::cpu's rule), which is
// what the kernels compute: float16 in, float32 math, one rounding out.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/float16.h"
#include "kernels/cpu/reference_ops.h"
#include "kernels/cuda/device_caps.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/tuning/row_policy.h"
#include "tests/testing/random_tensor.h"
#include "tests/testing/cuda_device.h"
#include "tests/testing/param_names.h"

namespace gpupipe::kernels::cuda {
namespace {

#define ASSERT_CUDA(expr) ASSERT_EQ((expr), cudaSuccess) << cudaGetErrorString(cudaGetLastError())

constexpr ElementType kAllTypes[] = {ElementType::kFloat32, ElementType::kFloat64,
                                     ElementType::kFloat16, ElementType::kInt32};
constexpr ElementType kFloatTypes[] = {ElementType::kFloat32, ElementType::kFloat64,
                                       ElementType::kFloat16};
// Bytes after every output, poisoned and checked untouched.
constexpr size_t kGuardBytes = 64;

EwInstr I(EwOpcode op, double a = 0.0, double b = 0.0) { return {op, a, b}; }
EwProgram Program(std::initializer_list<EwInstr> instrs) {
  EwProgram p;
  for (const EwInstr& in : instrs) p.Append(in);
  return p;
}
constexpr double kInf = std::numeric_limits<double>::infinity();

class DeviceBytes {
 public:
  explicit DeviceBytes(size_t bytes) {
    if (cudaMalloc(&ptr_, bytes ? bytes : 1) != cudaSuccess) ptr_ = nullptr;
  }
  ~DeviceBytes() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  char* get() const { return static_cast<char*>(ptr_); }

 private:
  void* ptr_ = nullptr;
};

// ---- data ----------------------------------------------------------------------------------

std::vector<char> RandomData(ElementType type, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> real(-4.0, 4.0);
  std::vector<char> out(static_cast<size_t>(n) * ElementSize(type));
  for (int64_t i = 0; i < n; ++i) {
    switch (type) {
      case ElementType::kFloat32: reinterpret_cast<float*>(out.data())[i] = real(rng); break;
      case ElementType::kFloat64: reinterpret_cast<double*>(out.data())[i] = real(rng); break;
      case ElementType::kFloat16:
        reinterpret_cast<HalfBits*>(out.data())[i] = FloatToHalf(static_cast<float>(real(rng)));
        break;
      case ElementType::kInt32: {
        // Mostly small values; one in 16 anywhere in the range (wrap-around, INT32_MIN).
        const uint64_t r = rng();
        int32_t v = static_cast<int32_t>(static_cast<int64_t>(r % 2001) - 1000);
        if ((r >> 32) % 16 == 0) v = static_cast<int32_t>(static_cast<uint32_t>(r >> 11));
        if ((r >> 40) % 512 == 0) v = std::numeric_limits<int32_t>::min();
        reinterpret_cast<int32_t*>(out.data())[i] = v;
        break;
      }
      case ElementType::kInt64: break;
    }
  }
  return out;
}

double ValueAt(ElementType type, const std::vector<char>& bytes, int64_t i) {
  switch (type) {
    case ElementType::kFloat32: return reinterpret_cast<const float*>(bytes.data())[i];
    case ElementType::kFloat64: return reinterpret_cast<const double*>(bytes.data())[i];
    case ElementType::kFloat16:
      return HalfToFloat(reinterpret_cast<const HalfBits*>(bytes.data())[i]);
    case ElementType::kInt32: return reinterpret_cast<const int32_t*>(bytes.data())[i];
    case ElementType::kInt64:
      return static_cast<double>(reinterpret_cast<const int64_t*>(bytes.data())[i]);
  }
  return 0;
}

// The prologue's output in the compute type, as doubles (for tolerances).
std::vector<double> Prepared(ElementType type, const std::vector<char>& in, int64_t n,
                             const EwProgram& pre) {
  std::vector<double> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    switch (type) {
      case ElementType::kFloat64:
        x[i] = ApplyEw(pre, reinterpret_cast<const double*>(in.data())[i]);
        break;
      case ElementType::kInt32:
        x[i] = ApplyEw(pre, reinterpret_cast<const int32_t*>(in.data())[i]);
        break;
      default: x[i] = ApplyEw(pre, static_cast<float>(ValueAt(type, in, i))); break;
    }
  }
  return x;
}

// One float16 ulp at y (the spacing of float16 values around |y|).
double HalfUlp(double y) {
  const double a = std::fabs(y);
  if (!(a >= std::ldexp(1.0, -14))) return std::ldexp(1.0, -24);
  return std::ldexp(1.0, static_cast<int>(std::floor(std::log2(a))) - 10);
}

// Distance in representable values between two floats of one type (same sign or zero).
int64_t UlpDistance(ElementType type, double a, double b) {
  if (type == ElementType::kFloat16) {
    auto key = [](double v) {
      const HalfBits h = FloatToHalf(static_cast<float>(v));
      return (h & 0x8000u) ? -static_cast<int64_t>(h & 0x7fffu) : static_cast<int64_t>(h);
    };
    return std::llabs(key(a) - key(b));
  }
  if (type == ElementType::kFloat32) {
    auto key = [](double v) {
      const float f = static_cast<float>(v);
      int32_t i;
      std::memcpy(&i, &f, 4);
      return i < 0 ? -static_cast<int64_t>(i & 0x7fffffff) : static_cast<int64_t>(i);
    };
    return std::llabs(key(a) - key(b));
  }
  auto key = [](double v) {
    int64_t i;
    std::memcpy(&i, &v, 8);
    return i < 0 ? -(i & 0x7fffffffffffffffLL) : i;
  };
  const int64_t d = key(a) - key(b);
  return d < 0 ? -d : d;
}

// ---- ops -----------------------------------------------------------------------------------

enum class Op { kElementwise, kSum, kMin, kMax, kMean, kNorm2, kArgmax, kSoftmax, kL2, kStd };

const char* OpName(Op op) {
  switch (op) {
    case Op::kElementwise: return "elementwise";
    case Op::kSum: return "sum";
    case Op::kMin: return "min";
    case Op::kMax: return "max";
    case Op::kMean: return "mean";
    case Op::kNorm2: return "norm2";
    case Op::kArgmax: return "argmax";
    case Op::kSoftmax: return "softmax";
    case Op::kL2: return "l2normalize";
    case Op::kStd: return "standardize";
  }
  return "?";
}

RowReduceKind ReduceKindOf(Op op) {
  switch (op) {
    case Op::kMin: return RowReduceKind::kMin;
    case Op::kMax: return RowReduceKind::kMax;
    case Op::kMean: return RowReduceKind::kMean;
    case Op::kNorm2: return RowReduceKind::kNorm2;
    default: return RowReduceKind::kSum;
  }
}
bool IsReduce(Op op) {
  return op == Op::kSum || op == Op::kMin || op == Op::kMax || op == Op::kMean ||
         op == Op::kNorm2;
}

bool Accepts(Op op, ElementType type) {
  if (IsFloatingPoint(type)) return true;
  return type == ElementType::kInt32 &&
         (op == Op::kElementwise || op == Op::kSum || op == Op::kMin || op == Op::kMax ||
          op == Op::kArgmax);
}

ElementType OutputType(Op op, ElementType type) {
  if (op == Op::kArgmax) return ElementType::kInt64;
  if (IsReduce(op)) return RowReduceOutputType(type, ReduceKindOf(op));
  return type;
}

int64_t OutputCount(Op op, int64_t rows, int64_t cols) {
  return IsReduce(op) || op == Op::kArgmax ? rows : rows * cols;
}

cudaError_t RunGpu(Op op, ElementType type, const void* d_in, void* d_out, int64_t rows,
                   int64_t cols, const EwProgram& pre, void* ws, size_t ws_bytes,
                   const LaunchConfig& config) {
  switch (op) {
    case Op::kElementwise: return Elementwise(d_in, type, d_out, rows * cols, pre, config);
    case Op::kArgmax:
      return RowArgmax(d_in, type, static_cast<int64_t*>(d_out), rows, cols, pre, ws, ws_bytes,
                       config);
    case Op::kSoftmax: return RowSoftmax(d_in, type, d_out, rows, cols, pre, ws, ws_bytes, config);
    case Op::kL2:
      return RowNormalize(d_in, type, d_out, rows, cols, RowNormalizeKind::kL2Normalize, pre, ws,
                          ws_bytes, config);
    case Op::kStd:
      return RowNormalize(d_in, type, d_out, rows, cols, RowNormalizeKind::kStandardize, pre, ws,
                          ws_bytes, config);
    default:
      return RowReduce(d_in, type, d_out, rows, cols, ReduceKindOf(op), pre, ws, ws_bytes,
                       config);
  }
}

std::vector<char> Reference(Op op, ElementType type, const std::vector<char>& in, int64_t rows,
                            int64_t cols, const EwProgram& pre) {
  const ElementType out_type = OutputType(op, type);
  const int64_t out_count = OutputCount(op, rows, cols);
  std::vector<char> out(static_cast<size_t>(out_count) * ElementSize(out_type));
  bool ok;
  if (op == Op::kElementwise) {
    ok = cpu::Elementwise(in.data(), type, out.data(), rows * cols, pre);
  } else {
    ok = cpu::RunWithPrologue(
        in.data(), type, rows * cols, pre, out.data(), out_type, out_count,
        [&](const void* x, ElementType t, void* y) {
          switch (op) {
            case Op::kArgmax: return cpu::RowArgmax(x, t, static_cast<int64_t*>(y), rows, cols);
            case Op::kSoftmax: return cpu::RowSoftmax(x, t, y, rows, cols);
            case Op::kL2:
              return cpu::RowNormalize(x, t, y, rows, cols, RowNormalizeKind::kL2Normalize);
            case Op::kStd:
              return cpu::RowNormalize(x, t, y, rows, cols, RowNormalizeKind::kStandardize);
            default: return cpu::RowReduce(x, t, y, rows, cols, ReduceKindOf(op));
          }
        });
  }
  EXPECT_TRUE(ok) << "no CPU reference for " << OpName(op) << " " << ElementTypeName(type);
  return out;
}

// Row statistics of the prologue's output, for the tolerances.
struct RowStats {
  double abs_sum = 0;
  double max_abs = 0;
  double std = 0;
};

std::vector<RowStats> StatsOf(const std::vector<double>& x, int64_t rows, int64_t cols) {
  std::vector<RowStats> s(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const double v = x[r * cols + c];
      s[r].abs_sum += std::fabs(v);
      s[r].max_abs = std::max(s[r].max_abs, std::fabs(v));
      sum += v;
    }
    const double mean = sum / cols;
    double m2 = 0;
    for (int64_t c = 0; c < cols; ++c) m2 += (x[r * cols + c] - mean) * (x[r * cols + c] - mean);
    s[r].std = std::sqrt(m2 / cols);
  }
  return s;
}

// Largest allowed |gpu - reference| for output element i (see the top of the file).
double Tolerance(Op op, ElementType type, double want, const RowStats& st, int64_t cols) {
  if (type == ElementType::kInt32 || op == Op::kMin || op == Op::kMax || op == Op::kArgmax) {
    return 0;
  }
  const double e = type == ElementType::kFloat64 ? 1e-13 : 1e-5;
  const double h = type == ElementType::kFloat16 ? HalfUlp(want) : 0.0;
  switch (op) {
    case Op::kSum: return e * st.abs_sum + h;
    case Op::kMean: return e * st.abs_sum / static_cast<double>(cols) + h;
    case Op::kNorm2: return e * std::fabs(want) + h;
    case Op::kSoftmax:
    case Op::kL2: return 0.1 * e + e * std::fabs(want) + h;
    case Op::kStd: return e * (st.max_abs / st.std + std::fabs(want)) + h;
    default: return 0;
  }
}

// Compares an elementwise result: exact, or within `ulps` representable values.
void ExpectElementwise(ElementType type, const std::vector<char>& got,
                       const std::vector<char>& want, int64_t n, int ulps) {
  int failures = 0;
  for (int64_t i = 0; i < n && failures < 5; ++i) {
    const double g = ValueAt(type, got, i);
    const double w = ValueAt(type, want, i);
    bool ok;
    if (type == ElementType::kInt32) {
      ok = g == w;
    } else if (std::isnan(w) || std::isnan(g)) {
      ok = std::isnan(w) && std::isnan(g);
    } else if (ulps == 0) {
      const size_t sz = ElementSize(type);
      ok = std::memcmp(got.data() + i * sz, want.data() + i * sz, sz) == 0;
    } else {
      ok = g == w || (std::signbit(g) == std::signbit(w) && UlpDistance(type, g, w) <= ulps) ||
           (g == 0 && w == 0);
    }
    if (!ok) {
      ++failures;
      ADD_FAILURE() << "element " << i << ": gpu " << g << ", reference " << w << " ("
                    << ulps << " ulp allowed)";
    }
  }
}

void ExpectRows(Op op, ElementType type, const std::vector<char>& got,
                const std::vector<char>& want, const std::vector<double>& prepared,
                int64_t rows, int64_t cols) {
  const ElementType out_type = OutputType(op, type);
  const std::vector<RowStats> stats = StatsOf(prepared, rows, cols);
  const int64_t n = OutputCount(op, rows, cols);
  const int64_t per_row = n / rows;
  int failures = 0;
  for (int64_t i = 0; i < n && failures < 5; ++i) {
    const double g = ValueAt(out_type, got, i);
    const double w = ValueAt(out_type, want, i);
    bool ok;
    double tol = 0;
    if (out_type == ElementType::kInt32 || out_type == ElementType::kInt64) {
      // Exact; int64 sums compared as integers (doubles lose bits past 2^53).
      const size_t sz = ElementSize(out_type);
      ok = std::memcmp(got.data() + i * sz, want.data() + i * sz, sz) == 0;
    } else if (std::isnan(w) || std::isnan(g)) {
      ok = std::isnan(w) && std::isnan(g);
    } else if (std::isinf(w) || std::isinf(g)) {
      ok = g == w;
    } else {
      tol = Tolerance(op, type, w, stats[i / per_row], cols);
      ok = std::fabs(g - w) <= tol;
    }
    if (!ok) {
      ++failures;
      ADD_FAILURE() << OpName(op) << " element " << i << " (row " << i / per_row << "): gpu "
                    << g << ", reference " << w << ", tolerance " << tol;
    }
  }
}

struct Shape {
  int64_t rows;
  int64_t cols;
};

// Edge shapes: 1 element, rows of length 1, lengths that are not multiples of any vector
// width (unaligned row starts), many short rows, rows held in registers, split long rows.
constexpr Shape kShapes[] = {{1, 1},    {1000, 1}, {7, 3},     {5, 13},    {33, 127},
                             {3, 1027}, {20000, 5}, {2, 5000}, {64, 9001}, {3, 70001},
                             {1, 300007}};

std::vector<LaunchConfig> Configs(cudaStream_t stream, int mp) {
  std::vector<LaunchConfig> configs;
  LaunchConfig c;
  c.stream = stream;
  c.multiprocessors = mp;
  c.staging = Staging::kDirect;
  configs.push_back(c);
  for (int stages : {1, 2, 4}) {
    c.staging = Staging::kPipeline;
    c.stages = stages;
    configs.push_back(c);
  }
  // The other staged strategies, each at a small and a large stage count.
  for (Staging staging : {Staging::kPipelineThread, Staging::kPrimitives, Staging::kBulk}) {
    // Bulk copies need sm_90 code (kernels/cuda/device_caps.h).
    if (staging == Staging::kBulk && !CurrentDeviceCaps().bulk_copy()) continue;
    for (int stages : {1, 3}) {
      c.staging = staging;
      c.stages = stages;
      configs.push_back(c);
    }
  }
  return configs;
}

std::string ConfigName(const LaunchConfig& c) {
  return c.staging == Staging::kDirect
             ? std::string("direct")
             : std::string(StagingName(c.staging)) + " stages=" + std::to_string(c.stages);
}

class DtypesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = gpupipe::testing::NoCudaDeviceReason()) GTEST_SKIP() << *why;
    ASSERT_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    cudaDeviceProp prop{};
    ASSERT_CUDA(cudaGetDeviceProperties(&prop, 0));
    mp_ = prop.multiProcessorCount;
    ws_bytes_ = RowOpsWorkspaceBytes();
    ASSERT_CUDA(cudaMalloc(&ws_, ws_bytes_));
    seed_ = first_seed_ = testing::FreshSeed();
  }
  void TearDown() override {
    if (ws_ != nullptr) cudaFree(ws_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  // Runs `op` on one random tensor under every config in `configs` and compares each result
  // with the reference. `out_offset_elems` shifts the output (unaligned stores).
  void Check(Op op, ElementType type, Shape shape, const EwProgram& pre,
             const std::vector<LaunchConfig>& configs, int ew_ulps = 0,
             int64_t out_offset_elems = 0) {
    const uint64_t seed = seed_++;
    SCOPED_TRACE(::testing::Message()
                 << OpName(op) << " " << ElementTypeName(type) << " " << shape.rows << "x"
                 << shape.cols << " seed " << seed << " (replay the test with GPUPIPE_TEST_SEED="
                 << first_seed_ << ")");
    const int64_t n = shape.rows * shape.cols;
    const std::vector<char> in = RandomData(type, n, seed);
    const std::vector<char> want = Reference(op, type, in, shape.rows, shape.cols, pre);
    const std::vector<double> prepared =
        op == Op::kElementwise ? std::vector<double>{} : Prepared(type, in, n, pre);
    const size_t out_bytes = want.size();
    const size_t offset = static_cast<size_t>(out_offset_elems) *
                          ElementSize(OutputType(op, type));
    DeviceBytes d_in(in.size());
    DeviceBytes d_out(offset + out_bytes + kGuardBytes);
    ASSERT_NE(d_in.get(), nullptr);
    ASSERT_NE(d_out.get(), nullptr);
    ASSERT_CUDA(cudaMemcpy(d_in.get(), in.data(), in.size(), cudaMemcpyHostToDevice));
    ASSERT_CUDA(cudaDeviceSynchronize());  // legacy-stream copy/set: order it before work on stream_
    for (const LaunchConfig& config : configs) {
      SCOPED_TRACE(ConfigName(config));
      ASSERT_CUDA(cudaMemset(d_out.get(), 0xff, offset + out_bytes + kGuardBytes));
      ASSERT_CUDA(cudaDeviceSynchronize());  // legacy-stream copy/set: order it before work on stream_
      ASSERT_CUDA(RunGpu(op, type, d_in.get(), d_out.get() + offset, shape.rows, shape.cols,
                         pre, ws_, ws_bytes_, config));
      ASSERT_CUDA(cudaStreamSynchronize(stream_));
      std::vector<char> got(out_bytes + kGuardBytes);
      ASSERT_CUDA(cudaMemcpy(got.data(), d_out.get() + offset, got.size(),
                             cudaMemcpyDeviceToHost));
      for (size_t b = out_bytes; b < got.size(); ++b) {
        ASSERT_EQ(static_cast<unsigned char>(got[b]), 0xffu) << "wrote past the output";
      }
      got.resize(out_bytes);
      if (op == Op::kElementwise) {
        ExpectElementwise(type, got, want, n, ew_ulps);
      } else {
        ExpectRows(op, type, got, want, prepared, shape.rows, shape.cols);
      }
    }
  }

  std::vector<LaunchConfig> AllConfigs() const { return Configs(stream_, mp_); }
  std::vector<LaunchConfig> OneConfig() const { return {Configs(stream_, mp_)[2]}; }

  cudaStream_t stream_ = nullptr;
  int mp_ = 0;
  void* ws_ = nullptr;
  size_t ws_bytes_ = 0;
  uint64_t seed_ = 0;
  uint64_t first_seed_ = 0;  // GPUPIPE_TEST_SEED replays the test from here
};

// Exact prologues (bit-identical on host and device in every float type), and int32 ones.
EwProgram FloatPre() {
  return Program({I(EwOpcode::kAffine, 0.75, 0.25), I(EwOpcode::kClamp, -3.0, 3.5)});
}
EwProgram IntPre() {
  return Program({I(EwOpcode::kAffine, 1.0, -5.0), I(EwOpcode::kAbs),
                  I(EwOpcode::kClamp, -kInf, 2000000000.0)});
}
EwProgram PreFor(ElementType type) { return type == ElementType::kInt32 ? IntPre() : FloatPre(); }

TEST_F(DtypesTest, ElementwiseExactPrograms) {
  const EwProgram float_programs[] = {
      Program({I(EwOpcode::kAffine, 1.5, -0.25), I(EwOpcode::kRelu)}),
      Program({I(EwOpcode::kClamp, -1.0, 2.0), I(EwOpcode::kAbs), I(EwOpcode::kSqrt)}),
      Program({I(EwOpcode::kSqrt)}),  // NaN below 0
  };
  const EwProgram int_programs[] = {
      Program({I(EwOpcode::kAffine, 1.0, 7.0)}),
      Program({I(EwOpcode::kAffine, 1.0, 2147483000.0)}),  // wraps around
      Program({I(EwOpcode::kRelu)}),
      Program({I(EwOpcode::kAbs)}),  // abs(INT32_MIN) wraps to INT32_MIN
      Program({I(EwOpcode::kClamp, -100.0, 250.0)}),
      Program({I(EwOpcode::kClamp, -kInf, 5.0), I(EwOpcode::kClamp, -7.0, kInf)}),
  };
  for (ElementType type : kAllTypes) {
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{9}, int64_t{33}, int64_t{4099},
                      int64_t{(1 << 20) + 3}}) {
      if (type == ElementType::kInt32) {
        for (const EwProgram& p : int_programs) Check(Op::kElementwise, type, {1, n}, p, AllConfigs());
      } else {
        for (const EwProgram& p : float_programs) {
          Check(Op::kElementwise, type, {1, n}, p, AllConfigs());
        }
      }
    }
  }
}

TEST_F(DtypesTest, ElementwiseTranscendentals) {
  for (ElementType type : kFloatTypes) {
    for (EwOpcode op : {EwOpcode::kExp, EwOpcode::kLog, EwOpcode::kSigmoid, EwOpcode::kTanh,
                        EwOpcode::kPow}) {
      // log and pow of |x| so most results are finite.
      const EwProgram p = Program({I(EwOpcode::kAbs), I(op, 2.5)});
      const int ulps = type == ElementType::kFloat16 ? 1 : EwHostDeviceUlp(op);
      Check(Op::kElementwise, type, {1, 100003}, p, AllConfigs(), ulps);
    }
  }
}

TEST_F(DtypesTest, ElementwiseUnalignedOutput) {
  for (ElementType type : kAllTypes) {
    Check(Op::kElementwise, type, {1, 10007}, PreFor(type), AllConfigs(), 0,
          /*out_offset_elems=*/1);
  }
}

// The reference checks over every shape and config, one test per type: each is a separate
// gtest, so compute-sanitizer runs can shard them.
class DtypesPerTypeTest : public DtypesTest, public ::testing::WithParamInterface<ElementType> {};
class DtypesPerFloatTypeTest : public DtypesPerTypeTest {};

TEST_P(DtypesPerTypeTest, RowReduce) {
  const ElementType type = GetParam();
  for (Op op : {Op::kSum, Op::kMin, Op::kMax, Op::kMean, Op::kNorm2}) {
    if (!Accepts(op, type)) continue;
    for (const Shape& shape : kShapes) Check(op, type, shape, PreFor(type), AllConfigs());
  }
}

TEST_P(DtypesPerTypeTest, RowArgmax) {
  const ElementType type = GetParam();
  for (const Shape& shape : kShapes) Check(Op::kArgmax, type, shape, PreFor(type), AllConfigs());
}

INSTANTIATE_TEST_SUITE_P(Types, DtypesPerTypeTest, ::testing::ValuesIn(kAllTypes),
                         ::gpupipe::testing::ElementTypeParamName);

TEST_P(DtypesPerFloatTypeTest, RowSoftmax) {
  for (const Shape& shape : kShapes) {
    Check(Op::kSoftmax, GetParam(), shape, FloatPre(), AllConfigs());
  }
}

TEST_P(DtypesPerFloatTypeTest, RowNormalize) {
  for (Op op : {Op::kL2, Op::kStd}) {
    for (const Shape& shape : kShapes) Check(op, GetParam(), shape, FloatPre(), AllConfigs());
  }
}

INSTANTIATE_TEST_SUITE_P(FloatTypes, DtypesPerFloatTypeTest, ::testing::ValuesIn(kFloatTypes),
                         ::gpupipe::testing::ElementTypeParamName);

// Rows too long for registers but short enough for one block's shared memory, with enough
// rows for a block each, run as one kernel (kernels/cuda/detail/row_smem.cuh). With
// multiprocessors = 1, four rows already count as many, so small tensors take that path:
// the shortest such row, 16384 (aligned rows), odd widths (every row start misaligned
// differently, and several rows per block, so a block's shared-memory slots shift between
// its rows), an unaligned output (element stores), and the longest row of each type, whose
// next width takes the two-kernel path.
TEST_F(DtypesTest, SharedMemoryRows) {
  LaunchConfig one_sm = AllConfigs()[0];
  one_sm.multiprocessors = 1;
  // The longest shared-memory row: 192 KiB of compute-type values, less the alignment slots.
  auto longest = [](ElementType type) -> int64_t {
    switch (type) {
      case ElementType::kFloat64: return 24575;
      case ElementType::kFloat16: return 49145;
      default: return 49149;
    }
  };
  for (ElementType type : kFloatTypes) {
    const int64_t limit = longest(type);
    EXPECT_EQ(DescribeRowSoftmax(4, limit, type, one_sm).size(), 1u) << ElementTypeName(type);
    EXPECT_EQ(DescribeRowSoftmax(4, limit + 1, type, one_sm).size(), 2u)
        << ElementTypeName(type);
    EXPECT_EQ(DescribeRowNormalize(4, limit, type, RowNormalizeKind::kStandardize, one_sm).size(),
              1u);
    for (Op op : {Op::kSoftmax, Op::kL2, Op::kStd}) {
      for (const Shape& shape : {Shape{4, 8193}, Shape{5, 16384}, Shape{20, 16387},
                                 Shape{6, 16385}, Shape{4, limit}}) {
        ASSERT_EQ(DescribeRowSoftmax(shape.rows, shape.cols, type, one_sm).size(), 1u);
        Check(op, type, shape, FloatPre(), {one_sm});
      }
      Check(op, type, Shape{9, 20001}, FloatPre(), {one_sm}, 0, /*out_offset_elems=*/1);
    }
  }
}

// Rows of 8192 < cols <= 16384 with at least one row per SM take the wide-row kernel
// (kernels/cuda/detail/row_wide.cuh: a 512-thread block a row holding it in registers, up to
// kSegmentGridMaxWaves waves of the capped row grid) when the rows are whole 16-byte vectors at
// aligned addresses; more rows than that grid has blocks make blocks loop over several rows, and an
// unaligned output or a ragged row length must take the other paths, with the same results.
TEST_F(DtypesTest, WideRows) {
  LaunchConfig few_sms = AllConfigs()[0];
  few_sms.multiprocessors = 3;
  const int64_t grid_cap = int64_t{few_sms.multiprocessors} *
                           tuning::RowPlanPolicy::kMaxBlocksPerSm *
                           tuning::RowPlanPolicy::kSegmentGridMaxWaves;
  for (ElementType type : {ElementType::kFloat32, ElementType::kFloat16}) {
    for (Op op : {Op::kSoftmax, Op::kL2, Op::kStd}) {
      // 16384 and 8200 columns are whole vectors for both types; 12292 only for float32. The
      // last shape has more rows than the grid has blocks: its blocks loop.
      for (const Shape& shape : {Shape{7, 16384}, Shape{3, 8200}, Shape{8, 12292},
                                 Shape{grid_cap + 5, 8200}}) {
        const std::vector<KernelLaunchInfo> plan =
            DescribeRowSoftmax(shape.rows, shape.cols, type, few_sms);
        const bool wide = shape.cols % (type == ElementType::kFloat16 ? 8 : 4) == 0;
        ASSERT_FALSE(plan.empty());
        const int64_t grid = std::min<int64_t>(shape.rows, grid_cap);
        EXPECT_EQ(plan.size() == 1 && plan[0].threads == 512 && plan[0].blocks == grid, wide)
            << ElementTypeName(type) << " " << shape.cols << ": " << plan.size() << " kernels, "
            << plan[0].blocks << " x " << plan[0].threads;
        Check(op, type, shape, FloatPre(), {few_sms});
      }
      Check(op, type, Shape{5, 16384}, FloatPre(), {few_sms}, 0, /*out_offset_elems=*/1);
    }
  }
  // The full machine: a block a row.
  Check(Op::kSoftmax, ElementType::kFloat32, Shape{2 * mp_ + 5, 16384}, FloatPre(), OneConfig());
  Check(Op::kStd, ElementType::kFloat32, Shape{mp_ + 1, 9000}, FloatPre(), OneConfig());
}

// One row of 2^26 + 7: one op of each family per type (float16 sums would overflow float16,
// so its reduction is the mean; its normalization l2normalize, whose outputs stay normal).
TEST_F(DtypesTest, LongRow) {
  const Shape longest{1, (int64_t{1} << 26) + 7};
  for (ElementType type : kAllTypes) {
    Check(Op::kElementwise, type, longest, PreFor(type), OneConfig());
    Check(type == ElementType::kFloat16 ? Op::kMean : Op::kSum, type, longest, PreFor(type),
          OneConfig());
    if (type == ElementType::kInt32) continue;
    Check(type == ElementType::kFloat16 ? Op::kL2 : Op::kSoftmax, type, longest, FloatPre(),
          OneConfig());
  }
}

// NumPy's int32 arithmetic on known values, independently of the CPU reference.
TEST_F(DtypesTest, Int32WrapsLikeNumpy) {
  const std::vector<int32_t> in = {2147483647, -2147483647 - 1, -5, 0, 5, 1000};
  const EwProgram add = Program({I(EwOpcode::kAffine, 1.0, 1.0)});
  const EwProgram abs = Program({I(EwOpcode::kAbs)});
  DeviceBytes d_in(64), d_out(64);
  ASSERT_CUDA(cudaMemcpy(d_in.get(), in.data(), in.size() * 4, cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaDeviceSynchronize());  // legacy-stream copy/set: order it before work on stream_
  LaunchConfig config = AllConfigs()[0];
  std::vector<int32_t> got(in.size());
  ASSERT_CUDA(Elementwise(d_in.get(), ElementType::kInt32, d_out.get(), 6, add, config));
  ASSERT_CUDA(cudaStreamSynchronize(stream_));
  ASSERT_CUDA(cudaMemcpy(got.data(), d_out.get(), 24, cudaMemcpyDeviceToHost));
  EXPECT_EQ(got, (std::vector<int32_t>{-2147483647 - 1, -2147483647, -4, 1, 6, 1001}));
  ASSERT_CUDA(Elementwise(d_in.get(), ElementType::kInt32, d_out.get(), 6, abs, config));
  ASSERT_CUDA(cudaStreamSynchronize(stream_));
  ASSERT_CUDA(cudaMemcpy(got.data(), d_out.get(), 24, cudaMemcpyDeviceToHost));
  EXPECT_EQ(got, (std::vector<int32_t>{2147483647, -2147483647 - 1, 5, 0, 5, 1000}));
  // The sum is int64: no wrap at the int32 range.
  ASSERT_CUDA(RowSum(d_in.get(), ElementType::kInt32, d_out.get(), 1, 6, EwProgram{}, ws_,
                     ws_bytes_, config));
  ASSERT_CUDA(cudaStreamSynchronize(stream_));
  int64_t sum = 0;
  ASSERT_CUDA(cudaMemcpy(&sum, d_out.get(), 8, cudaMemcpyDeviceToHost));
  EXPECT_EQ(sum, int64_t{2147483647} - 2147483648LL - 5 + 0 + 5 + 1000);
}

TEST_F(DtypesTest, RejectsUnsupportedTypesAndPrograms) {
  DeviceBytes d_in(1024), d_out(1024);
  const LaunchConfig config = AllConfigs()[0];
  const EwProgram exp = Program({I(EwOpcode::kExp)});
  EXPECT_EQ(Elementwise(d_in.get(), ElementType::kInt32, d_out.get(), 16, exp, config),
            cudaErrorInvalidValue);
  EXPECT_EQ(Elementwise(d_in.get(), ElementType::kInt64, d_out.get(), 16, EwProgram{}, config),
            cudaErrorInvalidValue);
  EXPECT_EQ(RowReduce(d_in.get(), ElementType::kInt32, d_out.get(), 4, 4, RowReduceKind::kMean,
                      EwProgram{}, ws_, ws_bytes_, config),
            cudaErrorInvalidValue);
  EXPECT_EQ(RowReduce(d_in.get(), ElementType::kInt32, d_out.get(), 4, 4, RowReduceKind::kNorm2,
                      EwProgram{}, ws_, ws_bytes_, config),
            cudaErrorInvalidValue);
  EXPECT_EQ(RowSoftmax(d_in.get(), ElementType::kInt32, d_out.get(), 4, 4, EwProgram{}, ws_,
                       ws_bytes_, config),
            cudaErrorInvalidValue);
  EXPECT_EQ(RowNormalize(d_in.get(), ElementType::kInt32, d_out.get(), 4, 4,
                         RowNormalizeKind::kStandardize, EwProgram{}, ws_, ws_bytes_, config),
            cudaErrorInvalidValue);
  // An int32 sum writes int64: d_out must be 8-byte aligned.
  EXPECT_EQ(RowReduce(d_in.get(), ElementType::kInt32, d_out.get() + 4, 4, 4,
                      RowReduceKind::kSum, EwProgram{}, ws_, ws_bytes_, config),
            cudaErrorInvalidValue);
  EXPECT_TRUE(DescribeRowSoftmax(4, 4, ElementType::kInt32, config).empty());
  EXPECT_FALSE(DescribeRowSoftmax(4, 4, ElementType::kFloat16, config).empty());
  EXPECT_FALSE(DescribeRowReduce(4, 4, ElementType::kInt32, RowReduceKind::kSum, config).empty());
  EXPECT_TRUE(DescribeRowReduce(4, 4, ElementType::kInt32, RowReduceKind::kMean, config).empty());
  EXPECT_FALSE(DescribeElementwise(16, ElementType::kFloat64, config).empty());
  ASSERT_CUDA(cudaStreamSynchronize(stream_));
}

}  // namespace
}  // namespace gpupipe::kernels::cuda
