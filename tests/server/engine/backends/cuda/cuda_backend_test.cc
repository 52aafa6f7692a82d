// The CUDA backend through the engine against the CPU backend (the reference), on fresh random
// data, for every op, staging mode and launch mode. Skips where no CUDA device is usable.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include <cuda_runtime.h>

#include "common/float16.h"
#include "kernels/cuda/device_caps.h"
#include "server/engine/backends/backend_factory.h"
#include "server/engine/backends/cpu/cpu_backend.h"
#include "server/engine/backends/cuda/cuda_backend.h"
#include "server/engine/engine.h"
#include "server/engine/job/op_catalog.h"
#include "tests/testing/random_tensor.h"
#include "tests/testing/typed_tensor.h"
#include "tests/testing/recording_sink.h"

namespace gpupipe::engine {
namespace {

using gpupipe::testing::AsBytes;
using gpupipe::testing::AsFloats;
using gpupipe::testing::RandomInput;
using gpupipe::testing::RecordingSink;
using gpupipe::testing::ValueOf;

class CudaBackendTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    CudaBackendOptions options;
    options.lanes_per_level = 1;
    absl::StatusOr<std::unique_ptr<Backend>> backend = CreateCudaBackend(options);
    if (!backend.ok()) {
      skip_reason_ = new std::string(backend.status().ToString());
      return;
    }
    EngineOptions engine_options;
    engine_options.limits.max_input_bytes = 64 << 20;
    engine_options.chunk_policy.min_chunk_bytes = 0;  // jobs that ask for small chunks
    cuda_ = Engine::Create(*std::move(backend), engine_options).release();
    cpu_ = Engine::Create(CreateCpuBackend({}), engine_options).release();
  }
  static void TearDownTestSuite() {
    delete cuda_;
    delete cpu_;
    cuda_ = cpu_ = nullptr;
  }
  void SetUp() override {
    if (skip_reason_) GTEST_SKIP() << "no usable CUDA device: " << *skip_reason_;
  }

  static std::shared_ptr<RecordingSink> Run(Engine* engine, const JobSpec& spec,
                                            const std::vector<float>& x) {
    return Run(engine, spec, AsBytes(x));
  }
  static std::shared_ptr<RecordingSink> Run(Engine* engine, const JobSpec& spec,
                                            const std::string& x) {
    auto sink = std::make_shared<RecordingSink>();
    std::string input = x;  // Submit takes the bytes over
    absl::Status s = engine->Submit(spec, input, sink);
    EXPECT_TRUE(s.ok()) << s;
    if (s.ok()) EXPECT_TRUE(sink->WaitDone(std::chrono::seconds(120)));
    return sink;
  }

  static Engine* cuda_;
  static Engine* cpu_;
  static std::string* skip_reason_;
};

Engine* CudaBackendTest::cuda_ = nullptr;
Engine* CudaBackendTest::cpu_ = nullptr;
std::string* CudaBackendTest::skip_reason_ = nullptr;

// An op with its parameter: scale(alpha), add(value), clamp(lo, hi), pow(p).
OpSpec Op(OpKind kind, double a, double b = 0, double p = 1) {
  OpSpec op{kind};
  op.alpha = a;
  op.value = b;
  op.lo = a;
  op.hi = b;
  op.p = p;
  if (kind == OpKind::kAdd) op.alpha = 1;
  return op;
}

struct PipelineCase {
  const char* name;
  std::vector<OpSpec> ops;
  bool exact;  // elementwise only: bit-identical to the reference
  // Absolute error allowed besides the relative one. Normalized rows have entries of order 1
  // whose near-zero values carry the rounding of the row's mean and norm (about 1e-7 of the
  // row's scale), not a relative error of their own.
  float abs_tol = 1e-9f;
};

