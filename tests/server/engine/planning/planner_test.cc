#include <gtest/gtest.h>

#include "server/engine/planning/plan.h"

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
  EXPECT_EQ(plan->steps[0].kind, StepKind::kRowReduce);
  EXPECT_EQ(plan->steps[0].rows, 6);
  EXPECT_EQ(plan->steps[0].cols, 5);
  EXPECT_EQ(plan->steps[1].kind, StepKind::kRowReduce);
  EXPECT_EQ(plan->steps[1].program.count, 1);  // relu as the prologue
  EXPECT_EQ(plan->steps[1].rows, 2);
  EXPECT_EQ(plan->steps[1].cols, 3);
  EXPECT_EQ(plan->output_shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(plan->output_elements, 2);
  EXPECT_EQ(plan->max_bytes, 30 * 4);
}

TEST(Planner, OneDimensionalSumGivesAScalar) {
  absl::StatusOr<Plan> plan = PlanJob(Spec({7}, {{OpKind::kSum}}));
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->output_shape.empty());
  EXPECT_EQ(plan->output_elements, 1);
  EXPECT_EQ(plan->steps[0].rows, 1);
}

TEST(Planner, ArgmaxEndsInInt64Indices) {
  absl::StatusOr<Plan> plan = PlanJob(Spec({1000, 1}, {{OpKind::kAbs}, {OpKind::kArgmax}}));
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->steps.size(), 1u);
  EXPECT_EQ(plan->steps[0].kind, StepKind::kRowArgmax);
  EXPECT_EQ(plan->output_dtype, DType::kInt64);
  EXPECT_EQ(plan->output_shape, (std::vector<int64_t>{1000}));
  EXPECT_EQ(plan->max_bytes, 8000) << "1000 indices of 8 bytes outgrow the 4000-byte input";
}

TEST(Planner, ReductionKindsAndNormalizations) {
  absl::StatusOr<Plan> plan = PlanJob(Spec({4, 5}, {{OpKind::kStandardize}, {OpKind::kNorm2}}));
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->steps.size(), 2u);
  EXPECT_EQ(plan->steps[0].kind, StepKind::kRowNormalize);
  EXPECT_EQ(plan->steps[0].normalize, kernels::RowNormalizeKind::kStandardize);
  EXPECT_EQ(plan->steps[1].kind, StepKind::kRowReduce);
  EXPECT_EQ(plan->steps[1].reduce, kernels::RowReduceKind::kNorm2);
}

TEST(Planner, ScaleAndAddAreAffineInstructions) {
  OpSpec scale{OpKind::kScale};
  scale.alpha = 3;
  OpSpec add{OpKind::kAdd};
  add.value = 2;
  absl::StatusOr<Plan> plan = PlanJob(Spec({2}, {scale, add}));
  ASSERT_TRUE(plan.ok());
  const kernels::EwProgram& p = plan->steps[0].program;
  ASSERT_EQ(p.count, 2);
  EXPECT_EQ(p.instrs[0].op, kernels::EwOpcode::kAffine);
  EXPECT_EQ(p.instrs[0].a, 3.0f);
  EXPECT_EQ(p.instrs[0].b, 0.0f);
  EXPECT_EQ(p.instrs[1].op, kernels::EwOpcode::kAffine);
  EXPECT_EQ(p.instrs[1].a, 1.0f);
  EXPECT_EQ(p.instrs[1].b, 2.0f);
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

TEST(Planner, AffineParamsStayDoubles) {
  // Each compute type converts them: float32 rounds 0.1 to 0.1f, float64 keeps it.
  absl::StatusOr<Plan> plan = PlanJob(Spec({1}, {{OpKind::kAffine, 0.1, -2.5}}));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->steps[0].program.instrs[0].a, 0.1);
  EXPECT_EQ(plan->steps[0].program.instrs[0].b, -2.5);
  EXPECT_EQ(kernels::EwParam<float>(plan->steps[0].program.instrs[0].a), 0.1f);
}

TEST(Planner, StepsCarryElementTypesAndItemsizes) {
  JobSpec spec = Spec({4, 8}, {{OpKind::kAdd, 0, 0, 3}, {OpKind::kSum}});
  spec.dtype = DType::kInt32;
  absl::StatusOr<Plan> plan = PlanJob(spec);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->steps.size(), 1u);
  EXPECT_EQ(plan->steps[0].in_dtype, DType::kInt32);
  EXPECT_EQ(plan->steps[0].out_dtype, DType::kInt64);
  EXPECT_EQ(plan->output_dtype, DType::kInt64);
  EXPECT_EQ(plan->max_bytes, 4 * 8 * 4);

  spec = Spec({4, 8}, {{OpKind::kSoftmax}, {OpKind::kArgmax}});
  spec.dtype = DType::kFloat64;
  plan = PlanJob(spec);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->steps.size(), 2u);
  EXPECT_EQ(plan->steps[0].in_dtype, DType::kFloat64);
  EXPECT_EQ(plan->steps[0].out_dtype, DType::kFloat64);
  EXPECT_EQ(plan->steps[1].out_dtype, DType::kInt64);
  EXPECT_EQ(plan->output_dtype, DType::kInt64);
  EXPECT_EQ(plan->max_bytes, 4 * 8 * 8);

  spec = Spec({3, 5}, {{OpKind::kRelu}});
  spec.dtype = DType::kFloat16;
  plan = PlanJob(spec);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->steps[0].in_dtype, DType::kFloat16);
  EXPECT_EQ(plan->output_dtype, DType::kFloat16);
  EXPECT_EQ(plan->max_bytes, 3 * 5 * 2);
}

}  // namespace
}  // namespace gpupipe::engine
