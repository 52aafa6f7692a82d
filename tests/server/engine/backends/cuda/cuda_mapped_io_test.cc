// Small jobs without copies (CudaBackendOptions::mapped_io_max_bytes): their kernels read the
// staged input from, and write the result to, the lane's mapped pinned buffers. Against the
// same jobs on a backend that copies, asked for direct staging (the kernels a job without
// copies runs), byte for byte, and against the CPU backend on fresh random data; and only the
// jobs the rule admits run that way. Skips where no CUDA device is usable.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "server/engine/backends/cpu/cpu_backend.h"
#include "server/engine/backends/cuda/cuda_backend.h"
#include "server/engine/engine.h"
#include "tests/testing/random_tensor.h"
#include "tests/testing/typed_tensor.h"
#include "tests/testing/recording_sink.h"

namespace gpupipe::engine {
namespace {

using gpupipe::testing::RandomInput;
using gpupipe::testing::RecordingSink;
using gpupipe::testing::ValueOf;

constexpr char kMappedStaging[] = "direct (mapped host memory)";

// One lane per level, so that repeated jobs of a priority meet one lane's graph cache.
std::unique_ptr<Engine> CudaEngine(int64_t mapped_io_max_bytes, std::string* why) {
  CudaBackendOptions options;
  options.lanes_per_level = 1;
  options.mapped_io_max_bytes = mapped_io_max_bytes;
  absl::StatusOr<std::unique_ptr<Backend>> backend = CreateCudaBackend(options);
  if (!backend.ok()) {
    *why = backend.status().ToString();
    return nullptr;
  }
  EngineOptions engine_options;
  engine_options.chunk_policy.min_chunk_bytes = 0;  // jobs that ask for small chunks
  return Engine::Create(*std::move(backend), engine_options);
}

class CudaMappedIo : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string why;
    mapped_ = CudaEngine(CudaBackendOptions{}.mapped_io_max_bytes, &why).release();
    copied_ = CudaEngine(0, &why).release();
    if (mapped_ == nullptr || copied_ == nullptr) skip_reason_ = new std::string(why);
    cpu_ = Engine::Create(CreateCpuBackend({}), {}).release();
  }
  static void TearDownTestSuite() {
    delete mapped_;
    delete copied_;
    delete cpu_;
    mapped_ = copied_ = cpu_ = nullptr;
  }
  void SetUp() override {
    if (skip_reason_) GTEST_SKIP() << "no usable CUDA device: " << *skip_reason_;
  }

  static std::shared_ptr<RecordingSink> Run(Engine* engine, const JobSpec& spec,
                                            const std::string& x) {
    auto sink = std::make_shared<RecordingSink>();
    std::string input = x;  // Submit takes the bytes over
    const absl::Status s = engine->Submit(spec, input, sink);
    EXPECT_TRUE(s.ok()) << s;
    if (s.ok()) EXPECT_TRUE(sink->WaitDone(std::chrono::seconds(60)));
    EXPECT_TRUE(sink->status().ok()) << sink->status();
    return sink;
  }

  static Engine* mapped_;
  static Engine* copied_;
  static Engine* cpu_;
  static std::string* skip_reason_;
};

Engine* CudaMappedIo::mapped_ = nullptr;
Engine* CudaMappedIo::copied_ = nullptr;
Engine* CudaMappedIo::cpu_ = nullptr;
std::string* CudaMappedIo::skip_reason_ = nullptr;

// `got` against the CPU backend's result `reference` of a job of `inputs` elements: integers
// exactly; floats within a relative tolerance of their dtype plus an absolute term for
// reductions (of inputs / outputs elements each) and near-zero normalized values.
void ExpectNearReference(const RecordingSink& reference, const std::string& got, int64_t inputs,
                         const std::string& what) {
  const DType dtype = reference.info().output_dtype;
  const std::string want = reference.output();
  ASSERT_EQ(got.size(), want.size()) << what;
  if (dtype == DType::kInt32 || dtype == DType::kInt64) {
    EXPECT_TRUE(got == want) << what << ": results differ from the CPU's";
    return;
  }
  const size_t n = want.size() / static_cast<size_t>(DTypeSize(dtype));
  const double reduced = static_cast<double>(inputs) / static_cast<double>(std::max<size_t>(1, n));
  const double rel = dtype == DType::kFloat64 ? 1e-10 : dtype == DType::kFloat16 ? 4e-3 : 2e-4;
  const double abs = (dtype == DType::kFloat16 ? 1e-3 : 1e-6) + 2e-5 * std::sqrt(reduced);
  for (size_t i = 0; i < n; ++i) {
    const double g = ValueOf(dtype, got, i);
    const double w = ValueOf(dtype, want, i);
    if (std::isnan(g) && std::isnan(w)) continue;
    ASSERT_NEAR(g, w, rel * std::fabs(w) + abs) << what << " element " << i;
  }
}

struct Pipeline {
  const char* name;
  std::vector<OpSpec> ops;
  bool floats_only;
};

