// Dynamic batching on the CPU backend: the batch key, the batch's sink, and the engine's
// batching contract (tests/testing/batching_cases.h; cuda_batching_test runs it on the GPU).
#include "server/engine/scheduling/batching.h"

#include <gtest/gtest.h>

#include <cmath>

#include "server/engine/backends/cpu/cpu_backend.h"
#include "server/engine/planning/plan.h"
#include "tests/testing/batching_cases.h"

namespace gpupipe::engine {
namespace {

using gpupipe::testing::RecordingSink;

std::unique_ptr<Backend> CpuLanes(int lanes) {
  CpuBackendOptions cpu;
  cpu.lanes_per_level = lanes;
  return CreateCpuBackend(cpu);
}

const testing::BackendMaker kOneLane = [] { return CpuLanes(1); };
const testing::BackendMaker kTwoLanes = [] { return CpuLanes(2); };

TEST(BatchingEngine, BatchedResultsEqualJobsAloneForEveryOpFamilyAndDtype) {
  const int checked = testing::ExpectBatchesMatchJobsAlone(kOneLane);
  // 14 families over 5 dtypes, less the combinations an op refuses (floating-only ops).
  EXPECT_GE(checked, 40);
}

TEST(BatchingEngine, ABatchNeverMixesPriorities) {
  testing::ExpectBatchesKeepTheirPriority(kOneLane);
}

TEST(BatchingEngine, ACancelInsideABatchEndsOnlyThatJob) {
  testing::ExpectCancelInsideABatch(kOneLane);
}

TEST(BatchingEngine, BatchesKeepTheirLimits) { testing::ExpectBatchLimits(kOneLane); }

TEST(BatchingEngine, PipelinesThatMixRowsRunAloneWithTheirOwnResults) {
  testing::ExpectRowMixingPipelinesRunAlone(kOneLane);
}

TEST(BatchingEngine, TheWindowHoldsAJobOnlyWhileOthersAreInFlight) {
  testing::ExpectTheWindowOnlyHoldsJobsWhenOthersAreInFlight(kOneLane, kTwoLanes);
}

class BatchKeyTest : public ::testing::Test {
 protected:
  std::string Key(const JobSpec& spec, int64_t bytes, bool inline_input = true,
                  bool output_to_region = false, ChunkLayout::Mode mode = ChunkLayout::Mode::kRows,
                  int64_t chunks = 1) {
    absl::StatusOr<Plan> plan = PlanJob(spec);
    EXPECT_TRUE(plan.ok()) << plan.status();
    ChunkLayout layout;
    layout.mode = mode;
    layout.chunk_count = chunks;
    return BatchKey(spec, *plan, layout, bytes, inline_input, output_to_region, policy_);
  }
  BatchPolicy policy_{/*window_us=*/100, /*max_jobs=*/64, /*max_bytes=*/4096};
};

TEST_F(BatchKeyTest, SameOpsDtypeAndRowLengthShareAKey) {
  const JobSpec a = testing::BatchJobSpec({2, 64}, {{OpKind::kSoftmax}});
  const JobSpec b = testing::BatchJobSpec({5, 64}, {{OpKind::kSoftmax}});
  EXPECT_FALSE(Key(a, 512).empty());
  EXPECT_EQ(Key(a, 512), Key(b, 1280));
}

TEST_F(BatchKeyTest, AnythingThatChangesTheResultOrTheLaunchChangesTheKey) {
  const JobSpec base = testing::BatchJobSpec({2, 64}, {{OpKind::kScale}});
  const std::string key = Key(base, 512);
  JobSpec other = base;
  other.ops[0].alpha = 2;
  EXPECT_NE(Key(other, 512), key) << "parameter";
  other = base;
  other.shape = {2, 65};
  EXPECT_NE(Key(other, 520), key) << "row length";
  other = base;
  other.dtype = DType::kFloat64;
  EXPECT_NE(Key(other, 1024), key) << "dtype";
  other = base;
  other.priority = Priority::kHigh;
  EXPECT_NE(Key(other, 512), key) << "priority";
  other = base;
  other.launch = LaunchMode::kGraph;
  EXPECT_NE(Key(other, 512), key) << "launch";
  other = base;
  other.staging = Staging::kBulk;
  EXPECT_NE(Key(other, 512), key) << "staging";
  other = base;
  other.ops[0].alpha = -0.0;
  JobSpec zero = base;
  zero.ops[0].alpha = 0.0;
  EXPECT_NE(Key(other, 512), Key(zero, 512)) << "the sign of a zero";
}

TEST_F(BatchKeyTest, TapsAreComparedExactlyAndCounted) {
  OpSpec convolve{OpKind::kConvolve};
  convolve.taps = {0.25, 0.5};
  const JobSpec base = testing::BatchJobSpec({2, 64}, {convolve});
  const std::string key = Key(base, 512);
  ASSERT_FALSE(key.empty());
  JobSpec same = base;
  EXPECT_EQ(Key(same, 512), key);
  JobSpec longer = base;
  longer.ops[0].taps.push_back(0.0);
  EXPECT_NE(Key(longer, 512), key) << "a tap more";
  JobSpec nudged = base;
  nudged.ops[0].taps[1] = std::nextafter(0.5, 1.0);
  EXPECT_NE(Key(nudged, 512), key) << "the last bit of a tap";
}

TEST_F(BatchKeyTest, ARowOpAfterAReductionRunsAlone) {
  // sum | sum on [2, 4] sums the row sums: stacked with other jobs' rows it would add theirs.
  EXPECT_EQ(Key(testing::BatchJobSpec({2, 4}, {{OpKind::kSum}, {OpKind::kSum}}), 32), "");
  EXPECT_EQ(Key(testing::BatchJobSpec({2, 4}, {{OpKind::kMax}, {OpKind::kSoftmax}}), 32), "");
  EXPECT_EQ(Key(testing::BatchJobSpec({2, 4}, {{OpKind::kArgmax}, {OpKind::kCumsum}}), 32), "");
  // Elementwise ops after a reduction, and row ops before one, still batch.
  EXPECT_NE(Key(testing::BatchJobSpec({2, 4}, {{OpKind::kSum}, {OpKind::kRelu}}), 32), "");
  EXPECT_NE(Key(testing::BatchJobSpec({2, 4}, {{OpKind::kCumsum}, {OpKind::kMax}}), 32), "");
}

TEST_F(BatchKeyTest, AResultOverOneMessageRunsAlone) {
  // A member's result fits one result message, so a reader that stops reading cannot hold up
  // the others of its batch.
  policy_.max_bytes = int64_t{4} << 20;
  policy_.max_member_output_bytes = 4096;
  EXPECT_NE(Key(testing::BatchJobSpec({4, 256}, {{OpKind::kRelu}}), 4096), "");
  EXPECT_EQ(Key(testing::BatchJobSpec({8, 256}, {{OpKind::kRelu}}), 8192), "");
}

TEST_F(BatchKeyTest, JobsThatMustRunAloneHaveNoKey) {
  const JobSpec base = testing::BatchJobSpec({2, 64}, {{OpKind::kRelu}});
  EXPECT_EQ(Key(base, 8192), "") << "over max_bytes";
  EXPECT_EQ(Key(base, 512, /*inline_input=*/false), "") << "streamed or region input";
  EXPECT_EQ(Key(base, 512, true, /*output_to_region=*/true), "") << "region output";
  EXPECT_EQ(Key(base, 512, true, false, ChunkLayout::Mode::kRows, 2), "") << "two chunks";
  EXPECT_EQ(Key(base, 512, true, false, ChunkLayout::Mode::kSplitRow), "") << "split rows";
  JobSpec profiled = base;
  profiled.profile = true;
  EXPECT_EQ(Key(profiled, 512), "");
  JobSpec timed = base;
  timed.timeline = true;
  EXPECT_EQ(Key(timed, 512), "");
  JobSpec explained = base;
  explained.explain = true;
  EXPECT_EQ(Key(explained, 512), "") << "its plan would not be the batch's";
  EXPECT_EQ(Key(testing::BatchJobSpec({}, {{OpKind::kRelu}}), 4), "") << "a scalar";
  policy_.window_us = 0;
  EXPECT_EQ(Key(base, 512), "") << "batching off";
}

TEST(BatchSink, HandsEachMemberItsOwnBytesAcrossChunks) {
  auto a = std::make_shared<RecordingSink>();
  auto b = std::make_shared<RecordingSink>();
  auto c = std::make_shared<RecordingSink>();
  for (auto& s : {a, b, c}) s->OnAccepted({});
  BatchSink sink({{a, 0, 3}, {b, 3, 4}, {c, 7, 2}});
  ASSERT_TRUE(sink.OnChunk(0, "abcde", 5).ok());
  ASSERT_TRUE(sink.OnChunk(5, "fghi", 4).ok());
  EXPECT_EQ(a->output(), "abc");
  EXPECT_EQ(b->output(), "defg");
  EXPECT_EQ(c->output(), "hi");
}

TEST(BatchSink, GoesOnForTheOthersAndStopsWhenEveryReaderIsGone) {
  auto a = std::make_shared<RecordingSink>();
  auto b = std::make_shared<RecordingSink>();
  for (auto& s : {a, b}) s->OnAccepted({});
  BatchSink sink({{a, 0, 2}, {b, 2, 2}});
  a->Cancel();
  EXPECT_TRUE(sink.ReaderStatus().ok());
  EXPECT_TRUE(sink.OnChunk(0, "wxyz", 4).ok());
  EXPECT_EQ(sink.member_status(0).code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(sink.member_status(1).ok());
  EXPECT_EQ(b->output(), "yz");
  b->Cancel();
  EXPECT_EQ(sink.ReaderStatus().code(), absl::StatusCode::kCancelled);
}

TEST(BatchCounters, CountsBatchesBySize) {
  BatchCounters counters;
  counters.Count(2);
  counters.Count(3);
  counters.Count(200);
  const BatchCounters::Snapshot s = counters.snapshot();
  EXPECT_EQ(s.batches, 3);
  EXPECT_EQ(s.batched_jobs, 205);
  EXPECT_EQ(s.largest, 200);
  ASSERT_EQ(s.size_counts.size(), BatchCounters::SizeBounds().size() + 1);
  EXPECT_EQ(s.size_counts[0], 1);      // <= 2
  EXPECT_EQ(s.size_counts[1], 1);      // <= 4
  EXPECT_EQ(s.size_counts.back(), 1);  // > 128
}

}  // namespace
}  // namespace gpupipe::engine
