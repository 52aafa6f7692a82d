// The engine with the CPU backend: lifecycle, ordering, chunking, concurrency, cancellation,
// admission and shutdown. The same contract holds for the CUDA backend (cuda_backend_test).
#include "server/engine/engine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <thread>

#include "common/float16.h"
#include "server/engine/backends/cpu/cpu_backend.h"
#include "tests/testing/random_tensor.h"
#include "tests/testing/recording_sink.h"

namespace gpupipe::engine {
namespace {

using gpupipe::testing::AsBytes;
using gpupipe::testing::AsFloats;
using gpupipe::testing::RecordingSink;

std::unique_ptr<Engine> MakeEngine(int lanes = 1, int64_t max_chunk_bytes = 1 << 20,
                                   EngineOptions options = {}) {
  CpuBackendOptions cpu;
  cpu.lanes_per_level = lanes;
  options.limits.max_chunk_bytes = max_chunk_bytes;
  return Engine::Create(CreateCpuBackend(cpu), std::move(options));
}

JobSpec Spec(std::vector<int64_t> shape, std::vector<OpSpec> ops,
             Priority priority = Priority::kNormal) {
  JobSpec spec;
  spec.shape = std::move(shape);
  spec.ops = std::move(ops);
  spec.priority = priority;
  return spec;
}

TEST(Engine, RunsAJobAndReportsEventsInOrder) {
  auto engine = MakeEngine();
  auto sink = std::make_shared<RecordingSink>();
  std::string input = AsBytes({-1.0f, 0.5f, 2.0f, -3.0f});
  ASSERT_TRUE(engine->Submit(Spec({2, 2}, {{OpKind::kAffine, 2, 1}, {OpKind::kRelu}}), input, sink).ok());
  ASSERT_TRUE(sink->WaitDone());
  EXPECT_TRUE(sink->status().ok()) << sink->status();
  EXPECT_FALSE(sink->info().job_id.empty());
  EXPECT_EQ(sink->info().backend, "cpu");
  EXPECT_EQ(sink->info().output_shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(AsFloats(sink->output()), (std::vector<float>{0.0f, 2.0f, 5.0f, 0.0f}));
  ASSERT_TRUE(sink->has_timing());
  EXPECT_EQ(sink->timing().bytes_in, 16);
  EXPECT_EQ(sink->timing().bytes_out, 16);
  EXPECT_GE(sink->timing().total_us, sink->timing().compute_us);
}

TEST(Engine, RowOpsFollowNumpySemantics) {
  auto engine = MakeEngine();
  auto sum = std::make_shared<RecordingSink>();
  std::string input = AsBytes({1, 2, 3, 4, 5, 6});
  ASSERT_TRUE(engine->Submit(Spec({2, 3}, {{OpKind::kSum}}), input, sum).ok());
  auto softmax = std::make_shared<RecordingSink>();
  std::string input2 = AsBytes({0, 0, 1000, 1000});
  ASSERT_TRUE(engine->Submit(Spec({2, 2}, {{OpKind::kSoftmax}}), input2, softmax).ok());
  ASSERT_TRUE(sum->WaitDone() && softmax->WaitDone());
  EXPECT_EQ(sum->info().output_shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(AsFloats(sum->output()), (std::vector<float>{6, 15}));
  EXPECT_EQ(AsFloats(softmax->output()), (std::vector<float>{0.5f, 0.5f, 0.5f, 0.5f}));
}

template <typename T>
std::string BytesOf(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}
template <typename T>
std::vector<T> ValuesOf(const std::string& bytes) {
  std::vector<T> v(bytes.size() / sizeof(T));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
  return v;
}

TEST(Engine, Int32JobsFollowNumpyDtypes) {
  auto engine = MakeEngine();
  JobSpec spec = Spec({2, 3}, {{OpKind::kAdd, 1, 0, 1}, {OpKind::kSum}});
  spec.dtype = DType::kInt32;
  auto sink = std::make_shared<RecordingSink>();
  std::string input = BytesOf<int32_t>({2147483647, 2147483647, 0, -5, 1, 2});
  ASSERT_TRUE(engine->Submit(spec, input, sink).ok());
  ASSERT_TRUE(sink->WaitDone());
  ASSERT_TRUE(sink->status().ok()) << sink->status();
  EXPECT_EQ(sink->info().output_dtype, DType::kInt64);  // np.sum of int32
  // add wraps in int32 (2^31 - 1 + 1 = -2^31), the sum does not.
  EXPECT_EQ(ValuesOf<int64_t>(sink->output()),
            (std::vector<int64_t>{-2 * int64_t{2147483648} + 1, -4 + 2 + 3}));

  spec.ops = {{OpKind::kRelu}, {OpKind::kMax}};
  auto max = std::make_shared<RecordingSink>();
  std::string input2 = BytesOf<int32_t>({-7, -3, -1, 4, 9, 2});
  ASSERT_TRUE(engine->Submit(spec, input2, max).ok());
  ASSERT_TRUE(max->WaitDone());
  EXPECT_EQ(max->info().output_dtype, DType::kInt32);
  EXPECT_EQ(ValuesOf<int32_t>(max->output()), (std::vector<int32_t>{0, 9}));
}

TEST(Engine, Float64AndFloat16JobsKeepTheirDtype) {
  auto engine = MakeEngine();
  JobSpec spec = Spec({2, 2}, {{OpKind::kAffine, 0.1, 0}, {OpKind::kSum}});
  spec.dtype = DType::kFloat64;
  auto f64 = std::make_shared<RecordingSink>();
  std::string input = BytesOf<double>({1, 2, 3, 4});
  ASSERT_TRUE(engine->Submit(spec, input, f64).ok());
  ASSERT_TRUE(f64->WaitDone());
  ASSERT_TRUE(f64->status().ok()) << f64->status();
  EXPECT_EQ(f64->info().output_dtype, DType::kFloat64);
  const std::vector<double> sums = ValuesOf<double>(f64->output());
  ASSERT_EQ(sums.size(), 2u);
  EXPECT_DOUBLE_EQ(sums[0], 0.1 * 1 + 0.1 * 2);  // alpha stays a double, not 0.1f
  EXPECT_DOUBLE_EQ(sums[1], 0.1 * 3 + 0.1 * 4);

  spec.dtype = DType::kFloat16;
  spec.ops = {{OpKind::kSoftmax}, {OpKind::kArgmax}};
  auto f16 = std::make_shared<RecordingSink>();
  std::string input2 = BytesOf<gpupipe::HalfBits>(
      {gpupipe::FloatToHalf(1), gpupipe::FloatToHalf(3), gpupipe::FloatToHalf(-2),
       gpupipe::FloatToHalf(0.5f)});
  ASSERT_TRUE(engine->Submit(spec, input2, f16).ok());
  ASSERT_TRUE(f16->WaitDone());
  ASSERT_TRUE(f16->status().ok()) << f16->status();
  EXPECT_EQ(f16->info().output_dtype, DType::kInt64);
  EXPECT_EQ(ValuesOf<int64_t>(f16->output()), (std::vector<int64_t>{1, 1}));
}

TEST(Engine, ChunksAreBoundedContiguousAndCoverTheOutput) {
  auto engine = MakeEngine(1, /*max_chunk_bytes=*/64);
  auto sink = std::make_shared<RecordingSink>();
  const uint64_t seed = gpupipe::testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<float> x = gpupipe::testing::RandomFloats(1001, seed);
  std::string input = AsBytes(x);
  ASSERT_TRUE(engine->Submit(Spec({1001}, {{OpKind::kRelu}}), input, sink).ok());
  ASSERT_TRUE(sink->WaitDone());
  ASSERT_TRUE(sink->status().ok());
  EXPECT_EQ(sink->max_chunk(), 64);
  EXPECT_EQ(sink->chunks(), (1001 * 4 + 63) / 64);
  std::vector<float> y = AsFloats(sink->output());
  ASSERT_EQ(y.size(), x.size());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i] < 0 ? 0.0f : x[i]) << i;
}

TEST(Engine, RejectedJobsNeverReachTheSink) {
  auto engine = MakeEngine();
  auto sink = std::make_shared<RecordingSink>();
  std::string input = AsBytes({1, 2, 3});
  absl::Status s = engine->Submit(Spec({2, 2}, {{OpKind::kRelu}}), input, sink);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(sink->accepted());
  EXPECT_EQ(sink->done_calls(), 0);
  EXPECT_EQ(input.size(), 12u) << "input must not be consumed by a rejected job";
}

TEST(Engine, ManyConcurrentJobsOfMixedPrioritiesEachEndOnce) {
  auto engine = MakeEngine(/*lanes=*/2);
  const uint64_t seed = gpupipe::testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  struct Case {
    std::shared_ptr<RecordingSink> sink;
    std::vector<float> x;
  };
  std::vector<Case> cases;
  std::vector<std::thread> submitters;
  std::mutex mu;
  for (int t = 0; t < 4; ++t) {
    submitters.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        Case c{std::make_shared<RecordingSink>(),
               gpupipe::testing::RandomFloats(1 + (i * 37 + t) % 500, seed + t * 100 + i)};
        std::string input = AsBytes(c.x);
        const auto priority = static_cast<Priority>((i + t) % kPriorityLevels);
        ASSERT_TRUE(engine->Submit(Spec({static_cast<int64_t>(c.x.size())},
                                        {{OpKind::kAffine, -1, 0.5}}, priority),
                                   input, c.sink).ok());
        std::lock_guard<std::mutex> lock(mu);
        cases.push_back(std::move(c));
      }
    });
  }
  for (auto& t : submitters) t.join();
  ASSERT_EQ(cases.size(), 100u);
  for (const Case& c : cases) {
    ASSERT_TRUE(c.sink->WaitDone());
    EXPECT_TRUE(c.sink->status().ok());
    EXPECT_EQ(c.sink->done_calls(), 1);
    std::vector<float> y = AsFloats(c.sink->output());
    ASSERT_EQ(y.size(), c.x.size());
    for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], std::fma(-1.0f, c.x[i], 0.5f));
  }
  EXPECT_EQ(engine->jobs_in_flight(), 0);
}

