// The work model and the work limit: what a request that is cheap to send and costly to run
// looks like, and that ordinary jobs stay far inside the limit.
#include "server/engine/planning/step_work.h"

#include <gtest/gtest.h>

#include "server/engine/job/limits.h"

namespace gpupipe::engine {
namespace {

Plan PlanOf(std::vector<int64_t> shape, std::vector<OpSpec> ops, DType dtype = DType::kFloat32) {
  JobSpec spec;
  spec.shape = std::move(shape);
  spec.ops = std::move(ops);
  spec.dtype = dtype;
  absl::StatusOr<Plan> plan = PlanJob(spec);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *plan : Plan{};
}

OpSpec Convolve(int taps) {
  OpSpec op{OpKind::kConvolve};
  op.taps.assign(static_cast<size_t>(taps), 0.5);
  return op;
}

TEST(StepWork, CountsPassesPerElementAndProductsPerTap) {
  const Plan chain = PlanOf({1000}, {{OpKind::kAffine}, {OpKind::kRelu}, {OpKind::kExp}});
  EXPECT_EQ(PlanWork(chain), 3000);
  const Plan softmax = PlanOf({10, 100}, {{OpKind::kRelu}, {OpKind::kSoftmax}});
  EXPECT_EQ(PlanWork(softmax), 10 * 100 * 3);
  const Plan conv = PlanOf({2, 100}, {Convolve(8)});  // full: 107 outputs a row
  EXPECT_EQ(PlanWork(conv), 2 * 107 * 8);
  OpSpec histogram{OpKind::kHistogram};
  histogram.bins = 1000;
  histogram.lo = 0;
  histogram.hi = 1;
  EXPECT_EQ(PlanWork(PlanOf({3, 10}, {histogram})), 3 * (10 + 1000));
}

TEST(StepWork, ALongChainOfLongConvolutionsOverAFewBytesIsRefused) {
  std::vector<OpSpec> ops(64, Convolve(1024));
  const Plan plan = PlanOf({2048}, ops);  // 8 KiB in
  const absl::Status s = CheckWork(plan, Limits{}.max_work_per_byte);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find("--max-work-per-byte"), std::string::npos) << s;
  EXPECT_TRUE(CheckWork(plan, 0).ok());  // no limit
}

TEST(StepWork, OrdinaryJobsAreFarInsideTheDefaultLimit) {
  const int64_t limit = Limits{}.max_work_per_byte;
  // The longest convolution on the narrowest type, a 64-op chain, the widest histogram on one
  // element, topk's largest k: each well within the limit at any size.
  EXPECT_TRUE(CheckWork(PlanOf({1 << 20}, {Convolve(1024)}, DType::kFloat16), limit).ok());
  EXPECT_TRUE(CheckWork(PlanOf({1 << 20}, std::vector<OpSpec>(64, {OpKind::kExp})), limit).ok());
  OpSpec histogram{OpKind::kHistogram};
  histogram.bins = 65536;
  histogram.lo = 0;
  histogram.hi = 1;
  EXPECT_TRUE(CheckWork(PlanOf({1}, {histogram}), limit).ok());
  OpSpec topk{OpKind::kTopk};
  topk.k = 1024;
  EXPECT_TRUE(CheckWork(PlanOf({4, 1024}, {topk}), limit).ok());
  // A few long convolutions in a row are fine too.
  EXPECT_TRUE(CheckWork(PlanOf({2048}, std::vector<OpSpec>(4, Convolve(1024))), limit).ok());
}

TEST(StepWork, HugeShapesSaturateInsteadOfOverflowing) {
  JobSpec spec;
  spec.shape = {int64_t{1} << 40};
  spec.ops = {Convolve(1024)};
  absl::StatusOr<Plan> plan = PlanJob(spec);
  ASSERT_TRUE(plan.ok());
  EXPECT_GT(PlanWork(*plan), int64_t{1} << 50);
}

}  // namespace
}  // namespace gpupipe::engine
