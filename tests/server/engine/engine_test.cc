// The engine with the CPU backend: lifecycle, ordering, chunking, concurrency, cancellation,
// admission and shutdown. The same contract holds for the CUDA backend (cuda_backend_test).
#include "server/engine/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_join.h"
#include "common/float16.h"
#include "server/engine/backends/cpu/cpu_backend.h"
#include "server/engine/job/validate.h"
#include "server/engine/pipeline/input_ring.h"
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
  options.chunk_policy.min_chunk_bytes = 0;  // jobs that ask for small chunks
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

// Submits `spec` (100 floats unless it says otherwise) with a reader that takes nothing, and
// waits until its lane has it: the lane stays busy until the test opens the sink's gate.
std::shared_ptr<RecordingSink> BlockLane(Engine& engine,
                                         JobSpec spec = Spec({100}, {{OpKind::kRelu}})) {
  auto blocker = std::make_shared<RecordingSink>();
  blocker->SetGateOpen(false);
  std::string input = AsBytes(std::vector<float>(ElementCount(spec.shape), 1.0f));
  EXPECT_TRUE(engine.Submit(std::move(spec), input, blocker).ok());
  while (blocker->chunks() == 0 && !blocker->WaitDone(std::chrono::milliseconds(1))) {
  }
  return blocker;
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
  // A job leaves the count just after its OnDone, on the engine's thread.
  for (int i = 0; i < 200 && engine->jobs_in_flight() != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
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
  options.admission.max_queued_jobs = 2;
  auto engine = MakeEngine(1, 64, options);
  auto blocker = BlockLane(*engine);  // the queue holds only what follows
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
  auto blocker = BlockLane(*engine);  // the queue holds only what follows
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
  EXPECT_TRUE(blocker->status().ok()) << "a job whose last chunk was in flight finishes";
  EXPECT_EQ(engine->jobs_in_flight(), 0);
}

JobSpec ClientSpec(std::string client, std::vector<int64_t> shape = {1}) {
  JobSpec spec = Spec(std::move(shape), {{OpKind::kRelu}});
  spec.client = std::move(client);
  return spec;
}

// Finished jobs' tags in the order they ran: by their lane runs' numbers, since results may
// be handed over in another order than the runs (RunAlone).
struct RunOrder {
  std::mutex mu;
  std::map<int64_t, std::string> by_run;
  EngineOptions Options() {
    EngineOptions options;
    options.on_job_done = [this](const JobRecord& r) {
      std::lock_guard<std::mutex> lock(mu);
      by_run[r.timing.lane_run] = r.spec.client_tag;
    };
    return options;
  }
  std::vector<std::string> tags() {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<std::string> out;
    for (const auto& [run, tag] : by_run) out.push_back(tag);
    return out;
  }
};

TEST(EngineFairness, AFloodingClientDelaysAnotherByOneJobPerLane) {
  RunOrder order;
  auto engine = MakeEngine(1, 64, order.Options());
  JobSpec first = ClientSpec("flood", {100});
  first.client_tag = "flood-blocker";
  auto blocker = BlockLane(*engine, first);
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  for (int i = 0; i < 20; ++i) {
    JobSpec spec = ClientSpec("flood");
    spec.client_tag = "flood";
    sinks.push_back(std::make_shared<RecordingSink>());
    std::string in = AsBytes({1.0f});
    ASSERT_TRUE(engine->Submit(spec, in, sinks.back()).ok());
  }
  JobSpec other = ClientSpec("other");
  other.client_tag = "other";
  sinks.push_back(std::make_shared<RecordingSink>());
  std::string in = AsBytes({1.0f});
  ASSERT_TRUE(engine->Submit(other, in, sinks.back()).ok());
  blocker->SetGateOpen(true);
  for (auto& sink : sinks) ASSERT_TRUE(sink->WaitDone());
  ASSERT_TRUE(engine->Drain(std::chrono::seconds(10)));  // every job's on_job_done has run
  const std::vector<std::string> tags = order.tags();
  ASSERT_EQ(tags.size(), 22u);
  const auto at = std::find(tags.begin(), tags.end(), "other") - tags.begin();
  // The blocker, then at most one flood job (the flood's turn came first), then the other
  // client: without round-robin it would run 22nd.
  EXPECT_LE(at, 2) << "the other client's job ran at position " << at << ": "
                    << absl::StrJoin(tags, " ");
}

// A sink that notes the thread of its first chunk, and whose OnDone can be held
// until the test lets it go: a result whose hand-over is slow.
class ThreadNotingSink : public RecordingSink {
 public:
  explicit ThreadNotingSink(bool hold_done = false) : released_(!hold_done) {}
  absl::Status OnChunk(int64_t offset, const char* data, int64_t size) override {
    {
      std::lock_guard<std::mutex> lock(hold_mu_);
      if (chunk_thread_ == std::thread::id()) chunk_thread_ = std::this_thread::get_id();
    }
    return RecordingSink::OnChunk(offset, data, size);
  }
  void OnDone(const absl::Status& status) override {
    {
      std::unique_lock<std::mutex> lock(hold_mu_);
      entered_ = true;
      hold_cv_.notify_all();
      hold_cv_.wait(lock, [&] { return released_; });
    }
    RecordingSink::OnDone(status);
  }
  bool WaitEntered() {
    std::unique_lock<std::mutex> lock(hold_mu_);
    return hold_cv_.wait_for(lock, std::chrono::seconds(10), [&] { return entered_; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(hold_mu_);
    released_ = true;
    hold_cv_.notify_all();
  }
  std::thread::id chunk_thread() {
    std::lock_guard<std::mutex> lock(hold_mu_);
    return chunk_thread_;
  }

 private:
  std::mutex hold_mu_;
  std::condition_variable hold_cv_;
  bool entered_ = false;
  bool released_;
  std::thread::id chunk_thread_;
};

// While jobs wait, a lane's worker goes straight on to the next one once a run is over, and the
// finished job's results are handed over by another worker: a slow hand-over holds neither the
// lane nor the jobs behind it.
TEST(EngineLanes, ALaneRunsTheNextQueuedJobWhileAnotherThreadHandsOverResults) {
  auto engine = MakeEngine(1, 64);
  auto first = std::make_shared<ThreadNotingSink>(/*hold_done=*/true);
  auto release = absl::MakeCleanup([&] { first->Release(); });  // whatever fails below
  first->SetGateOpen(false);  // its run holds the lane until the others are queued
  std::string in = AsBytes({-1.0f, 2.0f});
  ASSERT_TRUE(engine->Submit(Spec({2}, {{OpKind::kRelu}}), in, first).ok());
  while (first->chunks() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto second = std::make_shared<ThreadNotingSink>();
  auto third = std::make_shared<ThreadNotingSink>();
  for (const std::shared_ptr<ThreadNotingSink>& sink : {second, third}) {
    std::string more = AsBytes({-1.0f, 2.0f});
    ASSERT_TRUE(engine->Submit(Spec({2}, {{OpKind::kRelu}}), more, sink).ok());
  }
  first->SetGateOpen(true);
  ASSERT_TRUE(first->WaitEntered());
  ASSERT_TRUE(second->WaitDone(std::chrono::seconds(10)));
  ASSERT_TRUE(third->WaitDone(std::chrono::seconds(10)));
  EXPECT_EQ(first->done_calls(), 0) << "its hand-over is still held";
  // The lane's worker ran the second job right after the first, while the first job's results
  // went to another worker (which, held, would otherwise have held the lane too).
  EXPECT_EQ(second->chunk_thread(), first->chunk_thread());
  first->Release();
  ASSERT_TRUE(first->WaitDone(std::chrono::seconds(10)));
  for (const std::shared_ptr<ThreadNotingSink>& sink : {first, second, third}) {
    EXPECT_TRUE(sink->status().ok()) << sink->status();
    EXPECT_EQ(sink->done_calls(), 1);
    EXPECT_EQ(AsFloats(sink->output()), (std::vector<float>{0.0f, 2.0f}));
  }
  EXPECT_TRUE(engine->Drain(std::chrono::seconds(10)));
  EXPECT_EQ(engine->jobs_in_flight(), 0);
}

// Results a lane's worker posted for another thread are handed over before shutdown returns.
TEST(EngineLanes, ShutdownHandsOverEveryPostedResult) {
  auto engine = MakeEngine(1, 64);
  auto blocker = BlockLane(*engine);
  auto held = std::make_shared<ThreadNotingSink>(/*hold_done=*/true);
  std::vector<std::shared_ptr<RecordingSink>> sinks{held};
  for (int i = 0; i < 8; ++i) sinks.push_back(std::make_shared<RecordingSink>());
  for (const std::shared_ptr<RecordingSink>& sink : sinks) {
    std::string in = AsBytes({3.0f});
    ASSERT_TRUE(engine->Submit(Spec({1}, {{OpKind::kRelu}}), in, sink).ok());
  }
  blocker->SetGateOpen(true);
  ASSERT_TRUE(held->WaitEntered());
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    held->Release();
  });
  engine->Shutdown();
  releaser.join();
  // The held job's result was posted before the shutdown began; the others ran (and were
  // posted or handed over) or were stopped or never started by the shutdown: each ends once.
  EXPECT_TRUE(held->status().ok()) << held->status();
  for (const std::shared_ptr<RecordingSink>& sink : sinks) {
    EXPECT_EQ(sink->done_calls(), 1);
    EXPECT_TRUE(sink->status().ok() || sink->status().code() == absl::StatusCode::kUnavailable)
        << sink->status();
  }
  EXPECT_EQ(engine->jobs_in_flight(), 0);
}

TEST(EngineFairness, PerClientLimitsRefuseTheFloodNotTheOthers) {
  EngineOptions options;
  options.admission.max_client_jobs = 3;
  auto engine = MakeEngine(1, 64, options);
  auto blocker = BlockLane(*engine, ClientSpec("flood", {100}));
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  for (int i = 0; i < 2; ++i) {
    sinks.push_back(std::make_shared<RecordingSink>());
    std::string in = AsBytes({1.0f});
    ASSERT_TRUE(engine->Submit(ClientSpec("flood"), in, sinks.back()).ok());
  }
  std::string in = AsBytes({1.0f});
  const absl::Status refused =
      engine->Submit(ClientSpec("flood"), in, std::make_shared<RecordingSink>());
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_NE(refused.message().find("--max-client-jobs"), std::string::npos) << refused;
  for (Priority p : {Priority::kLow, Priority::kNormal, Priority::kHigh}) {
    JobSpec spec = ClientSpec("other");
    spec.priority = p;
    sinks.push_back(std::make_shared<RecordingSink>());
    std::string other_in = AsBytes({1.0f});
    EXPECT_TRUE(engine->Submit(spec, other_in, sinks.back()).ok());
  }
  blocker->SetGateOpen(true);
  for (auto& sink : sinks) {
    ASSERT_TRUE(sink->WaitDone());
    EXPECT_TRUE(sink->status().ok()) << sink->status();
  }
  // Once its jobs ended the flooding client may submit again.
  ASSERT_TRUE(blocker->WaitDone());
  std::string again = AsBytes({1.0f});
  EXPECT_TRUE(engine->Submit(ClientSpec("flood"), again, std::make_shared<RecordingSink>()).ok());
}

// A sink whose job's end runs `on_done` first, on the thread that ends the job: a client that
// answers its Done at once.
class AnsweringSink : public RecordingSink {
 public:
  explicit AnsweringSink(std::function<void()> on_done) : on_done_(std::move(on_done)) {}
  void OnDone(const absl::Status& status) override {
    on_done_();
    RecordingSink::OnDone(status);
  }

 private:
  std::function<void()> on_done_;
};

TEST(EngineFairness, AClientsShareIsFreeByTheTimeItHearsItsJobEnd) {
  // One job a client: each job's Done submits that client's next job from inside the Done, so
  // a share released after the client hears of the end refuses the next job every time. The
  // other client's jobs and a stats reader keep both of the engine's locks busy meanwhile.
  EngineOptions options;
  options.admission.max_client_jobs = 1;
  auto engine = MakeEngine(2, 1 << 20, options);
  constexpr int kChain = 300;
  std::mutex mu;
  std::condition_variable cv;
  int ended = 0;
  absl::Status first_refusal;
  std::vector<std::shared_ptr<RecordingSink>> sinks;  // the chain's sinks, kept to the end
  std::function<void(int)> submit = [&](int i) {
    auto sink = std::make_shared<AnsweringSink>([&, i] {
      if (i + 1 < kChain) submit(i + 1);
      std::lock_guard<std::mutex> lock(mu);
      ++ended;
      cv.notify_all();
    });
    {
      std::lock_guard<std::mutex> lock(mu);
      sinks.push_back(sink);
    }
    std::string in = AsBytes({static_cast<float>(i)});
    const absl::Status s = engine->Submit(ClientSpec("chain"), in, sink);
    if (!s.ok()) {
      std::lock_guard<std::mutex> lock(mu);
      if (first_refusal.ok()) first_refusal = s;
      ended = kChain;  // the chain stops here
      cv.notify_all();
    }
  };
  std::atomic<bool> stop{false};
  std::thread others([&] {
    while (!stop.load()) {
      auto sink = std::make_shared<RecordingSink>();
      std::string in = AsBytes(std::vector<float>(256, 1.0f));
      ASSERT_TRUE(engine->Submit(ClientSpec("other", {256}), in, sink).ok());
      ASSERT_TRUE(sink->WaitDone());
    }
  });
  std::thread stats([&] {
    while (!stop.load()) (void)engine->Stats(/*with_clients=*/true, /*lane_activity=*/false);
  });
  // Also on a failed assertion: the threads end, and every job with them, before the state
  // the chain's callbacks use goes away.
  absl::Cleanup stop_all = [&] {
    stop = true;
    if (others.joinable()) others.join();
    if (stats.joinable()) stats.join();
    engine->Shutdown();
  };
  submit(0);
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return ended >= kChain; }));
  }
  std::move(stop_all).Invoke();
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_TRUE(first_refusal.ok()) << first_refusal;
  ASSERT_EQ(sinks.size(), static_cast<size_t>(kChain));
  for (int i = 0; i < kChain; ++i) {
    ASSERT_TRUE(sinks[static_cast<size_t>(i)]->WaitDone());
    EXPECT_TRUE(sinks[static_cast<size_t>(i)]->status().ok()) << i;
    EXPECT_EQ(AsFloats(sinks[static_cast<size_t>(i)]->output()),
              std::vector<float>({static_cast<float>(i)}));
  }
}