std::vector<PipelineCase> Pipelines() {
  return {
      {"affine|relu", {{OpKind::kAffine, 2, 1}, {OpKind::kRelu}}, true},
      {"relu", {{OpKind::kRelu}}, true},
      {"sum", {{OpKind::kSum}}, false},
      {"affine|sum", {{OpKind::kAffine, 0.5, -1}, {OpKind::kSum}}, false},
      {"softmax", {{OpKind::kSoftmax}}, false},
      {"affine|relu|softmax", {{OpKind::kAffine, 2, 1}, {OpKind::kRelu}, {OpKind::kSoftmax}}, false},
      {"softmax|affine", {{OpKind::kSoftmax}, {OpKind::kAffine, 3, 0}}, false},
      {"sum|relu|sum", {{OpKind::kSum}, {OpKind::kRelu}, {OpKind::kSum}}, false},
      {"scale|add|clamp|abs|sqrt", {Op(OpKind::kScale, 3), Op(OpKind::kAdd, 0, -1),
                                    Op(OpKind::kClamp, -2, 5), {OpKind::kAbs}, {OpKind::kSqrt}},
       true},
      {"abs|add|log|sigmoid|tanh|exp|pow", {{OpKind::kAbs}, Op(OpKind::kAdd, 0, 1), {OpKind::kLog},
                                            {OpKind::kSigmoid}, {OpKind::kTanh}, {OpKind::kExp},
                                            Op(OpKind::kPow, 0, 0, 1.5)},
       false},
      {"min", {{OpKind::kMin}}, true},
      {"max", {{OpKind::kMax}}, true},
      {"mean", {{OpKind::kMean}}, false},
      {"norm2", {{OpKind::kNorm2}}, false},
      {"abs|argmax", {{OpKind::kAbs}, {OpKind::kArgmax}}, true},
      {"l2normalize", {{OpKind::kL2Normalize}}, false, 1e-6f},
      {"standardize", {{OpKind::kStandardize}}, false, 1e-6f},
      {"standardize|norm2", {{OpKind::kStandardize}, {OpKind::kNorm2}}, false},
  };
}

// Whether every row op of the pipeline still has an axis to work along.
bool ValidFor(const PipelineCase& pc, const std::vector<int64_t>& shape) {
  size_t rank = shape.size();
  for (const OpSpec& op : pc.ops) {
    const OpClass op_class = GetOpInfo(op.kind).op_class;
    if (op_class != OpClass::kElementwise) {
      if (rank == 0) return false;
      if (op_class == OpClass::kRowReduction) --rank;
    }
  }
  return true;
}

std::vector<std::vector<int64_t>> Shapes() {
  return {{1}, {31}, {4096}, {(1 << 20) + 3}, {3, 5}, {1000, 33}, {64, 4097}, {2, 1 << 20},
          {4096, 1}, {2, 3, 7}};
}

// Per-element tolerance of a float32 result against the double-accumulating reference.
// Reductions get room for float32 summation over `reduced` elements of magnitude up to ~9
// (random walk growth: sqrt of the count), far below any indexing mistake.
void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, bool exact,
                 int64_t reduced, float abs_tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i]) && std::isnan(want[i])) continue;
    if (exact) {
      ASSERT_EQ(std::memcmp(&got[i], &want[i], 4), 0)
          << what << " element " << i << ": " << got[i] << " vs " << want[i];
    } else {
      const float tol = 2e-4f * std::fabs(want[i]) +
                        (reduced > 1 ? 1e-5f + 2e-5f * std::sqrt(static_cast<float>(reduced))
                                     : abs_tol);
      ASSERT_NEAR(got[i], want[i], tol) << what << " element " << i;
    }
  }
}

TEST_F(CudaBackendTest, MatchesTheCpuReferenceForEveryPipelineAndShape) {
  const uint64_t seed = gpupipe::testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (replay with GPUPIPE_TEST_SEED)");
  int n = 0;
  for (const PipelineCase& pc : Pipelines()) {
    for (const auto& shape : Shapes()) {
      JobSpec spec;
      spec.shape = shape;
      spec.ops = pc.ops;
      if (!ValidFor(pc, shape)) continue;
      int64_t count = 1;
      for (int64_t d : shape) count *= d;
      std::vector<float> x = gpupipe::testing::RandomFloats(count, seed + n++);
      auto want = Run(cpu_, spec, x);
      ASSERT_TRUE(want->status().ok()) << want->status();
      for (Staging staging : {Staging::kAuto, Staging::kDirect, Staging::kPipeline,
                              Staging::kPipelineThread, Staging::kPrimitives, Staging::kBulk}) {
        for (LaunchMode launch : {LaunchMode::kStream, LaunchMode::kPdl}) {
          spec.staging = staging;
          spec.launch = launch;
          spec.stages = staging == Staging::kDirect ? 0 : 1 + (n % 4);
          const std::string what = std::string(pc.name) + " on " + ShapeString(shape) + " " +
                                   std::string(StagingName(staging)) + "/" +
                                   std::string(LaunchModeName(launch));
          auto got = Run(cuda_, spec, x);
          ASSERT_TRUE(got->status().ok()) << what << ": " << got->status();
          EXPECT_EQ(got->info().output_shape, want->info().output_shape) << what;
          if (want->info().output_dtype == DType::kInt64) {
            EXPECT_TRUE(got->output() == want->output()) << what << ": indices differ";
          } else {
            ExpectClose(AsFloats(got->output()), AsFloats(want->output()), pc.exact,
                        count / static_cast<int64_t>(AsFloats(want->output()).size()),
                        pc.abs_tol, what);
          }
          EXPECT_GT(got->timing().kernels, 0) << what;
          EXPECT_GE(got->timing().compute_us, 0.0) << what;
        }
      }
    }
  }
}