std::vector<Pipeline> MappablePipelines() {
  OpSpec add{OpKind::kAdd};
  add.alpha = 1;
  add.value = 3;
  OpSpec affine{OpKind::kAffine};
  affine.alpha = 2;
  affine.value = 1;
  return {
      {"affine|relu|softmax", {affine, {OpKind::kRelu}, {OpKind::kSoftmax}}, true},
      {"add|abs", {add, {OpKind::kAbs}}, false},
      {"sum", {{OpKind::kSum}}, false},
      {"max", {{OpKind::kMax}}, false},
      {"add|argmax", {add, {OpKind::kArgmax}}, false},
      {"mean", {{OpKind::kMean}}, true},
      {"norm2", {{OpKind::kNorm2}}, true},
      {"l2normalize", {{OpKind::kL2Normalize}}, true},
      {"standardize|norm2", {{OpKind::kStandardize}, {OpKind::kNorm2}}, true},
      {"softmax|sum", {{OpKind::kSoftmax}, {OpKind::kSum}}, true},
  };
}

// Every mappable op family and dtype, on shapes up to the limit, rows long enough for the
// split and multi-kernel paths (partials, statistics) included, in every launch mode, each job
// twice so that auto and graph modes replay: the mapped backend runs them without copies and
// gives the bytes of the copying backend's direct kernels, which are the CPU backend's within
// tolerance.
TEST_F(CudaMappedIo, MappedJobsGiveTheBytesOfCopiedJobsForEveryOpFamilyAndDtype) {
  const uint64_t seed = gpupipe::testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (replay with GPUPIPE_TEST_SEED)");
  int n = 0;
  int mapped_jobs = 0;
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kInt32}) {
    for (const Pipeline& p : MappablePipelines()) {
      if (p.floats_only && dtype == DType::kInt32) continue;
      for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{
               {1, 1}, {1, 1024}, {7, 129}, {3, 5, 11}, {1, 8192}, {2, 8192}, {1, 16384}}) {
        JobSpec spec;
        spec.dtype = dtype;
        spec.shape = shape;
        spec.ops = p.ops;
        int64_t count = 1;
        for (int64_t d : shape) count *= d;
        if (count * DTypeSize(dtype) > CudaBackendOptions{}.mapped_io_max_bytes) continue;
        for (LaunchMode launch :
             {LaunchMode::kAuto, LaunchMode::kStream, LaunchMode::kPdl, LaunchMode::kGraphPdl}) {
          spec.launch = launch;
          for (int round = 0; round < 2; ++round) {
            // Fresh data each round: a replayed graph must read this job's staged input.
            const std::string x = RandomInput(dtype, count, seed + n + 7919 * (round + 1));
            const std::string what = std::string(DTypeName(dtype)) + " " + p.name + " on " +
                                     ShapeString(shape) + " " + LaunchModeName(launch) +
                                     " round " + std::to_string(round);
            JobSpec cpu_spec = spec;
            cpu_spec.launch = LaunchMode::kAuto;  // the CPU backend has no graph modes
            auto reference = Run(cpu_, cpu_spec, x);
            JobSpec direct = spec;
            direct.staging = Staging::kDirect;
            auto copied = Run(copied_, direct, x);
            auto got = Run(mapped_, spec, x);
            ASSERT_TRUE(got->status().ok()) << what << ": " << got->status();
            const JobTiming t = got->timing();
            EXPECT_EQ(t.staging, kMappedStaging) << what;
            EXPECT_EQ(t.h2d_us, 0.0) << what;
            EXPECT_EQ(t.d2h_us, 0.0) << what;
            EXPECT_GT(t.kernels, 0) << what;
            EXPECT_GT(t.compute_us, 0.0) << what;
            if (round == 1 && launch == LaunchMode::kGraphPdl) EXPECT_EQ(t.graph, "hit") << what;
            if (round == 1 && launch == LaunchMode::kAuto) EXPECT_NE(t.graph, "") << what;
            EXPECT_NE(copied->timing().staging, kMappedStaging) << what;
            EXPECT_EQ(got->info().output_shape, reference->info().output_shape) << what;
            EXPECT_TRUE(got->output() == copied->output()) << what << ": differs from copied";
            ExpectNearReference(*reference, got->output(), count, what);
            ++mapped_jobs;
          }
        }
        ++n;
      }
    }
  }
  EXPECT_GT(mapped_jobs, 1000);
}

