// The chunk pipeline's policy with a scripted lane (window, emission order, input release,
// priority hold, cancellation) and its layout choice on the CPU backend.
#include "server/engine/pipeline/chunk_pipeline.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <cstring>
#include <thread>
#include <string>
#include <vector>

#include "server/engine/backends/cpu/cpu_backend.h"
#include "server/engine/pipeline/input_ring.h"
#include "server/engine/planning/plan.h"
#include "server/engine/job/validate.h"
#include "tests/testing/recording_sink.h"

namespace gpupipe::engine {
namespace {

using gpupipe::testing::RecordingSink;

JobSpec Spec(std::vector<int64_t> shape, std::vector<OpSpec> ops, int64_t chunk_bytes,
             Priority priority = Priority::kNormal) {
  JobSpec spec;
  spec.shape = std::move(shape);
  spec.ops = std::move(ops);
  spec.chunk_bytes = chunk_bytes;
  spec.priority = priority;
  return spec;
}

// A lane that copies each chunk's input as its result (the plan is `relu` on non-negative
// data, so that is the right answer) and records what the pipeline asked of it.
class ScriptedLane final : public LaneExecutor {
 public:
  explicit ScriptedLane(int window, InputSource* input) : window_(window), input_(input) {}

  int window() const override { return window_; }
  absl::Status Begin(const JobSpec&, const Plan&, const ChunkLayout& layout, const JobInterrupt&,
                     JobTiming*) override {
    layout_ = &layout;
    return absl::OkStatus();
  }
  absl::Status Stage(const Chunk& chunk, const InputChunk& input) override {
    verbs_.push_back("S" + std::to_string(chunk.index));
    staged_.push_back(chunk.index);
    inputs_.push_back(std::string(input.data, static_cast<size_t>(input.range.size())));
    return absl::OkStatus();
  }
  absl::Status Enqueue(const Chunk& chunk) override {
    verbs_.push_back("E" + std::to_string(chunk.index));
    ++enqueued_;
    max_in_flight_ = std::max(max_in_flight_, enqueued_ - finished_);
    enqueue_times_.push_back(std::chrono::steady_clock::now());
    if (fail_at_ == chunk.index) return absl::InternalError("scripted failure");
    return absl::OkStatus();
  }
  absl::Status Profile(const Chunk&, JobTiming*) override { return absl::OkStatus(); }
  absl::StatusOr<bool> Ready(const Chunk&) override { return ready_; }
  absl::StatusOr<const char*> Finish(const Chunk& chunk, JobTiming*) override {
    EXPECT_EQ(chunk.index, finished_) << "finished out of order";
    ++finished_;
    result_ = inputs_[static_cast<size_t>(chunk.index)];
    return result_.data();
  }
  void End(const absl::Status& status, JobTiming*) override { end_status_ = status; }