// The pipelines of `dtype`: every float pipeline above for the float types; the integer ops
// for int32.
std::vector<PipelineCase> PipelinesFor(DType dtype) {
  if (dtype != DType::kInt32) return Pipelines();
  return {
      {"add|relu", {Op(OpKind::kAdd, 0, 5), {OpKind::kRelu}}, true},
      {"add(wraps)|abs", {Op(OpKind::kAdd, 0, 2147000000), {OpKind::kAbs}}, true},
      {"clamp", {Op(OpKind::kClamp, -100, 300)}, true},
      {"sum", {{OpKind::kSum}}, true},
      {"abs|min", {{OpKind::kAbs}, {OpKind::kMin}}, true},
      {"max", {{OpKind::kMax}}, true},
      {"add|argmax", {Op(OpKind::kAdd, 0, -3), {OpKind::kArgmax}}, true},
  };
}

// float64, float16 and int32 through the engine: CUDA against the CPU backend. int32 results
// (int32 or int64) and argmax are exact; exact float pipelines are bit-identical; other float
// results within a relative 1e-10 (float64) or 4e-3 (float16: two float16 ulps and the
// float32 accumulation) plus an absolute term for reductions and normalized near-zero values.
TEST_F(CudaBackendTest, MatchesTheCpuReferenceForEveryDtype) {
  const uint64_t seed = gpupipe::testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (replay with GPUPIPE_TEST_SEED)");
  int n = 0;
  for (DType dtype : {DType::kFloat64, DType::kFloat16, DType::kInt32}) {
    for (const PipelineCase& pc : PipelinesFor(dtype)) {
      for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{
               {1}, {4099}, {(1 << 18) + 3}, {7, 5}, {1000, 33}, {64, 4097}, {2, 1 << 18},
               {4096, 1}}) {
        JobSpec spec;
        spec.dtype = dtype;
        spec.shape = shape;
        spec.ops = pc.ops;
        if (!ValidFor(pc, shape)) continue;
        int64_t count = 1;
        for (int64_t d : shape) count *= d;
        const std::string x = RandomInput(dtype, count, seed + n++);
        auto want = Run(cpu_, spec, x);
        ASSERT_TRUE(want->status().ok()) << want->status();
        const DType out = want->info().output_dtype;
        for (Staging staging : {Staging::kDirect, Staging::kPipeline}) {
          for (LaunchMode launch : {LaunchMode::kStream, LaunchMode::kPdl, LaunchMode::kGraphPdl}) {
            spec.staging = staging;
            spec.launch = launch;
            spec.stages = staging == Staging::kPipeline ? 1 + (n % 4) : 0;
            const std::string what = std::string(DTypeName(dtype)) + " " + pc.name + " on " +
                                     ShapeString(shape) + " " + StagingName(staging) + "/" +
                                     LaunchModeName(launch);
            auto got = Run(cuda_, spec, x);
            ASSERT_TRUE(got->status().ok()) << what << ": " << got->status();
            EXPECT_EQ(got->info().output_dtype, out) << what;
            EXPECT_EQ(got->info().output_shape, want->info().output_shape) << what;
            const std::string g = got->output();
            const std::string w = want->output();
            ASSERT_EQ(g.size(), w.size()) << what;
            if (out == DType::kInt32 || out == DType::kInt64 || pc.exact) {
              EXPECT_TRUE(g == w) << what << ": results differ";
              continue;
            }
            const size_t elems = w.size() / static_cast<size_t>(DTypeSize(out));
            const double reduced = static_cast<double>(count) / static_cast<double>(elems);
            const double rel = dtype == DType::kFloat64 ? 1e-10 : 4e-3;
            const double abs = dtype == DType::kFloat64
                                   ? 1e-12 * (1 + std::sqrt(reduced))
                                   : 1e-3 + (reduced > 1 ? 2e-5 * std::sqrt(reduced) : 0.0);
            for (size_t i = 0; i < elems; ++i) {
              const double gv = ValueOf(out, g, i);
              const double wv = ValueOf(out, w, i);
              if (std::isnan(gv) && std::isnan(wv)) continue;
              if (std::isinf(wv)) {
                ASSERT_EQ(gv, wv) << what << " element " << i;
                continue;
              }
              ASSERT_NEAR(gv, wv, rel * std::fabs(wv) + abs) << what << " element " << i;
            }
          }
        }
      }
    }
  }
}

TEST_F(CudaBackendTest, DescribeShowsTheDeviceAndPriorityMapping) {
  EngineDescription d = cuda_->Describe();
  EXPECT_EQ(d.backend, "cuda");
  ASSERT_TRUE(d.device.has_value());
  EXPECT_GT(d.device->multiprocessors, 0);
  EXPECT_LE(d.device->greatest_stream_priority, d.device->least_stream_priority);
  ASSERT_EQ(d.levels.size(), 3u);
  EXPECT_EQ(d.levels[0].device_priority, d.device->least_stream_priority);
  EXPECT_EQ(d.levels[2].device_priority, d.device->greatest_stream_priority);
}

