// Dynamic batching on the CUDA backend (tests/testing/batching_cases.h): batched launches give
// the bytes of the same jobs run alone, for every op family and dtype, keep priorities apart,
// and end a cancelled job alone. Skips where no CUDA device is usable.
#include <gtest/gtest.h>

#include "server/engine/backends/cuda/cuda_backend.h"
#include "tests/testing/batching_cases.h"

namespace gpupipe::engine {
namespace {

std::unique_ptr<Backend> CudaLanes(int lanes) {
  CudaBackendOptions options;
  options.lanes_per_level = lanes;
  absl::StatusOr<std::unique_ptr<Backend>> backend = CreateCudaBackend(options);
  return backend.ok() ? *std::move(backend) : nullptr;
}

class CudaBatching : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaLanes(1) == nullptr) GTEST_SKIP() << "no usable CUDA device";
  }
  const testing::BackendMaker one_lane_ = [] { return CudaLanes(1); };
  const testing::BackendMaker two_lanes_ = [] { return CudaLanes(2); };
};

TEST_F(CudaBatching, BatchedResultsEqualJobsAloneForEveryOpFamilyAndDtype) {
  EXPECT_GE(testing::ExpectBatchesMatchJobsAlone(one_lane_), 40);
}

TEST_F(CudaBatching, ABatchNeverMixesPriorities) {
  testing::ExpectBatchesKeepTheirPriority(one_lane_);
}

TEST_F(CudaBatching, ACancelInsideABatchEndsOnlyThatJob) {
  testing::ExpectCancelInsideABatch(one_lane_);
}

TEST_F(CudaBatching, BatchesKeepTheirLimits) { testing::ExpectBatchLimits(one_lane_); }

TEST_F(CudaBatching, PipelinesThatMixRowsRunAloneWithTheirOwnResults) {
  testing::ExpectRowMixingPipelinesRunAlone(one_lane_);
}

TEST_F(CudaBatching, TheWindowHoldsAJobOnlyWhileOthersAreInFlight) {
  testing::ExpectTheWindowOnlyHoldsJobsWhenOthersAreInFlight(one_lane_, two_lanes_);
}

}  // namespace
}  // namespace gpupipe::engine