// A cached graph of a job without copies is updated in place when only the job's parameters
// change, and then computes with the new ones; new data through it is the new job's.
TEST_F(CudaMappedIo, AMappedGraphUpdatesItsParametersAndReadsEachJobsInput) {
  const uint64_t seed = gpupipe::testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (replay with GPUPIPE_TEST_SEED)");
  OpSpec affine{OpKind::kAffine};
  affine.alpha = 2;
  affine.value = 1;
  JobSpec spec;
  spec.shape = {3, 1000};
  spec.ops = {affine, {OpKind::kSoftmax}};
  spec.launch = LaunchMode::kGraphPdl;
  spec.priority = Priority::kHigh;  // a lane no other test of the suite used
  const std::string x = RandomInput(DType::kFloat32, 3000, seed);
  const std::string y = RandomInput(DType::kFloat32, 3000, seed + 1);
  JobSpec direct = spec;
  direct.staging = Staging::kDirect;
  auto first = Run(mapped_, spec, x);
  auto second = Run(mapped_, spec, x);
  EXPECT_EQ(second->timing().graph, "hit");
  EXPECT_TRUE(second->output() == Run(copied_, direct, x)->output());
  JobSpec changed = spec;
  changed.ops[0].alpha = -3;
  JobSpec changed_direct = changed;
  changed_direct.staging = Staging::kDirect;
  auto updated = Run(mapped_, changed, x);
  EXPECT_EQ(updated->timing().graph, "update");
  EXPECT_EQ(updated->timing().staging, kMappedStaging);
  EXPECT_TRUE(updated->output() == Run(copied_, changed_direct, x)->output());
  EXPECT_FALSE(updated->output() == first->output());
  auto fresh = Run(mapped_, changed, y);
  EXPECT_EQ(fresh->timing().graph, "hit");
  EXPECT_TRUE(fresh->output() == Run(copied_, changed_direct, y)->output());
}

// Where the rule does not admit a job, it copies as before, with the same results: over the
// size limit in or out, a row-resize op, a staging the job asked for, profiling, and a job in
// several chunks. A job of exactly the limit runs mapped.
TEST_F(CudaMappedIo, OnlyTheJobsTheRuleAdmitsRunWithoutCopies) {
  const uint64_t seed = gpupipe::testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (replay with GPUPIPE_TEST_SEED)");
  const int64_t limit_floats = CudaBackendOptions{}.mapped_io_max_bytes / 4;
  OpSpec affine{OpKind::kAffine};
  affine.alpha = 2;
  affine.value = 1;
  const std::vector<OpSpec> softmax = {affine, {OpKind::kRelu}, {OpKind::kSoftmax}};
  OpSpec histogram{OpKind::kHistogram};
  histogram.bins = 16;
  histogram.lo = -1;
  histogram.hi = 1;
  OpSpec convolve{OpKind::kConvolve};
  convolve.taps = {0.25, 0.5, 0.25};
  OpSpec topk{OpKind::kTopk};
  topk.k = 4;
  struct Case {
    const char* name;
    std::vector<int64_t> shape;
    std::vector<OpSpec> ops;
    bool mapped;
    Staging staging = Staging::kAuto;
    bool profile = false;
    int64_t chunk_bytes = 0;
  };
  const std::vector<Case> cases = {
      {"the limit exactly", {limit_floats / 1024, 1024}, softmax, true},
      {"one row over the limit", {limit_floats / 1024 + 1, 1024}, softmax, false},
      {"one element over the limit", {limit_floats + 1}, {affine, {OpKind::kRelu}}, false},
      {"a reduction of the limit", {limit_floats / 256, 256}, {{OpKind::kSum}}, true},
      {"cumsum", {4, 256}, {{OpKind::kCumsum}}, false},
      {"histogram", {4, 256}, {histogram}, false},
      {"convolve", {4, 256}, {convolve}, false},
      {"topk", {4, 256}, {topk}, false},
      {"staging asked: pipeline", {4, 256}, softmax, false, Staging::kPipeline},
      {"staging asked: bulk", {4, 256}, softmax, false, Staging::kBulk},
      {"staging asked: direct", {4, 256}, softmax, false, Staging::kDirect},
      {"profiled", {4, 256}, softmax, false, Staging::kAuto, true},
      {"in four chunks", {4, 1024}, softmax, false, Staging::kAuto, false, 4096},
  };
  int n = 0;
  for (const Case& c : cases) {
    for (int round = 0; round < 3; ++round) {
      JobSpec spec;
      spec.shape = c.shape;
      spec.ops = c.ops;
      spec.staging = c.staging;
      spec.profile = c.profile;
      spec.chunk_bytes = c.chunk_bytes;
      int64_t count = 1;
      for (int64_t d : c.shape) count *= d;
      const std::string x = RandomInput(DType::kFloat32, count, seed + n++);
      const std::string what = std::string(c.name) + " round " + std::to_string(round);
      JobSpec cpu_spec = spec;
      cpu_spec.staging = Staging::kAuto;  // the CPU backend stages nothing
      auto reference = Run(cpu_, cpu_spec, x);
      auto got = Run(mapped_, spec, x);
      ASSERT_TRUE(got->status().ok()) << what << ": " << got->status();
      const JobTiming t = got->timing();
      if (c.mapped) {
        EXPECT_EQ(t.staging, kMappedStaging) << what;
        EXPECT_EQ(t.h2d_us + t.d2h_us, 0.0) << what;
      } else {
        EXPECT_NE(t.staging, kMappedStaging) << what;
        EXPECT_GT(t.h2d_us, 0.0) << what;
        EXPECT_GT(t.d2h_us, 0.0) << what;
      }
      ExpectNearReference(*reference, got->output(), count, what);
    }
  }
}

}  // namespace
}  // namespace gpupipe::engine