TEST_F(CudaBackendTest, ConcurrentJobsOfAllPrioritiesGetTheRightResults) {
  const uint64_t seed = gpupipe::testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<std::pair<std::shared_ptr<RecordingSink>, std::vector<float>>> jobs;
  for (int i = 0; i < 30; ++i) {
    std::vector<float> x = gpupipe::testing::RandomFloats(1 + i * 9973, seed + i);
    JobSpec spec;
    spec.shape = {static_cast<int64_t>(x.size())};
    spec.ops = {{OpKind::kAffine, -2, 0.25}, {OpKind::kRelu}};
    spec.priority = static_cast<Priority>(i % kPriorityLevels);
    auto sink = std::make_shared<RecordingSink>();
    std::string input = AsBytes(x);
    ASSERT_TRUE(cuda_->Submit(spec, input, sink).ok());
    jobs.emplace_back(sink, std::move(x));
  }
  for (auto& [sink, x] : jobs) {
    ASSERT_TRUE(sink->WaitDone(std::chrono::seconds(60)));
    ASSERT_TRUE(sink->status().ok()) << sink->status();
    std::vector<float> y = AsFloats(sink->output());
    ASSERT_EQ(y.size(), x.size());
    for (size_t k = 0; k < x.size(); ++k) {
      float r = std::fma(-2.0f, x[k], 0.25f);
      ASSERT_EQ(y[k], r < 0 ? 0.0f : r) << k;
    }
  }
}

// --cuda-wait: each mode reaches the device's schedule flag and leaves its other flags alone,
// auto leaves the flags as they were, and jobs whose lanes wait each way get the right results
// (block also makes the lanes' events blocking ones). The flags are the process's: they are put
// back when the test ends, however it ends.
TEST_F(CudaBackendTest, EveryWaitModeSetsTheScheduleAndJobsRunRight) {
  unsigned original = 0;
  ASSERT_EQ(cudaGetDeviceFlags(&original), cudaSuccess);
  struct RestoreFlags {
    unsigned flags;
    ~RestoreFlags() { cudaSetDeviceFlags(flags); }
  } restore{original};
  const std::pair<CudaWait, unsigned> modes[] = {
      {CudaWait::kAuto, original & cudaDeviceScheduleMask},
      {CudaWait::kBlock, cudaDeviceScheduleBlockingSync},
      {CudaWait::kYield, cudaDeviceScheduleYield},
      {CudaWait::kSpin, cudaDeviceScheduleSpin}};
  const uint64_t seed = gpupipe::testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (const auto& [wait, schedule] : modes) {
    CudaBackendOptions options;
    options.lanes_per_level = 1;
    options.wait = wait;
    options.device_memory_bytes = int64_t{512} << 20;  // beside the suite's engine
    // The other flags as they are just before: under a tool such as compute-sanitizer, others
    // appear once kernels ran (cudaDeviceLmemResizeToMax, under memcheck).
    unsigned before = 0;
    ASSERT_EQ(cudaGetDeviceFlags(&before), cudaSuccess);
    const unsigned others = before & ~static_cast<unsigned>(cudaDeviceScheduleMask);
    absl::StatusOr<std::unique_ptr<Backend>> backend = CreateCudaBackend(options);
    ASSERT_TRUE(backend.ok()) << backend.status();
    unsigned flags = 0;
    ASSERT_EQ(cudaGetDeviceFlags(&flags), cudaSuccess);
    EXPECT_EQ(flags & cudaDeviceScheduleMask, schedule) << "mode " << static_cast<int>(wait);
    EXPECT_EQ(flags & ~static_cast<unsigned>(cudaDeviceScheduleMask), others);
    EngineOptions engine_options;
    engine_options.limits.max_input_bytes = 64 << 20;
    engine_options.chunk_policy.min_chunk_bytes = 0;
    std::unique_ptr<Engine> engine = Engine::Create(*std::move(backend), engine_options);
    for (int i = 0; i < 8; ++i) {
      // One small job (one stream, a graph once it repeats) and one of several chunks.
      const int64_t n = i % 2 == 0 ? 1024 : (int64_t{24} << 20) / 4;
      std::vector<float> x = gpupipe::testing::RandomFloats(n, seed + i);
      JobSpec spec;
      spec.shape = {n};
      spec.ops = {{OpKind::kAffine, -2, 0.25}, {OpKind::kRelu}};
      spec.chunk_bytes = 4 << 20;
      std::shared_ptr<RecordingSink> sink = Run(engine.get(), spec, x);
      ASSERT_TRUE(sink->status().ok()) << sink->status();
      std::vector<float> y = AsFloats(sink->output());
      ASSERT_EQ(y.size(), x.size());
      for (size_t k = 0; k < x.size(); ++k) {
        const float r = std::fma(-2.0f, x[k], 0.25f);
        ASSERT_EQ(y[k], r < 0 ? 0.0f : r) << k;
      }
    }
  }
}

}  // namespace
}  // namespace gpupipe::engine

