// The CPU lane's sliced computation: results identical to the references called whole, and a
// costly step that stops within milliseconds of its interrupt.
#include "server/engine/backends/cpu/host_steps.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "kernels/cpu/convolve_reference.h"
#include "kernels/cpu/reference_ops.h"
#include "server/engine/planning/step_work.h"
#include "tests/testing/random_tensor.h"
#include "tests/testing/recording_sink.h"

namespace gpupipe::engine {
namespace {

using Clock = std::chrono::steady_clock;
using gpupipe::testing::RecordingSink;

Plan PlanOf(std::vector<int64_t> shape, std::vector<OpSpec> ops) {
  JobSpec spec;
  spec.shape = std::move(shape);
  spec.ops = std::move(ops);
  absl::StatusOr<Plan> plan = PlanJob(spec);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *plan;
}

OpSpec Convolve(std::vector<double> taps, ConvolveMode mode) {
  OpSpec op{OpKind::kConvolve};
  op.taps = std::move(taps);
  op.mode = mode;
  return op;
}

std::string RunOnHost(const Plan& plan, const std::vector<float>& x, const JobInterrupt& interrupt,
                      absl::Status* status) {
  HostBuffers buffers;
  const char* result = nullptr;
  std::vector<double> step_us(plan.steps.size());
  *status = RunPlanOnHost(plan, reinterpret_cast<const char*>(x.data()), interrupt, &buffers,
                          &result, &step_us);
  if (!status->ok()) return {};
  return std::string(result, static_cast<size_t>(plan.output_elements * 4));
}

TEST(HostSteps, ARowWorthManySlicesIsConvolvedExactlyAsWhole) {
  const uint64_t seed = gpupipe::testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  RecordingSink sink;
  const JobInterrupt never(sink, Clock::time_point::max());
  const int64_t rows = 2, cols = 5000;
  const std::vector<float> x = gpupipe::testing::RandomFloats(rows * cols, seed);
  std::vector<double> taps(700);
  for (size_t i = 0; i < taps.size(); ++i) taps[i] = std::sin(0.1 * static_cast<double>(i));
  for (ConvolveMode mode : {ConvolveMode::kFull, ConvolveMode::kSame, ConvolveMode::kValid}) {
    const Plan plan = PlanOf({rows, cols}, {Convolve(taps, mode)});
    ASSERT_GT(RowWork(plan.steps[0]), kHostSliceWork);  // several slices a row
    absl::Status s;
    const std::string got = RunOnHost(plan, x, never, &s);
    ASSERT_TRUE(s.ok()) << s;
    std::string want(got.size(), '\0');
    ASSERT_TRUE(kernels::cpu::RowConvolve(
        x.data(), kernels::ElementType::kFloat32, want.data(), rows, cols, taps.data(),
        static_cast<int32_t>(taps.size()), ToKernelConvolveMode(mode)));
    EXPECT_TRUE(got == want) << ConvolveModeName(mode);
  }
}

TEST(HostSteps, SlicedElementwiseAndRowStepsMatchTheReferenceWhole) {
  const uint64_t seed = gpupipe::testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  RecordingSink sink;
  const JobInterrupt never(sink, Clock::time_point::max());
  const int64_t rows = 3000, cols = 700;  // a few rows a slice, several slices
  const std::vector<float> x = gpupipe::testing::RandomFloats(rows * cols, seed);
  const Plan plan = PlanOf({rows, cols}, {{OpKind::kAffine, 2, 1}, {OpKind::kSoftmax}});
  absl::Status s;
  const std::string got = RunOnHost(plan, x, never, &s);
  ASSERT_TRUE(s.ok()) << s;
  // The same through one unsliced call of the reference.
  std::vector<float> want(x.size());
  kernels::EwProgram program = plan.steps[0].program;
  ASSERT_TRUE(
      kernels::cpu::RunWithPrologue(x.data(), kernels::ElementType::kFloat32, rows * cols, program,
                                    want.data(), kernels::ElementType::kFloat32, rows * cols,
                                    [&](const void* in, kernels::ElementType type, void* out) {
                                      return kernels::cpu::RowSoftmax(in, type, out, rows, cols);
                                    }));
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size()), 0);
}

TEST(HostSteps, ACostlyStepStopsWithinMillisecondsOfItsInterrupt) {
  RecordingSink sink;
  std::atomic<bool> stopping{false};
  const JobInterrupt interrupt(sink, Clock::time_point::max(), &stopping);
  // One row of 2^20 convolved with 1024 taps: about 10^9 products, seconds of work.
  const std::vector<float> x(1 << 20, 1.0f);
  const Plan plan =
      PlanOf({1 << 20}, {Convolve(std::vector<double>(1024, 0.5), ConvolveMode::kFull)});
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    stopping = true;
  });
  const auto start = Clock::now();
  absl::Status s;
  RunOnHost(plan, x, interrupt, &s);
  const auto took = Clock::now() - start;
  stopper.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_LT(took, std::chrono::milliseconds(500));
}

TEST(HostSteps, ADeadlineStopsALongElementwiseChain) {
  RecordingSink sink;
  const JobInterrupt interrupt(sink, Clock::now() + std::chrono::milliseconds(20));
  const std::vector<float> x(int64_t{1} << 22, 0.5f);
  const Plan plan = PlanOf({int64_t{1} << 22}, std::vector<OpSpec>(64, {OpKind::kTanh}));
  const auto start = Clock::now();
  absl::Status s;
  RunOnHost(plan, x, interrupt, &s);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(500));
}

}  // namespace
}  // namespace gpupipe::engine
