// Direct runs on the CPU backend: who qualifies (DirectRunEligible), and the engine's contract
// (tests/testing/direct_run_cases.h; cuda_direct_run_test runs it on the GPU).
#include "server/engine/scheduling/direct_run.h"

#include <gtest/gtest.h>

#include "server/engine/backends/cpu/cpu_backend.h"
#include "server/engine/planning/plan.h"
#include "tests/testing/direct_run_cases.h"

namespace gpupipe::engine {
namespace {

const testing::BackendMaker kOneLane = [] {
  CpuBackendOptions cpu;
  cpu.lanes_per_level = 1;
  return CreateCpuBackend(cpu);
};

TEST(DirectRunEngine, SmallJobsRunOnTheSubmittingThread) {
  testing::ExpectSmallJobsRunOnTheSubmittingThread(kOneLane);
}

TEST(DirectRunEngine, EverythingElseQueues) { testing::ExpectEverythingElseQueues(kOneLane); }

TEST(DirectRunEngine, NoJobIsLostAroundADirectRun) {
  testing::ExpectNoJobIsLostAroundADirectRun(kOneLane);
}

class DirectRunEligibleTest : public ::testing::Test {
 protected:
  bool Eligible(const JobSpec& spec, int64_t chunks = 1, bool inline_input = true,
                bool output_to_region = false) {
    absl::StatusOr<Plan> plan = PlanJob(spec);
    EXPECT_TRUE(plan.ok()) << plan.status();
    ChunkLayout layout;
    layout.chunk_count = chunks;
    int64_t bytes = DTypeSize(spec.dtype);
    for (int64_t d : spec.shape) bytes *= d;
    return DirectRunEligible(policy_, *plan, layout, bytes, inline_input, output_to_region);
  }
  DirectRunPolicy policy_;
};

TEST_F(DirectRunEligibleTest, SmallInlineJobsOfOneChunkAndLittleWork) {
  EXPECT_TRUE(Eligible(testing::SmallJobSpec()));
  // 32 KiB in and 32 KiB out: at the limit.
  EXPECT_TRUE(Eligible(testing::BatchJobSpec({8, 1024}, {{OpKind::kRelu}})));
  // A reduction's output is small: 60 KiB in, 4 bytes out per row.
  EXPECT_TRUE(Eligible(testing::BatchJobSpec({15, 1024}, {{OpKind::kSum}})));
}

TEST_F(DirectRunEligibleTest, LargeCostlyChunkedOrNotInlineJobsAreNot) {
  EXPECT_FALSE(Eligible(testing::BatchJobSpec({9, 1024}, {{OpKind::kRelu}})));  // 72 KiB
  OpSpec conv{OpKind::kConvolve};
  conv.taps.assign(128, 0.5);
  EXPECT_FALSE(Eligible(testing::BatchJobSpec({1, 1024}, {conv})));  // 131072 operations
  EXPECT_FALSE(Eligible(testing::SmallJobSpec(), /*chunks=*/2));
  EXPECT_FALSE(Eligible(testing::SmallJobSpec(), 1, /*inline_input=*/false));
  EXPECT_FALSE(Eligible(testing::SmallJobSpec(), 1, true, /*output_to_region=*/true));
  policy_.max_bytes = 0;
  EXPECT_FALSE(Eligible(testing::SmallJobSpec()));
  policy_.max_bytes = 8192;
  EXPECT_TRUE(Eligible(testing::SmallJobSpec()));
  policy_.max_work = 1000;
  EXPECT_FALSE(Eligible(testing::SmallJobSpec()));
  // A result of more than one message.
  policy_ = DirectRunPolicy{};
  policy_.max_output_message_bytes = 4095;
  EXPECT_FALSE(Eligible(testing::SmallJobSpec()));
  policy_.max_output_message_bytes = 4096;
  EXPECT_TRUE(Eligible(testing::SmallJobSpec()));
}

}  // namespace
}  // namespace gpupipe::engine