namespace gpupipe::engine {
namespace {

// A fresh engine per test with one lane per level, so that repeated jobs of one priority meet
// the same lane's graph cache. Every job copies, so that the small ones here keep testing the
// graphs that hold a job's copies (cuda_mapped_io_test.cc has those without).
class CudaLaunchModesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CudaBackendOptions options;
    options.lanes_per_level = 1;
    options.graph_cache_capacity = 2;
    options.mapped_io_max_bytes = 0;
    absl::StatusOr<std::unique_ptr<Backend>> backend = CreateCudaBackend(options);
    if (!backend.ok()) GTEST_SKIP() << "no usable CUDA device: " << backend.status();
    EngineOptions engine_options;
    engine_options.limits.max_input_bytes = 64 << 20;
    engine_options.chunk_policy.min_chunk_bytes = 0;  // jobs that ask for small chunks
    engine_ = Engine::Create(*std::move(backend), engine_options);
  }

  std::shared_ptr<RecordingSink> Run(JobSpec spec, const std::vector<float>& x) {
    auto sink = std::make_shared<RecordingSink>();
    std::string input = AsBytes(x);
    absl::Status s = engine_->Submit(spec, input, sink);
    EXPECT_TRUE(s.ok()) << s;
    if (s.ok()) EXPECT_TRUE(sink->WaitDone(std::chrono::seconds(60)));
    EXPECT_TRUE(sink->status().ok()) << sink->status();
    return sink;
  }

  std::unique_ptr<Engine> engine_;
};

// Launch modes change how kernels are enqueued, never what they compute: for one staging and
// depth, every mode gives the same bytes. Stagings may change the per-thread order in which a
// reduction accumulates (the partitioned pipeline gives one warp to copying, so its consumer
// threads own other elements than direct's threads), so across stagings float reductions agree
// within ExpectClose's tolerance and only IEEE-exact pipelines (elementwise, min, max, argmax)
// stay bit-identical.
TEST_F(CudaLaunchModesTest, EveryLaunchModeGivesIdenticalBytesForEachStaging) {
  const uint64_t seed = gpupipe::testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  int n = 0;
  for (const PipelineCase& pc : Pipelines()) {
    for (std::vector<int64_t> shape : {std::vector<int64_t>{(1 << 20) + 3}, {64, 4097}, {1000, 33},
                                       {2, 3, 7}}) {
      JobSpec spec;
      spec.shape = shape;
      spec.ops = pc.ops;
      if (!ValidFor(pc, shape)) continue;
      int64_t count = 1;
      for (int64_t d : shape) count *= d;
      std::vector<float> x = gpupipe::testing::RandomFloats(count, seed + n++);
      spec.launch = LaunchMode::kStream;
      spec.staging = Staging::kDirect;
      auto direct = Run(spec, x);
      const bool indices = direct->info().output_dtype == DType::kInt64;
      const int64_t outputs = std::max<int64_t>(
          1, static_cast<int64_t>(direct->output().size()) / DTypeSize(direct->info().output_dtype));
      for (Staging staging : {Staging::kDirect, Staging::kPipeline, Staging::kPipelineThread,
                              Staging::kPrimitives, Staging::kBulk}) {
        for (int stages : {1, 4}) {
          const std::string config = std::string(pc.name) + " on " + ShapeString(shape) + " " +
                                     StagingName(staging) + " stages " + std::to_string(stages);
          spec.staging = staging;
          spec.stages = stages;
          spec.launch = LaunchMode::kStream;
          const std::string reference = Run(spec, x)->output();
          if (indices || pc.exact) {
            EXPECT_TRUE(reference == direct->output()) << config << " differs from direct";
          } else {
            ExpectClose(AsFloats(reference), AsFloats(direct->output()), false, count / outputs,
                        pc.abs_tol, config + " against direct");
          }
          for (LaunchMode launch : {LaunchMode::kPdl, LaunchMode::kGraph, LaunchMode::kGraphPdl}) {
            spec.launch = launch;
            auto got = Run(spec, x);
            EXPECT_TRUE(got->output() == reference)
                << config << " " << LaunchModeName(launch) << " differs from stream";
          }
        }
      }
    }
  }
}

