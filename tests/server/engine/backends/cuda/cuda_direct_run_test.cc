// Direct runs on the CUDA backend (tests/testing/direct_run_cases.h): a small job runs on the
// submitting thread with the bytes the queued job gets, and no job is lost around one. The
// CPU backend is the reference for the results (batching_cases: batched and alone agree on
// both backends). Skips where no CUDA device is usable.
#include <gtest/gtest.h>

#include <cmath>

#include "server/engine/backends/cpu/cpu_backend.h"
#include "server/engine/backends/cuda/cuda_backend.h"
#include "tests/testing/direct_run_cases.h"

namespace gpupipe::engine {
namespace {

std::unique_ptr<Backend> CudaOneLane() {
  CudaBackendOptions options;
  options.lanes_per_level = 1;
  absl::StatusOr<std::unique_ptr<Backend>> backend = CreateCudaBackend(options);
  return backend.ok() ? *std::move(backend) : nullptr;
}

class CudaDirectRun : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaOneLane() == nullptr) GTEST_SKIP() << "no usable CUDA device";
  }
  const testing::BackendMaker one_lane_ = [] { return CudaOneLane(); };
};

TEST_F(CudaDirectRun, SmallJobsRunOnTheSubmittingThread) {
  testing::ExpectSmallJobsRunOnTheSubmittingThread(one_lane_);
}

TEST_F(CudaDirectRun, EverythingElseQueues) { testing::ExpectEverythingElseQueues(one_lane_); }

TEST_F(CudaDirectRun, NoJobIsLostAroundADirectRun) {
  testing::ExpectNoJobIsLostAroundADirectRun(one_lane_);
}

// A direct run on the GPU matches the CPU reference on fresh random data.
TEST_F(CudaDirectRun, MatchesTheCpuReference) {
  auto gpu = testing::MakeDirectRunEngine(one_lane_);
  auto cpu = Engine::Create(CreateCpuBackend(CpuBackendOptions{}), EngineOptions{});
  std::mt19937_64 rng(testing::FreshSeed());
  for (int i = 0; i < 8; ++i) {
    const JobSpec spec = testing::SmallJobSpec();
    const std::string bytes = testing::RandomInput(spec.dtype, 1024, rng);
    auto got = testing::SubmitFrom(*gpu, spec, bytes, SubmitThread::kMayRun);
    ASSERT_EQ(got->done_calls(), 1);
    auto want = testing::SubmitFrom(*cpu, spec, bytes, SubmitThread::kQueue);
    ASSERT_TRUE(want->WaitDone());
    ASSERT_TRUE(got->status().ok()) << got->status();
    const std::vector<float> g = testing::AsFloats(got->output());
    const std::vector<float> w = testing::AsFloats(want->output());
    ASSERT_EQ(g.size(), w.size());
    for (size_t k = 0; k < g.size(); ++k) {
      EXPECT_NEAR(g[k], w[k], 1e-6f + 1e-5f * std::abs(w[k])) << "element " << k;
    }
  }
}

}  // namespace
}  // namespace gpupipe::engine