TEST(Engine, AReaderThatGoesAwayCancelsItsJob) {
  auto engine = MakeEngine(1, 64);
  auto sink = std::make_shared<RecordingSink>();
  sink->SetGateOpen(false);  // the reader stops reading after the first chunk
  std::string input = AsBytes(std::vector<float>(1000, 1.0f));
  ASSERT_TRUE(engine->Submit(Spec({1000}, {{OpKind::kRelu}}), input, sink).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(sink->chunks(), 1) << "the lane must wait for the reader, not buffer";
  sink->Cancel();
  ASSERT_TRUE(sink->WaitDone());
  EXPECT_EQ(sink->status().code(), absl::StatusCode::kCancelled);
  EXPECT_FALSE(sink->has_timing());
}

TEST(Engine, QueuedJobOfACancelledReaderIsSkipped) {
  auto engine = MakeEngine(1, 64);
  auto blocker = std::make_shared<RecordingSink>();
  blocker->SetGateOpen(false);
  std::string big = AsBytes(std::vector<float>(1000, 1.0f));
  ASSERT_TRUE(engine->Submit(Spec({1000}, {{OpKind::kRelu}}), big, blocker).ok());
  auto queued = std::make_shared<RecordingSink>();
  std::string small = AsBytes({1.0f});
  ASSERT_TRUE(engine->Submit(Spec({1}, {{OpKind::kRelu}}), small, queued).ok());
  queued->Cancel();
  blocker->SetGateOpen(true);
  ASSERT_TRUE(queued->WaitDone());
  EXPECT_EQ(queued->status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(queued->chunks(), 0);
  ASSERT_TRUE(blocker->WaitDone());
  EXPECT_TRUE(blocker->status().ok());
}

TEST(Engine, AdmissionRefusesBeyondTheQueueBound) {
  EngineOptions options;
  options.max_queued_jobs = 2;
  auto engine = MakeEngine(1, 64, options);
  auto blocker = std::make_shared<RecordingSink>();
  blocker->SetGateOpen(false);
  std::string big = AsBytes(std::vector<float>(100, 1.0f));
  ASSERT_TRUE(engine->Submit(Spec({100}, {{OpKind::kRelu}}), big, blocker).ok());
  // Wait until the lane has taken the blocker, so the queue holds only what follows.
  while (blocker->chunks() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  for (int i = 0; i < 2; ++i) {
    sinks.push_back(std::make_shared<RecordingSink>());
    std::string in = AsBytes({1.0f});
    ASSERT_TRUE(engine->Submit(Spec({1}, {{OpKind::kRelu}}), in, sinks.back()).ok());
  }
  auto refused = std::make_shared<RecordingSink>();
  std::string in = AsBytes({1.0f});
  absl::Status s = engine->Submit(Spec({1}, {{OpKind::kRelu}}), in, refused);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_FALSE(refused->accepted());
  blocker->SetGateOpen(true);
  for (auto& sink : sinks) {
    ASSERT_TRUE(sink->WaitDone());
    EXPECT_TRUE(sink->status().ok());
  }
}

TEST(Engine, ShutdownEndsQueuedJobsWithUnavailableAndRefusesNewOnes) {
  auto engine = MakeEngine(1, 64);
  auto blocker = std::make_shared<RecordingSink>();
  blocker->SetGateOpen(false);
  std::string big = AsBytes(std::vector<float>(100, 1.0f));
  ASSERT_TRUE(engine->Submit(Spec({100}, {{OpKind::kRelu}}), big, blocker).ok());
  while (blocker->chunks() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto queued = std::make_shared<RecordingSink>();
  std::string in = AsBytes({1.0f});
  ASSERT_TRUE(engine->Submit(Spec({1}, {{OpKind::kRelu}}), in, queued).ok());

  EXPECT_FALSE(engine->Drain(std::chrono::milliseconds(20)));
  std::string in2 = AsBytes({1.0f});
  auto late = std::make_shared<RecordingSink>();
  EXPECT_EQ(engine->Submit(Spec({1}, {{OpKind::kRelu}}), in2, late).code(),
            absl::StatusCode::kUnavailable);

  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    blocker->SetGateOpen(true);
  });
  engine->Shutdown();
  opener.join();
  EXPECT_EQ(queued->status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(queued->done_calls(), 1);
  EXPECT_TRUE(blocker->status().ok()) << "a running job finishes";
  EXPECT_EQ(engine->jobs_in_flight(), 0);
}

TEST(Engine, DescribeListsTheBackendAndLevels) {
  auto engine = MakeEngine(3);
  EngineDescription d = engine->Describe();
  EXPECT_EQ(d.backend, "cpu");
  EXPECT_FALSE(d.device.has_value());
  ASSERT_EQ(d.levels.size(), 3u);
  EXPECT_EQ(d.levels[2].priority, Priority::kHigh);
  EXPECT_EQ(d.levels[2].lanes, 3);
}

}  // namespace
}  // namespace gpupipe::engine

namespace gpupipe::engine {
namespace {

TEST(EngineExplain, DryRunReportsThePlanAndRunsNothing) {
  auto engine = MakeEngine();
  auto sink = std::make_shared<RecordingSink>();
  JobSpec spec = Spec({4, 8}, {{OpKind::kAffine, 2, 1}, {OpKind::kRelu}, {OpKind::kSoftmax},
                               {OpKind::kSum}});
  spec.dry_run = true;
  std::string input = AsBytes(std::vector<float>(32, 1.0f));
  ASSERT_TRUE(engine->Submit(spec, input, sink).ok());
  ASSERT_TRUE(sink->WaitDone());
  EXPECT_TRUE(sink->status().ok());
  EXPECT_EQ(sink->plans(), 1);
  EXPECT_EQ(sink->chunks(), 0);
  EXPECT_FALSE(sink->has_timing());
  const PlanDescription plan = sink->plan();
  ASSERT_EQ(plan.kernels.size(), 2u);
  EXPECT_EQ(plan.kernels[0].ops, "affine+relu+softmax");
  EXPECT_EQ(plan.kernels[1].ops, "sum");
  ASSERT_EQ(plan.edges.size(), 1u);
  EXPECT_EQ(plan.edges[0].from, 0);
  EXPECT_EQ(plan.edges[0].to, 1);
  EXPECT_EQ(sink->info().output_shape, (std::vector<int64_t>{4}));
}

TEST(EngineExplain, ExplainSendsThePlanBeforeTheResult) {
  auto engine = MakeEngine();
  auto sink = std::make_shared<RecordingSink>();
  JobSpec spec = Spec({3}, {{OpKind::kRelu}});
  spec.explain = true;
  std::string input = AsBytes({-1, 0, 1});
  ASSERT_TRUE(engine->Submit(spec, input, sink).ok());
  ASSERT_TRUE(sink->WaitDone());
  EXPECT_TRUE(sink->status().ok());
  EXPECT_EQ(sink->plans(), 1);
  EXPECT_EQ(AsFloats(sink->output()), (std::vector<float>{0, 0, 1}));
}

TEST(EngineExplain, ProfileTimesEveryStep) {
  auto engine = MakeEngine();
  auto sink = std::make_shared<RecordingSink>();
  JobSpec spec = Spec({2, 3}, {{OpKind::kSoftmax}, {OpKind::kAffine, 2, 0}, {OpKind::kSum}});
  spec.profile = true;
  std::string input = AsBytes({1, 2, 3, 4, 5, 6});
  ASSERT_TRUE(engine->Submit(spec, input, sink).ok());
  ASSERT_TRUE(sink->WaitDone());
  ASSERT_TRUE(sink->has_timing());
  ASSERT_EQ(sink->timing().steps.size(), 2u);
  EXPECT_EQ(sink->timing().steps[0].ops, "softmax");
  EXPECT_EQ(sink->timing().steps[1].ops, "affine+sum");
}

TEST(EngineExplain, TheCpuBackendRejectsLaunchModesItCannotHonour) {
  auto engine = MakeEngine();
  auto sink = std::make_shared<RecordingSink>();
  JobSpec spec = Spec({3}, {{OpKind::kRelu}});
  spec.launch = LaunchMode::kGraph;
  std::string input = AsBytes({-1, 0, 1});
  absl::Status s = engine->Submit(spec, input, sink);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "options.launch: graph is not supported by the cpu backend (supported: auto)");
  spec.launch = LaunchMode::kAuto;
  spec.staging = Staging::kPipeline;
  s = engine->Submit(spec, input, sink);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("options.staging: pipeline"), std::string::npos) << s;
}

}  // namespace
}  // namespace gpupipe::engine