// Jobs that differ only in the reduction (or normalization) kind, one after another on a lane
// with a graph cache: each replays its own graph, never the other kind's.
TEST_F(CudaLaunchModesTest, AGraphIsNeverReplayedForAnotherReductionKind) {
  const uint64_t seed = gpupipe::testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<float> x = gpupipe::testing::RandomFloats(37 * 101, seed);
  auto cpu = Engine::Create(CreateCpuBackend({}), {});
  for (int round = 0; round < 2; ++round) {
    for (OpKind kind : {OpKind::kSum, OpKind::kMin, OpKind::kMax, OpKind::kMean, OpKind::kNorm2,
                        OpKind::kL2Normalize, OpKind::kStandardize}) {
      JobSpec spec;
      spec.shape = {37, 101};
      spec.ops = {{kind}};
      spec.launch = LaunchMode::kGraphPdl;
      auto got = Run(spec, x);
      JobSpec reference = spec;
      reference.launch = LaunchMode::kAuto;  // the CPU backend has no graph modes
      auto want = std::make_shared<RecordingSink>();
      std::string input = AsBytes(x);
      const absl::Status submitted = cpu->Submit(reference, input, want);
      ASSERT_TRUE(submitted.ok()) << submitted;
      ASSERT_TRUE(want->WaitDone(std::chrono::seconds(60)));
      ExpectClose(AsFloats(got->output()), AsFloats(want->output()), false,
                  GetOpInfo(kind).op_class == OpClass::kRowReduction ? 101 : 1, 1e-6f,
                  std::string(GetOpInfo(kind).name) + " round " + std::to_string(round));
    }
  }
}

TEST_F(CudaLaunchModesTest, GraphCacheHitsUpdatesAndNeverReplaysAStaleGraph) {
  const uint64_t seed = gpupipe::testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<float> x = gpupipe::testing::RandomFloats(300 * 500, seed);
  JobSpec spec;
  spec.shape = {300, 500};
  spec.ops = {{OpKind::kAffine, 2, 1}, {OpKind::kRelu}, {OpKind::kSoftmax}};
  spec.launch = LaunchMode::kGraphPdl;
  spec.priority = Priority::kHigh;

  auto stream_result = [&](JobSpec s, const std::vector<float>& in) {
    s.launch = LaunchMode::kPdl;
    return Run(s, in)->output();
  };

  auto first = Run(spec, x);
  EXPECT_EQ(first->timing().graph, "miss");
  auto second = Run(spec, x);
  EXPECT_EQ(second->timing().graph, "hit");
  EXPECT_EQ(second->output(), first->output());
  EXPECT_EQ(second->timing().kernels, first->timing().kernels);

  // New parameters, same topology: updated in place, and the result uses the new alpha.
  JobSpec changed = spec;
  changed.ops[0].alpha = -3;
  auto updated = Run(changed, x);
  EXPECT_EQ(updated->timing().graph, "update");
  EXPECT_EQ(updated->output(), stream_result(changed, x));
  EXPECT_NE(updated->output(), first->output());

  // New data through a cached graph: the graph reads the lane's buffers, not stale inputs.
  std::vector<float> y = gpupipe::testing::RandomFloats(300 * 500, seed + 1);
  auto fresh = Run(changed, y);
  EXPECT_EQ(fresh->timing().graph, "hit");
  EXPECT_EQ(fresh->output(), stream_result(changed, y));

  // A new shape is a new graph.
  JobSpec reshaped = spec;
  reshaped.shape = {500, 300};
  auto other = Run(reshaped, x);
  EXPECT_EQ(other->timing().graph, "miss");
  EXPECT_EQ(other->output(), stream_result(reshaped, x));

  // Capacity 2: a third topology evicts the least recently used (300 x 500).
  JobSpec third = spec;
  third.shape = {150, 1000};
  EXPECT_EQ(Run(third, x)->timing().graph, "miss");
  EXPECT_EQ(Run(spec, x)->timing().graph, "miss");

  const GraphCacheStats stats = engine_->Describe().graph_cache;
  EXPECT_EQ(stats.hits, 2);
  EXPECT_EQ(stats.updates, 1);
  EXPECT_EQ(stats.misses, 4);
  EXPECT_GE(stats.evictions, 1);
}

TEST_F(CudaLaunchModesTest, AutoCapturesAGraphOnceAShapeRepeats) {
  const uint64_t seed = gpupipe::testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<float> x = gpupipe::testing::RandomFloats(64 * 3000, seed);
  JobSpec spec;
  spec.shape = {64, 3000};
  spec.ops = {{OpKind::kAffine, 0.5, 0}, {OpKind::kStandardize}};
  spec.priority = Priority::kLow;
  spec.launch = LaunchMode::kAuto;
  auto first = Run(spec, x);
  auto second = Run(spec, x);
  auto third = Run(spec, x);
  // Without sm_90 code, the same without PDL.
  const bool pdl = kernels::cuda::CurrentDeviceCaps().pdl();
  EXPECT_EQ(first->timing().launch, pdl ? "pdl (auto)" : "stream (auto)");
  EXPECT_EQ(first->timing().graph, "");
  EXPECT_EQ(second->timing().launch, pdl ? "graph-pdl (auto)" : "graph (auto)");
  EXPECT_EQ(second->timing().graph, "miss");
  EXPECT_EQ(third->timing().graph, "hit");
  EXPECT_EQ(second->output(), first->output());
  EXPECT_EQ(third->output(), first->output());
}