  const int window_;
  InputSource* input_;
  const ChunkLayout* layout_ = nullptr;
  bool ready_ = false;
  int64_t fail_at_ = -1;
  std::vector<int64_t> staged_;
  std::vector<std::string> verbs_;  // "S<k>" and "E<k>" in the order they came
  std::vector<std::string> inputs_;
  std::vector<std::chrono::steady_clock::time_point> enqueue_times_;
  int64_t enqueued_ = 0;
  int64_t finished_ = 0;
  int64_t max_in_flight_ = 0;
  std::string result_;
  absl::Status end_status_ = absl::UnknownError("End was not called");
};

// An interrupt that fires only when the sink's reader leaves.
JobInterrupt ReaderOnly(const JobSink& sink) {
  return JobInterrupt(sink, std::chrono::steady_clock::time_point::max());
}

std::string Bytes(int64_t n) {
  std::string s(static_cast<size_t>(n), '\0');
  for (int64_t i = 0; i < n / 4; ++i) {
    const float v = static_cast<float>(i);
    std::memcpy(&s[static_cast<size_t>(4 * i)], &v, 4);
  }
  return s;
}

struct Job {
  explicit Job(JobSpec s) : spec(std::move(s)) {
    plan = *PlanJob(spec);
    layout = *MakeChunkLayout(spec, plan, spec.chunk_bytes, int64_t{1} << 30);
  }
  JobSpec spec;
  Plan plan;
  ChunkLayout layout;
  JobTiming timing;
};

// A ring of `buffers` buffers of `buffer_bytes` over `memory` for `job`'s chunks.
std::shared_ptr<InputRing> RingFor(const Job& job, std::vector<char>* memory, int64_t buffers,
                                   int64_t buffer_bytes) {
  memory->assign(static_cast<size_t>(buffers * buffer_bytes), '\0');
  return std::make_shared<InputRing>(
      ElementCount(job.spec.shape) * 4, job.layout.chunk_count,
      [&job](int64_t k) { return ChunkInputRange(job.plan, job.layout, k); }, memory->data(),
      buffers, buffer_bytes, /*pinned=*/false, nullptr);
}

TEST(ChunkPipeline, KeepsTheLaneWindowFullAndEmitsInOrder) {
  Job job(Spec({64}, {{OpKind::kRelu}}, 16));  // 16 chunks of 4 floats
  ASSERT_EQ(job.layout.chunk_count, 16);
  const std::string bytes = Bytes(64 * 4);
  std::shared_ptr<InputSource> input = InputSource::Complete(bytes);
  ScriptedLane lane(3, input.get());
  RecordingSink sink;
  sink.OnAccepted({});  // as the engine does before a job runs
  PriorityGate gate(kPriorityLevels);
  const absl::Status s = RunChunkPipeline(
      {job.spec, job.plan, job.layout, *input, sink, ReaderOnly(sink), &job.timing, 1 << 20}, lane,
      gate, {});
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(lane.max_in_flight_, 3);  // never more than the window, and filled
  EXPECT_EQ(lane.finished_, 16);
  EXPECT_EQ(sink.output(), bytes);
  EXPECT_TRUE(lane.end_status_.ok());
  EXPECT_EQ(job.timing.chunks, 16);
}

TEST(ChunkPipeline, StagesOneChunkAheadOfTheChunkItEnqueues) {
  Job job(Spec({16}, {{OpKind::kRelu}}, 16));  // 4 chunks
  std::shared_ptr<InputSource> input = InputSource::Complete(Bytes(64));
  ScriptedLane lane(3, input.get());
  lane.ready_ = true;
  RecordingSink sink;
  sink.OnAccepted({});
  PriorityGate gate(kPriorityLevels);
  ASSERT_TRUE(RunChunkPipeline({job.spec, job.plan, job.layout, *input, sink, ReaderOnly(sink),
                                &job.timing, 1 << 20},
                               lane, gate, {})
                  .ok());
  // Chunk k+1's host work starts before chunk k is enqueued, never two ahead.
  EXPECT_EQ(lane.verbs_,
            (std::vector<std::string>{"S0", "S1", "E0", "S2", "E1", "S3", "E2", "E3"}));
  EXPECT_EQ(sink.output(), Bytes(64));
}

TEST(ChunkPipeline, AStagedChunkIsEnqueuedBeforeWaitingForAnUploadThatIsBehind) {
  Job job(Spec({16}, {{OpKind::kRelu}}, 16));  // 4 chunks of 16 bytes
  const std::string bytes = Bytes(64);
  std::vector<char> memory;
  auto ring = RingFor(job, &memory, /*buffers=*/4, /*buffer_bytes=*/16);
  ASSERT_TRUE(WriteAll(*ring, bytes.data(), 16).ok());  // chunk 0 only, for now
  ScriptedLane lane(3, ring.get());
  lane.ready_ = true;
  RecordingSink sink;
  sink.OnAccepted({});
  PriorityGate gate(kPriorityLevels);
  std::thread upload([&] {
    // The rest arrives only once chunk 0 came back: the pipeline must not hold chunk 0 staged
    // while it waits for chunk 1's bytes.
    sink.WaitForOutput(16);
    ASSERT_TRUE(WriteAll(*ring, bytes.data() + 16, 48).ok());
  });
  const absl::Status s = RunChunkPipeline(
      {job.spec, job.plan, job.layout, *ring, sink, ReaderOnly(sink), &job.timing, 1 << 20}, lane,
      gate, {});
  upload.join();
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(sink.output(), bytes);
  ASSERT_GE(lane.verbs_.size(), 2u);
  EXPECT_EQ(lane.verbs_[0], "S0");
  EXPECT_EQ(lane.verbs_[1], "E0");
}

TEST(ChunkPipeline, AnInputRingBoundsTheWindowAndGetsEveryChunkBack) {
  Job job(Spec({64}, {{OpKind::kRelu}}, 16));
  const std::string bytes = Bytes(64 * 4);
  std::vector<char> memory;
  auto ring = RingFor(job, &memory, /*buffers=*/2, /*buffer_bytes=*/16);
  // The producer writes what fits whenever the pipeline frees a buffer.
  size_t sent = 0;
  std::function<void()> produce = [&] {
    absl::StatusOr<int64_t> taken =
        ring->Write(bytes.data() + sent, static_cast<int64_t>(bytes.size() - sent), produce);
    ASSERT_TRUE(taken.ok());
    sent += static_cast<size_t>(*taken);
  };
  produce();
  EXPECT_EQ(sent, 32u);  // two buffers
  ScriptedLane lane(3, ring.get());
  RecordingSink sink;
  sink.OnAccepted({});  // as the engine does before a job runs
  PriorityGate gate(kPriorityLevels);
  const absl::Status s = RunChunkPipeline(
      {job.spec, job.plan, job.layout, *ring, sink, ReaderOnly(sink), &job.timing, 1 << 20}, lane,
      gate, {});
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(lane.max_in_flight_, 1);  // one chunk runs while the other buffer fills
  EXPECT_EQ(sent, bytes.size());
  EXPECT_EQ(sink.output(), bytes);
}

TEST(ChunkPipeline, EveryLayoutModeEmitsTheWholeResultInOrderOnTheCpuLane) {
  std::unique_ptr<Backend> cpu = CreateCpuBackend({});
  const std::vector<JobSpec> specs = {
      Spec({8, 16}, {{OpKind::kRelu}, {OpKind::kSoftmax}}, 64),                // kRows
      Spec({2, 300}, {{OpKind::kAbs}, {OpKind::kSum}}, 256),                   // kSplitRow
      Spec({2, 300}, {{OpKind::kCumsum}}, 256),                                // kSplitRowResize
  };
  const ChunkLayout::Mode modes[] = {ChunkLayout::Mode::kRows, ChunkLayout::Mode::kSplitRow,
                                     ChunkLayout::Mode::kSplitRowResize};
  for (size_t i = 0; i < specs.size(); ++i) {
    Job chunked(specs[i]);
    ASSERT_EQ(chunked.layout.mode, modes[i]) << i;
    ASSERT_GT(chunked.layout.chunk_count, 2) << i;
    JobSpec one = specs[i];
    one.chunk_bytes = 1 << 20;
    Job whole(one);
    ASSERT_EQ(whole.layout.chunk_count, 1) << i;
    const std::string bytes = Bytes(ElementCount(specs[i].shape) * 4);
    std::shared_ptr<InputSource> input = InputSource::Complete(bytes);
    PriorityGate gate(kPriorityLevels);
    RecordingSink a, b;
    a.OnAccepted({});
    b.OnAccepted({});
    ASSERT_TRUE(RunChunkPipeline({chunked.spec, chunked.plan, chunked.layout, *input, a,
                                  ReaderOnly(a), &chunked.timing, 1 << 20},
                                 cpu->lane(Priority::kNormal, 0), gate, {})
                    .ok());
    ASSERT_TRUE(RunChunkPipeline({whole.spec, whole.plan, whole.layout, *input, b, ReaderOnly(b),
                                  &whole.timing, 1 << 20},
                                 cpu->lane(Priority::kNormal, 0), gate, {})
                    .ok());
    EXPECT_EQ(a.output().size(), b.output().size()) << i;
    // Sums of a split row round differently; the rows and the scan are exact here.
    if (modes[i] != ChunkLayout::Mode::kSplitRow) EXPECT_EQ(a.output(), b.output()) << i;
  }
}

TEST(ChunkPipeline, AJobHoldsItsNextChunkWhileAHigherPriorityOneRuns) {
  Job job(Spec({16}, {{OpKind::kRelu}}, 16, Priority::kLow));  // 4 chunks
  std::shared_ptr<InputSource> input = InputSource::Complete(Bytes(64));
  ScriptedLane lane(1, input.get());
  lane.ready_ = true;
  RecordingSink sink;
  sink.OnAccepted({});  // as the engine does before a job runs
  PriorityGate gate(kPriorityLevels);
  ChunkPolicy policy;
  policy.priority_hold_us = 30000;
  const auto high = gate.Enter(static_cast<int>(Priority::kHigh));
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(RunChunkPipeline({job.spec, job.plan, job.layout, *input, sink, ReaderOnly(sink),
                                &job.timing, 1 << 20},
                               lane, gate, policy)
                  .ok());
  // Each of the 4 chunks waited out the hold: slowed, never starved.
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(4 * 30));
  EXPECT_EQ(sink.output().size(), 64u);
}

TEST(ChunkPipeline, ACancelledJobStopsBetweenChunks) {
  Job job(Spec({64}, {{OpKind::kRelu}}, 16));
  std::shared_ptr<InputSource> input = InputSource::Complete(Bytes(256));
  ScriptedLane lane(1, input.get());
  RecordingSink sink;
  sink.OnAccepted({});  // as the engine does before a job runs
  sink.Cancel();
  PriorityGate gate(kPriorityLevels);
  const absl::Status s = RunChunkPipeline(
      {job.spec, job.plan, job.layout, *input, sink, ReaderOnly(sink), &job.timing, 1 << 20}, lane,
      gate, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  EXPECT_EQ(lane.enqueued_, 0);
  EXPECT_EQ(lane.end_status_.code(), absl::StatusCode::kCancelled);
}

TEST(ChunkPipeline, ALaneErrorEndsTheJobAndTheLaneIsTold) {
  Job job(Spec({64}, {{OpKind::kRelu}}, 16));
  std::shared_ptr<InputSource> input = InputSource::Complete(Bytes(256));
  ScriptedLane lane(3, input.get());
  lane.fail_at_ = 2;
  RecordingSink sink;
  sink.OnAccepted({});  // as the engine does before a job runs
  PriorityGate gate(kPriorityLevels);
  const absl::Status s = RunChunkPipeline(
      {job.spec, job.plan, job.layout, *input, sink, ReaderOnly(sink), &job.timing, 1 << 20}, lane,
      gate, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(lane.end_status_.code(), absl::StatusCode::kInternal);
}

TEST(ChooseLayout, LowPriorityJobsRunInCappedChunksUnlessThatSplitsTheirRows) {
  CpuBackendOptions options;
  options.chunk_bytes = 1 << 20;
  std::unique_ptr<Backend> cpu = CreateCpuBackend(options);
  ChunkPolicy policy;
  policy.low_priority_chunk_bytes = 4096;
  const auto chunks = [&](JobSpec spec) {
    absl::StatusOr<Plan> plan = PlanJob(spec);
    absl::StatusOr<ChunkLayout> layout = ChooseLayout(spec, *plan, *cpu, policy);
    EXPECT_TRUE(layout.ok()) << layout.status();
    return layout.ok() ? layout->chunk_count : -1;
  };
  EXPECT_EQ(chunks(Spec({1 << 16}, {{OpKind::kRelu}}, 0, Priority::kNormal)), 1);
  EXPECT_EQ(chunks(Spec({1 << 16}, {{OpKind::kRelu}}, 0, Priority::kLow)), 64);
  // Rows of 8 KiB stay whole: capping would split them and change the rounding of the sums.
  EXPECT_EQ(chunks(Spec({4, 2048}, {{OpKind::kSum}}, 0, Priority::kLow)), 1);
  // A job's own request wins over the default, and over the cap when smaller ...
  policy.min_chunk_bytes = 0;
  EXPECT_EQ(chunks(Spec({1 << 16}, {{OpKind::kRelu}}, 1024, Priority::kLow)), 256);
  // ... but not below the floor.
  policy.min_chunk_bytes = 2048;
  EXPECT_EQ(chunks(Spec({1 << 16}, {{OpKind::kRelu}}, 1024, Priority::kLow)), 128);
}

TEST(ChooseLayout, AChunkRequestBelowTheFloorIsRaisedToIt) {
  std::unique_ptr<Backend> cpu = CreateCpuBackend({});
  const ChunkPolicy policy;  // the daemon's floor
  ASSERT_EQ(policy.min_chunk_bytes, 64 << 10);
  // histogram(bins=65536) over 4 MiB asking for 1-byte chunks: without the floor, a million
  // pieces each paying for the bins.
  OpSpec histogram{OpKind::kHistogram};
  histogram.bins = 65536;
  histogram.lo = 0;
  histogram.hi = 1;
  const JobSpec spec = Spec({1 << 20}, {histogram}, 1);
  absl::StatusOr<Plan> plan = PlanJob(spec);
  ASSERT_TRUE(plan.ok()) << plan.status();
  absl::StatusOr<ChunkLayout> layout = ChooseLayout(spec, *plan, *cpu, policy);
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->chunk_count, (4 << 20) / (64 << 10));
  // Rows of a row op fill chunks of the floor's size, whole.
  const JobSpec rows = Spec({1024, 256}, {{OpKind::kSoftmax}}, 1);
  absl::StatusOr<Plan> rows_plan = PlanJob(rows);
  absl::StatusOr<ChunkLayout> rows_layout = ChooseLayout(rows, *rows_plan, *cpu, policy);
  ASSERT_TRUE(rows_layout.ok());
  EXPECT_EQ(rows_layout->chunk_count, (1024 * 256 * 4) / (64 << 10));
}

TEST(ChunkPipeline, AJobPastItsDeadlineStopsBeforeItsNextChunk) {
  Job job(Spec({64}, {{OpKind::kRelu}}, 16));
  std::shared_ptr<InputSource> input = InputSource::Complete(Bytes(256));
  ScriptedLane lane(1, input.get());
  RecordingSink sink;
  sink.OnAccepted({});
  PriorityGate gate(kPriorityLevels);
  const JobInterrupt past(sink, std::chrono::steady_clock::now());
  const absl::Status s = RunChunkPipeline(
      {job.spec, job.plan, job.layout, *input, sink, past, &job.timing, 1 << 20}, lane, gate, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_EQ(lane.enqueued_, 0);
}

TEST(ChunkPipeline, AStoppingEngineStopsAHeldJobWithUnavailable) {
  Job job(Spec({16}, {{OpKind::kRelu}}, 16, Priority::kLow));  // 4 chunks
  std::shared_ptr<InputSource> input = InputSource::Complete(Bytes(64));
  ScriptedLane lane(1, input.get());
  lane.ready_ = true;
  RecordingSink sink;
  sink.OnAccepted({});
  PriorityGate gate(kPriorityLevels);
  ChunkPolicy policy;
  policy.priority_hold_us = 10'000'000;  // a hold that would outlast the test
  std::atomic<bool> stopping{false};
  const JobInterrupt interrupt(sink, std::chrono::steady_clock::time_point::max(), &stopping);
  const auto high = gate.Enter(static_cast<int>(Priority::kHigh));
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    stopping = true;
  });
  const auto start = std::chrono::steady_clock::now();
  const absl::Status s = RunChunkPipeline(
      {job.spec, job.plan, job.layout, *input, sink, interrupt, &job.timing, 1 << 20}, lane, gate,
      policy);
  stopper.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

}  // namespace
}  // namespace gpupipe::engine
