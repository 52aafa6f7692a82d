// The CUDA backend through the engine against the CPU backend (the reference), on fresh random
// data, for every op, staging mode and launch mode. Skips where no CUDA device is usable.
#include <gtest/gtest.h>

#include <cmath>

#include "server/engine/cpu_backend.h"
#include "server/engine/cuda/cuda_backend.h"
#include "server/engine/engine.h"
#include "tests/testing/random_tensor.h"
#include "tests/testing/recording_sink.h"

namespace gpupipe::engine {
namespace {

using gpupipe::testing::AsBytes;
using gpupipe::testing::AsFloats;
using gpupipe::testing::RecordingSink;

class CudaBackendTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    CudaBackendOptions options;
    options.max_input_bytes = 64 << 20;
    options.lanes_per_level = 1;
    absl::StatusOr<std::unique_ptr<Backend>> backend = CreateCudaBackend(options);
    if (!backend.ok()) {
      skip_reason_ = new std::string(backend.status().ToString());
      return;
    }
    EngineOptions engine_options;
    engine_options.limits.max_input_bytes = options.max_input_bytes;
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
    auto sink = std::make_shared<RecordingSink>();
    std::string input = AsBytes(x);
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

struct PipelineCase {
  const char* name;
  std::vector<OpSpec> ops;
  bool exact;  // elementwise only: bit-identical to the reference
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
  };
}

std::vector<std::vector<int64_t>> Shapes() {
  return {{1}, {31}, {4096}, {(1 << 20) + 3}, {3, 5}, {1000, 33}, {64, 4097}, {2, 1 << 20},
          {4096, 1}, {2, 3, 7}};
}

// Per-element tolerance of a float32 result against the double-accumulating reference.
// Reductions get room for float32 summation over `reduced` elements of magnitude up to ~9
// (random walk growth: sqrt of the count), far below any indexing mistake.
void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, bool exact,
                 int64_t reduced, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (exact) {
      ASSERT_EQ(std::memcmp(&got[i], &want[i], 4), 0)
          << what << " element " << i << ": " << got[i] << " vs " << want[i];
    } else {
      const float tol = 2e-4f * std::fabs(want[i]) +
                        (reduced > 1 ? 1e-5f + 2e-5f * std::sqrt(static_cast<float>(reduced))
                                     : 1e-9f);
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
      bool rank_ok = true;
      size_t rank = shape.size();
      for (const OpSpec& op : pc.ops) {
        if (op.kind == OpKind::kSum || op.kind == OpKind::kSoftmax) {
          if (rank == 0) rank_ok = false;
          if (op.kind == OpKind::kSum) --rank;
        }
      }
      if (!rank_ok) continue;
      int64_t count = 1;
      for (int64_t d : shape) count *= d;
      std::vector<float> x = gpupipe::testing::RandomFloats(count, seed + n++);
      auto want = Run(cpu_, spec, x);
      ASSERT_TRUE(want->status().ok()) << want->status();
      for (Staging staging : {Staging::kDirect, Staging::kPipeline}) {
        for (LaunchMode launch : {LaunchMode::kStream, LaunchMode::kPdl}) {
          spec.staging = staging;
          spec.launch = launch;
          spec.stages = staging == Staging::kPipeline ? 1 + (n % 4) : 0;
          const std::string what = std::string(pc.name) + " on " + ShapeString(shape) + " " +
                                   std::string(StagingName(staging)) + "/" +
                                   std::string(LaunchModeName(launch));
          auto got = Run(cuda_, spec, x);
          ASSERT_TRUE(got->status().ok()) << what << ": " << got->status();
          EXPECT_EQ(got->info().output_shape, want->info().output_shape) << what;
          ExpectClose(AsFloats(got->output()), AsFloats(want->output()), pc.exact,
                      count / static_cast<int64_t>(AsFloats(want->output()).size()), what);
          EXPECT_GT(got->timing().kernels, 0) << what;
          EXPECT_GE(got->timing().compute_us, 0.0) << what;
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

}  // namespace
}  // namespace gpupipe::engine