// Modes that need sm_90 code run on every device: where the code has them as asked, else as
// the nearest mode it has, with the same results, and the job's Timing says which.
TEST_F(CudaLaunchModesTest, Sm90ModesRunAsTheNearestModeTheCodeHas) {
  const uint64_t seed = gpupipe::testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<float> x = gpupipe::testing::RandomFloats(64 * 3000, seed);
  const kernels::cuda::DeviceCaps& caps = kernels::cuda::CurrentDeviceCaps();
  JobSpec spec;
  spec.shape = {64, 3000};
  spec.ops = {{OpKind::kAffine, 0.5, 1}, {OpKind::kRelu}};
  spec.launch = LaunchMode::kStream;
  spec.staging = Staging::kDirect;
  const std::string want = Run(spec, x)->output();
  spec.staging = Staging::kBulk;
  spec.stages = 2;
  for (LaunchMode launch : {LaunchMode::kPdl, LaunchMode::kGraphPdl}) {
    spec.launch = launch;
    auto got = Run(spec, x);
    ASSERT_TRUE(got->status().ok()) << got->status();
    EXPECT_EQ(got->output(), want) << LaunchModeName(launch);
    const JobTiming t = got->timing();
    if (caps.pdl()) {
      EXPECT_EQ(t.launch, LaunchModeName(launch));
    } else {
      EXPECT_EQ(t.launch, std::string(launch == LaunchMode::kPdl ? "stream" : "graph") +
                              " (pdl needs sm_90 code)");
    }
    EXPECT_EQ(t.staging,
              caps.bulk_copy() ? "bulk(stages=2)" : "pipeline(stages=2) (bulk needs sm_90 code)");
  }
}

TEST_F(CudaLaunchModesTest, ProfileTimesEveryStepAndExplainMatchesTheLaunches) {
  const uint64_t seed = gpupipe::testing::FreshSeed();
  std::vector<float> x = gpupipe::testing::RandomFloats(4 * (1 << 20), seed);
  JobSpec spec;
  spec.shape = {4, 1 << 20};
  spec.ops = {{OpKind::kAffine, 2, 1}, {OpKind::kSoftmax}, {OpKind::kRelu}, {OpKind::kSum}};
  spec.profile = true;
  spec.explain = true;
  spec.launch = LaunchMode::kPdl;
  auto sink = Run(spec, x);
  const JobTiming t = sink->timing();
  ASSERT_EQ(t.steps.size(), 2u);
  int kernels = 0;
  for (const auto& step : t.steps) {
    EXPECT_GT(step.device_us, 0.0);
    kernels += step.kernels;
  }
  EXPECT_EQ(kernels, t.kernels);
  EXPECT_EQ(static_cast<int>(sink->plan().kernels.size()), t.kernels);
  // One time per kernel, in launch order, named as the plan names it; they add up to the steps.
  ASSERT_EQ(static_cast<int>(t.kernel_times.size()), t.kernels);
  double kernel_sum = 0, step_sum = 0;
  for (size_t k = 0; k < t.kernel_times.size(); ++k) {
    EXPECT_EQ(t.kernel_times[k].name, sink->plan().kernels[k].name);
    EXPECT_EQ(t.kernel_times[k].step, sink->plan().kernels[k].step);
    EXPECT_GT(t.kernel_times[k].device_us, 0.0);
    kernel_sum += t.kernel_times[k].device_us;
  }
  for (const auto& step : t.steps) step_sum += step.device_us;
  EXPECT_NEAR(kernel_sum, step_sum, 1e-6 * step_sum);
  EXPECT_LE(step_sum, t.compute_us * 1.001);
  EXPECT_EQ(sink->plan().edges.size(), sink->plan().kernels.size() - 1);
  // Code without PDL runs a pdl launch as plain stream order, and the plan says so.
  const char* edge_kind = kernels::cuda::CurrentDeviceCaps().pdl() ? "pdl" : "stream";
  for (const auto& edge : sink->plan().edges) EXPECT_EQ(edge.kind, edge_kind);
}

}  // namespace
}  // namespace gpupipe::engine