TEST(EngineDeadline, AJobWhoseDeadlinePassedWhileQueuedEndsWithoutRunning) {
  auto engine = MakeEngine(1, 64);
  auto blocker = BlockLane(*engine);  // the queue holds only what follows
  JobSpec spec = Spec({1}, {{OpKind::kRelu}});
  spec.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(30);
  auto queued = std::make_shared<RecordingSink>();
  std::string in = AsBytes({1.0f});
  ASSERT_TRUE(engine->Submit(spec, in, queued).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  blocker->SetGateOpen(true);
  ASSERT_TRUE(queued->WaitDone());
  EXPECT_EQ(queued->status().code(), absl::StatusCode::kDeadlineExceeded) << queued->status();
  EXPECT_EQ(queued->chunks(), 0);
  // Already past at submission: refused, never accepted.
  spec.deadline = std::chrono::steady_clock::now() - std::chrono::milliseconds(1);
  auto late = std::make_shared<RecordingSink>();
  std::string in2 = AsBytes({1.0f});
  EXPECT_EQ(engine->Submit(spec, in2, late).code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_FALSE(late->accepted());
}

// A CPU job of about 10^9 products: seconds of work unless stopped.
JobSpec CostlyJob() {
  OpSpec convolve{OpKind::kConvolve};
  convolve.taps.assign(1024, 0.5);
  return Spec({1 << 20}, {convolve});
}

TEST(EngineStop, ACostlyRunningJobStopsWithinMillisecondsOfItsDeadlineOrCancel) {
  auto engine = MakeEngine(1);
  JobSpec spec = CostlyJob();
  spec.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
  auto timed = std::make_shared<RecordingSink>();
  std::string in = AsBytes(std::vector<float>(1 << 20, 1.0f));
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(engine->Submit(spec, in, timed).ok());
  ASSERT_TRUE(timed->WaitDone());
  EXPECT_EQ(timed->status().code(), absl::StatusCode::kDeadlineExceeded) << timed->status();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(600));

  auto cancelled = std::make_shared<RecordingSink>();
  std::string in2 = AsBytes(std::vector<float>(1 << 20, 1.0f));
  ASSERT_TRUE(engine->Submit(CostlyJob(), in2, cancelled).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto cancel_at = std::chrono::steady_clock::now();
  cancelled->Cancel();
  ASSERT_TRUE(cancelled->WaitDone());
  EXPECT_EQ(cancelled->status().code(), absl::StatusCode::kCancelled);
  EXPECT_LT(std::chrono::steady_clock::now() - cancel_at, std::chrono::milliseconds(500));
}

TEST(EngineStop, StopRunningJobsStopsCostlyJobsAndAnUploadWaitingForBytes) {
  EngineOptions options;
  options.limits.upload_idle_timeout_ms = 0;  // only the stop may end the upload
  auto engine = MakeEngine(2, 1 << 20, options);
  auto costly = std::make_shared<RecordingSink>();
  std::string in = AsBytes(std::vector<float>(1 << 20, 1.0f));
  ASSERT_TRUE(engine->Submit(CostlyJob(), in, costly).ok());
  auto upload = std::make_shared<RecordingSink>();
  absl::StatusOr<std::shared_ptr<InputRing>> ring =
      engine->SubmitStreamed(Spec({1000}, {{OpKind::kRelu}}), upload);
  ASSERT_TRUE(ring.ok()) << ring.status();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto stop_at = std::chrono::steady_clock::now();
  engine->StopRunningJobs();
  ASSERT_TRUE(costly->WaitDone());
  ASSERT_TRUE(upload->WaitDone());
  EXPECT_LT(std::chrono::steady_clock::now() - stop_at, std::chrono::milliseconds(500));
  EXPECT_EQ(costly->status().code(), absl::StatusCode::kUnavailable) << costly->status();
  EXPECT_EQ(upload->status().code(), absl::StatusCode::kUnavailable) << upload->status();
  EXPECT_NE(costly->status().message().find("shutting down"), std::string::npos);
  EXPECT_TRUE(engine->Drain(std::chrono::seconds(1)));
}

// A backend whose lanes fail their first Enqueue as a device would (`fault`), and otherwise
// run the CPU backend's lanes: by throwing std::bad_alloc (a failed allocation), or by
// returning INTERNAL and reporting the device lost for good from then on (a sticky error).
class FaultyBackend final : public Backend {
 public:
  enum class Fault { kBadAlloc, kSticky };
  explicit FaultyBackend(Fault fault) : cpu_(CreateCpuBackend({})) { lane_.fault = fault; }
  std::string name() const override { return cpu_->name(); }
  std::optional<DeviceDescription> device() const override { return std::nullopt; }
  std::vector<PriorityLevel> levels() const override { return cpu_->levels(); }
  std::string LaneName(Priority p, int lane) const override { return cpu_->LaneName(p, lane); }
  std::vector<Staging> stagings() const override { return cpu_->stagings(); }
  std::vector<LaunchMode> launch_modes() const override { return cpu_->launch_modes(); }
  PlanDescription Describe(const JobSpec& spec, const Plan& plan) const override {
    return cpu_->Describe(spec, plan);
  }
  int64_t default_chunk_bytes() const override { return cpu_->default_chunk_bytes(); }
  int64_t chunk_capacity_bytes() const override { return cpu_->chunk_capacity_bytes(); }
  absl::Status DeviceStatus() const override {
    return lane_.lost ? absl::InternalError("the device failed for good") : absl::OkStatus();
  }
  LaneExecutor& lane(Priority p, int lane) override {
    lane_.inner = &cpu_->lane(p, lane);
    return lane_;
  }

 private:
  struct Lane final : LaneExecutor {
    LaneExecutor* inner = nullptr;
    Fault fault = Fault::kBadAlloc;
    bool failed = false;
    std::atomic<bool> lost{false};
    int window() const override { return inner->window(); }
    absl::Status Begin(const JobSpec& s, const Plan& p, const ChunkLayout& l, const JobInterrupt& i,
                       JobTiming* t) override {
      return inner->Begin(s, p, l, i, t);
    }
    absl::Status Stage(const Chunk& c, const InputChunk& in) override {
      return inner->Stage(c, in);
    }
    absl::Status Enqueue(const Chunk& c) override {
      if (!failed) {
        failed = true;
        if (fault == Fault::kBadAlloc) throw std::bad_alloc();
        lost = true;
        return absl::InternalError("launching a kernel: cudaErrorIllegalAddress");
      }
      return inner->Enqueue(c);
    }
    absl::Status Profile(const Chunk& c, JobTiming* t) override { return inner->Profile(c, t); }
    absl::StatusOr<bool> Ready(const Chunk& c) override { return inner->Ready(c); }
    absl::StatusOr<const char*> Finish(const Chunk& c, JobTiming* t) override {
      return inner->Finish(c, t);
    }
    void End(const absl::Status& s, JobTiming* t) override { inner->End(s, t); }
  };
  std::unique_ptr<Backend> cpu_;
  Lane lane_;
};

TEST(EngineErrors, AnAllocationThatFailsEndsTheJobAndTheLaneServesTheNext) {
  CpuBackendOptions cpu;
  cpu.lanes_per_level = 1;
  auto engine =
      Engine::Create(std::make_unique<FaultyBackend>(FaultyBackend::Fault::kBadAlloc), {});
  auto failed = std::make_shared<RecordingSink>();
  std::string in = AsBytes({1.0f, -1.0f});
  ASSERT_TRUE(engine->Submit(Spec({2}, {{OpKind::kRelu}}), in, failed).ok());
  ASSERT_TRUE(failed->WaitDone());
  EXPECT_EQ(failed->status().code(), absl::StatusCode::kResourceExhausted) << failed->status();
  EXPECT_EQ(failed->done_calls(), 1);
  auto next = std::make_shared<RecordingSink>();
  std::string in2 = AsBytes({1.0f, -1.0f});
  ASSERT_TRUE(engine->Submit(Spec({2}, {{OpKind::kRelu}}), in2, next).ok());
  ASSERT_TRUE(next->WaitDone());
  EXPECT_TRUE(next->status().ok()) << next->status();
  EXPECT_EQ(AsFloats(next->output()), (std::vector<float>{1.0f, 0.0f}));
}

TEST(EngineErrors, AStickyDeviceErrorIsReportedOnceAndNewJobsAreRefused) {
  std::vector<absl::Status> lost;
  EngineOptions options;
  options.on_device_lost = [&](const absl::Status& s) { lost.push_back(s); };
  auto engine =
      Engine::Create(std::make_unique<FaultyBackend>(FaultyBackend::Fault::kSticky), options);
  auto failed = std::make_shared<RecordingSink>();
  std::string in = AsBytes({1.0f});
  ASSERT_TRUE(engine->Submit(Spec({1}, {{OpKind::kRelu}}), in, failed).ok());
  ASSERT_TRUE(failed->WaitDone());
  EXPECT_EQ(failed->status().code(), absl::StatusCode::kInternal);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].message(), "the device failed for good");
  std::string in2 = AsBytes({1.0f});
  auto refused = std::make_shared<RecordingSink>();
  const absl::Status s = engine->Submit(Spec({1}, {{OpKind::kRelu}}), in2, refused);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("the device failed for good"), std::string::npos) << s;
  EXPECT_FALSE(refused->accepted());
  EXPECT_EQ(lost.size(), 1u);
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

