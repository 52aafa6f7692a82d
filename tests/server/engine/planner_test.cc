#include <gtest/gtest.h>

#include "server/engine/plan.h"

namespace gpupipe::engine {
namespace {

JobSpec Spec(std::vector<int64_t> shape, std::vector<OpSpec> ops) {
  JobSpec spec;
  spec.shape = std::move(shape);
  spec.ops = std::move(ops);
  return spec;
}

TEST(Planner, FusesAnElementwiseRunIntoOneStep) {
  absl::StatusOr<Plan> plan =
      PlanJob(Spec({4, 8}, {{OpKind::kAffine, 2, 1}, {OpKind::kRelu}, {OpKind::kAffine, 3, 0}}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->steps.size(), 1u);
  EXPECT_EQ(plan->steps[0].kind, StepKind::kElementwise);
  EXPECT_EQ(plan->steps[0].program.count, 3);
  EXPECT_EQ(plan->steps[0].input_elements(), 32);
  EXPECT_EQ(plan->steps[0].ops, "affine+relu+affine");
  EXPECT_EQ(plan->output_shape, (std::vector<int64_t>{4, 8}));
}

TEST(Planner, FusesAPrecedingRunIntoARowOpAsItsPrologue) {
  absl::StatusOr<Plan> plan =
      PlanJob(Spec({4, 8}, {{OpKind::kAffine, 2, 1}, {OpKind::kRelu}, {OpKind::kSoftmax}}));
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->steps.size(), 1u);
  EXPECT_EQ(plan->steps[0].kind, StepKind::kRowSoftmax);
  EXPECT_EQ(plan->steps[0].program.count, 2);
  EXPECT_EQ(plan->steps[0].rows, 4);
  EXPECT_EQ(plan->steps[0].cols, 8);
  EXPECT_EQ(plan->steps[0].ops, "affine+relu+softmax");
}

TEST(Planner, ReductionRemovesTheLastAxis) {
  absl::StatusOr<Plan> plan =
      PlanJob(Spec({2, 3, 5}, {{OpKind::kSum}, {OpKind::kRelu}, {OpKind::kSum}}));
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->steps.size(), 2u);
  EXPECT_EQ(plan->steps[0].kind, StepKind::kRowSum);
  EXPECT_EQ(plan->steps[0].rows, 6);
  EXPECT_EQ(plan->steps[0].cols, 5);
  EXPECT_EQ(plan->steps[1].kind, StepKind::kRowSum);
  EXPECT_EQ(plan->steps[1].program.count, 1);  // relu as the prologue
  EXPECT_EQ(plan->steps[1].rows, 2);
  EXPECT_EQ(plan->steps[1].cols, 3);
  EXPECT_EQ(plan->output_shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(plan->output_elements, 2);
  EXPECT_EQ(plan->max_elements, 30);
}

TEST(Planner, OneDimensionalSumGivesAScalar) {
  absl::StatusOr<Plan> plan = PlanJob(Spec({7}, {{OpKind::kSum}}));
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->output_shape.empty());
  EXPECT_EQ(plan->output_elements, 1);
  EXPECT_EQ(plan->steps[0].rows, 1);
}

TEST(Planner, SplitsRunsLongerThanOneProgram) {
  std::vector<OpSpec> ops(kernels::kMaxEwInstrs + 3, OpSpec{OpKind::kRelu});
  absl::StatusOr<Plan> plan = PlanJob(Spec({10}, ops));
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->steps.size(), 2u);
  EXPECT_EQ(plan->steps[0].program.count, kernels::kMaxEwInstrs);
  EXPECT_EQ(plan->steps[1].program.count, 3);
}

TEST(Planner, TrailingElementwiseRunAfterARowOp) {
  absl::StatusOr<Plan> plan =
      PlanJob(Spec({3, 4}, {{OpKind::kSoftmax}, {OpKind::kAffine, 10, 0}}));
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->steps.size(), 2u);
  EXPECT_EQ(plan->steps[0].program.count, 0);
  EXPECT_EQ(plan->steps[1].kind, StepKind::kElementwise);
  EXPECT_EQ(plan->steps[1].input_elements(), 12);
}

TEST(Planner, AffineParamsBecomeFloat32Instructions) {
  absl::StatusOr<Plan> plan = PlanJob(Spec({1}, {{OpKind::kAffine, 0.1, -2.5}}));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->steps[0].program.instrs[0].a, 0.1f);
  EXPECT_EQ(plan->steps[0].program.instrs[0].b, -2.5f);
}

}  // namespace
}  // namespace gpupipe::engine