namespace gpupipe::engine {
namespace {

// cumsum and histogram through the CUDA backend, byte for byte against the CPU backend:
// cumsum inputs are small integers (every partial sum is exact in float), histograms are exact.
TEST_F(CudaBackendTest, CumsumAndHistogramMatchTheCpuBackendExactly) {
  const uint64_t seed = gpupipe::testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (replay with GPUPIPE_TEST_SEED)");
  OpSpec cumsum{OpKind::kCumsum};
  OpSpec affine{OpKind::kAffine};
  affine.alpha = 2;
  affine.beta = 1;
  OpSpec hist{OpKind::kHistogram};
  hist.bins = 256;
  hist.lo = 0;
  hist.hi = 1;
  OpSpec int_hist{OpKind::kHistogram};
  int_hist.bins = 7;
  int_hist.lo = -3;
  int_hist.hi = 3;
  struct Case {
    const char* name;
    DType dtype;
    std::vector<OpSpec> ops;
  };
  const std::vector<Case> cases = {
      {"cumsum", DType::kFloat32, {cumsum}},
      {"affine|cumsum", DType::kFloat32, {affine, cumsum}},
      {"cumsum int32", DType::kInt32, {cumsum}},
      {"histogram", DType::kFloat32, {hist}},
      {"cumsum|histogram", DType::kFloat32, {cumsum, int_hist}},
      {"histogram int32", DType::kInt32, {int_hist}},
  };
  const std::vector<std::vector<int64_t>> shapes = {
      {1}, {4097}, {(1 << 20) + 3}, {1000, 33}, {64, 4097}, {2, 1 << 20}, {600, 3000}};
  int n = 0;
  for (const Case& c : cases) {
    for (const auto& shape : shapes) {
      JobSpec spec;
      spec.dtype = c.dtype;
      spec.shape = shape;
      spec.ops = c.ops;
      int64_t count = 1;
      for (int64_t d : shape) count *= d;
      std::mt19937_64 rng(seed + n++);
      std::uniform_int_distribution<int> small(-3, 3);
      std::uniform_real_distribution<float> unit(-0.2f, 1.2f);
      const bool real = c.ops[0].kind == OpKind::kHistogram && c.dtype == DType::kFloat32;
      // Input bytes carried in a float vector (int32 values keep their bit patterns).
      std::vector<float> x(static_cast<size_t>(count));
      for (float& v : x) {
        if (c.dtype == DType::kInt32) {
          const int32_t k = small(rng);
          std::memcpy(&v, &k, 4);
        } else {
          v = real ? unit(rng) : static_cast<float>(small(rng));
        }
      }
      auto want = Run(cpu_, spec, x);
      ASSERT_TRUE(want->status().ok()) << want->status();
      for (LaunchMode launch : {LaunchMode::kStream, LaunchMode::kPdl, LaunchMode::kGraphPdl}) {
        spec.launch = launch;
        const std::string what = std::string(c.name) + " on " + ShapeString(shape) + " " +
                                 LaunchModeName(launch);
        auto got = Run(cuda_, spec, x);
        ASSERT_TRUE(got->status().ok()) << what << ": " << got->status();
        EXPECT_EQ(got->info().output_shape, want->info().output_shape) << what;
        EXPECT_EQ(got->info().output_dtype, want->info().output_dtype) << what;
        EXPECT_TRUE(got->output() == want->output()) << what << ": results differ";
      }
    }
  }
}

// A machine without the NVIDIA driver has no GPU to offer: the backend is UNAVAILABLE (not a
// driver-version error), and --backend auto runs on the CPU. Where a driver is loaded, the
// driver-version path is the one that applies and this test has nothing to check.
TEST(CudaBackendStart, WithoutADriverTheBackendIsUnavailableAndAutoFallsBackToTheCpu) {
  int driver = 0;
  cudaDriverGetVersion(&driver);
  if (driver > 0) GTEST_SKIP() << "an NVIDIA driver is loaded (CUDA " << driver << ")";
  absl::StatusOr<std::unique_ptr<Backend>> cuda = CreateCudaBackend(CudaBackendOptions{});
  ASSERT_EQ(cuda.status().code(), absl::StatusCode::kUnavailable) << cuda.status();
  EXPECT_NE(cuda.status().message().find("no NVIDIA driver"), std::string::npos) << cuda.status();

  absl::StatusOr<BackendSelection> forced =
      CreateBackend(BackendChoice::kCuda, CudaBackendOptions{}, CpuBackendOptions{});
  EXPECT_EQ(forced.status().code(), absl::StatusCode::kUnavailable) << forced.status();
  absl::StatusOr<BackendSelection> automatic =
      CreateBackend(BackendChoice::kAuto, CudaBackendOptions{}, CpuBackendOptions{});
  ASSERT_TRUE(automatic.ok()) << automatic.status();
  EXPECT_EQ(automatic->backend->name(), "cpu");
  EXPECT_NE(automatic->reason.find("no NVIDIA driver"), std::string::npos) << automatic->reason;
}

}  // namespace
}  // namespace gpupipe::engine