// A dry run reads no input, so it may come without the bytes; bytes that are there must still
// match the shape, and a job that runs must have them all.
TEST(EngineExplain, ADryRunMayComeWithoutItsInput) {
  auto engine = MakeEngine();
  JobSpec spec = Spec({4, 8}, {{OpKind::kSoftmax}});
  spec.dry_run = true;
  auto sink = std::make_shared<RecordingSink>();
  std::string none;
  ASSERT_TRUE(engine->Submit(spec, none, sink).ok());
  ASSERT_TRUE(sink->WaitDone());
  EXPECT_TRUE(sink->status().ok());
  EXPECT_EQ(sink->plans(), 1);
  std::string some = AsBytes(std::vector<float>(5, 1.0f));
  const absl::Status short_input = engine->Submit(spec, some, std::make_shared<RecordingSink>());
  EXPECT_EQ(short_input.code(), absl::StatusCode::kInvalidArgument) << short_input;
  spec.dry_run = false;
  const absl::Status no_input = engine->Submit(spec, none, std::make_shared<RecordingSink>());
  EXPECT_EQ(no_input.code(), absl::StatusCode::kInvalidArgument) << no_input;
  EXPECT_NE(no_input.message().find("input.data: 0 bytes"), std::string::npos) << no_input;
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
