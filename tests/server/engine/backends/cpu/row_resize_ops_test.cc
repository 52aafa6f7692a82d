// cumsum, histogram, convolve and topk through validation, the planner and the engine with
// the CPU backend.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "server/engine/backends/cpu/cpu_backend.h"
#include "server/engine/engine.h"
#include "server/engine/job/op_catalog.h"
#include "server/engine/planning/plan.h"
#include "server/engine/job/validate.h"
#include "tests/testing/random_tensor.h"
#include "tests/testing/recording_sink.h"

namespace gpupipe::engine {
namespace {

using gpupipe::testing::AsBytes;
using gpupipe::testing::AsFloats;
using gpupipe::testing::RecordingSink;

OpSpec Histogram(int64_t bins, double lo, double hi) {
  OpSpec op;
  op.kind = OpKind::kHistogram;
  op.bins = bins;
  op.lo = lo;
  op.hi = hi;
  return op;
}

OpSpec Convolve(std::vector<double> taps, ConvolveMode mode) {
  OpSpec op;
  op.kind = OpKind::kConvolve;
  op.taps = std::move(taps);
  op.mode = mode;
  return op;
}

OpSpec Topk(int64_t k) {
  OpSpec op;
  op.kind = OpKind::kTopk;
  op.k = k;
  return op;
}

OpSpec Cumsum() {
  OpSpec op;
  op.kind = OpKind::kCumsum;
  return op;
}

JobSpec Spec(DType dtype, std::vector<int64_t> shape, std::vector<OpSpec> ops) {
  JobSpec spec;
  spec.dtype = dtype;
  spec.shape = std::move(shape);
  spec.ops = std::move(ops);
  return spec;
}

int64_t Bytes(const JobSpec& spec) { return ElementCount(spec.shape) * DTypeSize(spec.dtype); }

absl::Status Validate(const JobSpec& spec) { return ValidateJob(spec, Bytes(spec), Limits{}); }

void ExpectInvalid(const JobSpec& spec, const std::string& field, const std::string& detail) {
  const absl::Status s = Validate(spec);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find(field), std::string::npos) << s;
  EXPECT_NE(s.message().find(detail), std::string::npos) << s;
}

// ---- validation -------------------------------------------------------------------------------

TEST(RowResizeValidation, AcceptsEachOpOnItsDtypes) {
  for (DType d : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kInt32}) {
    EXPECT_TRUE(Validate(Spec(d, {2, 8}, {Cumsum()})).ok()) << DTypeName(d);
    EXPECT_TRUE(Validate(Spec(d, {2, 8}, {Histogram(4, 0, 1)})).ok()) << DTypeName(d);
    EXPECT_TRUE(Validate(Spec(d, {2, 8}, {Topk(8)})).ok()) << DTypeName(d);
  }
  for (DType d : {DType::kFloat32, DType::kFloat64, DType::kFloat16}) {
    EXPECT_TRUE(Validate(Spec(d, {8}, {Convolve({1, 2}, ConvolveMode::kSame)})).ok());
  }
  ExpectInvalid(Spec(DType::kInt32, {8}, {Convolve({1}, ConvolveMode::kFull)}), "ops[0] (convolve)",
                "dtype int32 is not supported");
}

TEST(RowResizeValidation, HistogramParams) {
  ExpectInvalid(Spec(DType::kFloat32, {8}, {Histogram(0, 0, 1)}), "ops[0] (histogram).bins",
                "out of range 1..65536");
  ExpectInvalid(Spec(DType::kFloat32, {8}, {Histogram(65537, 0, 1)}), "ops[0] (histogram).bins",
                "65537");
  ExpectInvalid(Spec(DType::kFloat32, {8}, {Histogram(4, 1, 1)}), "ops[0] (histogram)",
                "must be below hi");
  ExpectInvalid(Spec(DType::kFloat32, {8}, {Histogram(4, std::nan(""), 1)}),
                "ops[0] (histogram).lo", "finite");
  ExpectInvalid(Spec(DType::kFloat32, {8},
                     {Histogram(4, 0, std::numeric_limits<double>::infinity())}),
                "ops[0] (histogram).hi", "finite");
  ExpectInvalid(Spec(DType::kFloat32, {8}, {Histogram(4, -1e308, 1e308)}), "ops[0] (histogram)",
                "finite hi - lo");
  // Bins narrower than the smallest double: no width to place values by.
  ExpectInvalid(Spec(DType::kFloat32, {8}, {Histogram(65536, 0, 5e-324)}), "ops[0] (histogram)",
                "narrower than the smallest double");
  ExpectInvalid(Spec(DType::kFloat64, {8}, {Histogram(2, 0, 1e-308)}), "ops[0] (histogram)",
                "narrower than the smallest double");
  EXPECT_TRUE(Validate(Spec(DType::kFloat32, {8}, {Histogram(4, 0, 1e-300)})).ok());
}

TEST(RowResizeValidation, ConvolveTaps) {
  ExpectInvalid(Spec(DType::kFloat32, {8}, {Convolve({}, ConvolveMode::kFull)}),
                "ops[0] (convolve).taps", "1 to 1024");
  ExpectInvalid(Spec(DType::kFloat32, {8}, {Convolve(std::vector<double>(1025, 1.0),
                                                     ConvolveMode::kFull)}),
                "ops[0] (convolve).taps", "1025 taps");
  ExpectInvalid(Spec(DType::kFloat32, {8}, {Convolve({1, std::nan("")}, ConvolveMode::kFull)}),
                "ops[0] (convolve).taps[1]", "finite");
}

TEST(RowResizeValidation, TopkBoundsByRowLength) {
  ExpectInvalid(Spec(DType::kFloat32, {2, 8}, {Topk(9)}), "ops[0] (topk).k", "row length 8");
  ExpectInvalid(Spec(DType::kFloat32, {2, 8}, {Topk(0)}), "ops[0] (topk).k", "out of range");
  ExpectInvalid(Spec(DType::kFloat32, {4096}, {Topk(1025)}), "ops[0] (topk).k", "at most 1024");
  // k is checked against the row length the op before leaves: histogram(4) leaves 4.
  ExpectInvalid(Spec(DType::kFloat32, {64}, {Convolve({1, 1}, ConvolveMode::kValid), Topk(64)}),
                "ops[1] (topk).k", "row length 63");
}

TEST(RowResizeValidation, LaterOpsSeeTheNewDtype) {
  // histogram gives int64, which no elementwise op takes; cumsum of int32 gives int64 too.
  OpSpec relu;
  relu.kind = OpKind::kRelu;
  ExpectInvalid(Spec(DType::kFloat32, {8}, {Histogram(4, 0, 1), relu}), "ops[1] (relu)",
                "dtype int64");
  ExpectInvalid(Spec(DType::kInt32, {8}, {Cumsum(), Cumsum()}), "ops[1] (cumsum)", "dtype int64");
  EXPECT_TRUE(Validate(Spec(DType::kFloat32, {8}, {Cumsum(), relu})).ok());
}

TEST(RowResizeValidation, ScalarInputIsRejected) {
  ExpectInvalid(Spec(DType::kFloat32, {}, {Cumsum()}), "ops[0] (cumsum)", "scalar");
}

TEST(RowResizeValidation, ResultsOverTheLimitAreResourceExhausted) {
  // 1024 floats in, 1024 rows of 65536 int64 counts out: 512 MiB.
  const absl::Status s = Validate(Spec(DType::kFloat32, {1024, 1}, {Histogram(65536, 0, 1)}));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find("ops[0] (histogram)"), std::string::npos) << s;
}

// ---- catalog and planner ----------------------------------------------------------------------

TEST(RowResizeCatalog, OutputRules) {
  EXPECT_EQ(OpOutputDType(Cumsum(), DType::kInt32), DType::kInt64);
  EXPECT_EQ(OpOutputDType(Cumsum(), DType::kFloat16), DType::kFloat16);
  EXPECT_EQ(OpOutputDType(Histogram(3, 0, 1), DType::kFloat64), DType::kInt64);
  EXPECT_EQ(OpOutputCols(Convolve({1, 2, 3}, ConvolveMode::kFull), 10), 12);
  EXPECT_EQ(OpOutputCols(Convolve({1, 2, 3}, ConvolveMode::kSame), 10), 10);
  EXPECT_EQ(OpOutputCols(Convolve({1, 2, 3}, ConvolveMode::kSame), 2), 3);
  EXPECT_EQ(OpOutputCols(Convolve({1, 2, 3}, ConvolveMode::kValid), 10), 8);
  EXPECT_EQ(OpOutputCols(Convolve({1, 2, 3}, ConvolveMode::kValid), 2), 2);
  EXPECT_EQ(OpOutputCols(Topk(5), 10), 5);
  EXPECT_EQ(OpOutputCols(Histogram(7, 0, 1), 10), 7);
  EXPECT_EQ(std::string(OpClassName(GetOpInfo(OpKind::kCumsum).op_class)), "row-scan");
  EXPECT_EQ(std::string(OpClassName(GetOpInfo(OpKind::kTopk).op_class)), "row-resize");
}

TEST(RowResizePlanner, ElementwiseRunBeforeIsItsOwnStep) {
  OpSpec affine;
  affine.kind = OpKind::kAffine;
  affine.alpha = 2;
  OpSpec sum;
  sum.kind = OpKind::kSum;
  absl::StatusOr<Plan> plan = PlanJob(
      Spec(DType::kFloat32, {3, 10}, {affine, Convolve({1, 1, 1}, ConvolveMode::kFull), Topk(4),
                                      sum}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->steps.size(), 4u);
  EXPECT_EQ(plan->steps[0].kind, StepKind::kElementwise);
  EXPECT_EQ(plan->steps[0].ops, "affine");
  EXPECT_EQ(plan->steps[1].kind, StepKind::kRowConvolve);
  EXPECT_EQ(plan->steps[1].cols, 10);
  EXPECT_EQ(plan->steps[1].out_cols, 12);
  EXPECT_EQ(plan->steps[1].program.count, 0);
  EXPECT_EQ(plan->steps[2].kind, StepKind::kRowTopk);
  EXPECT_EQ(plan->steps[2].cols, 12);
  EXPECT_EQ(plan->steps[2].output_elements(), 12);
  EXPECT_EQ(plan->steps[3].kind, StepKind::kRowReduce);
  EXPECT_EQ(plan->steps[3].cols, 4);
  EXPECT_EQ(plan->output_shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(plan->max_bytes, 3 * 12 * 4);
}

TEST(RowResizePlanner, DtypesFlowThroughSteps) {
  absl::StatusOr<Plan> plan =
      PlanJob(Spec(DType::kInt32, {2, 5}, {Cumsum()}));
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->steps.size(), 1u);
  EXPECT_EQ(plan->steps[0].in_dtype, DType::kInt32);
  EXPECT_EQ(plan->steps[0].out_dtype, DType::kInt64);
  EXPECT_EQ(plan->output_dtype, DType::kInt64);
  EXPECT_EQ(plan->max_bytes, 2 * 5 * 8);
  plan = PlanJob(Spec(DType::kFloat16, {4, 100}, {Histogram(16, 0, 1)}));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->output_dtype, DType::kInt64);
  EXPECT_EQ(plan->output_shape, (std::vector<int64_t>{4, 16}));
  EXPECT_EQ(std::string(StepKindName(plan->steps[0].kind)), "row-histogram");
}

// ---- the engine with the CPU backend ----------------------------------------------------------

std::unique_ptr<Engine> MakeEngine() {
  CpuBackendOptions cpu;
  cpu.lanes_per_level = 1;
  EngineOptions options;
  options.chunk_policy.min_chunk_bytes = 0;  // tests of the chunking itself
  return Engine::Create(CreateCpuBackend(cpu), options);
}

std::shared_ptr<RecordingSink> RunJob(Engine& engine, const JobSpec& spec, std::string input) {
  auto sink = std::make_shared<RecordingSink>();
  EXPECT_TRUE(engine.Submit(spec, input, sink).ok());
  EXPECT_TRUE(sink->WaitDone());
  EXPECT_TRUE(sink->status().ok()) << sink->status();
  return sink;
}

template <typename T>
std::vector<T> As(const std::string& bytes) {
  std::vector<T> v(bytes.size() / sizeof(T));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
  return v;
}

template <typename T>
std::string Raw(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

TEST(RowResizeEngine, RunsAllFourOpsOnTheCpuBackend) {
  auto engine = MakeEngine();
  // np.cumsum([[1, 2, 3], [4, 5, 6]], axis=-1)
  auto cumsum = RunJob(*engine, Spec(DType::kFloat32, {2, 3}, {Cumsum()}),
                       AsBytes({1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(AsFloats(cumsum->output()), (std::vector<float>{1, 3, 6, 4, 9, 15}));
  EXPECT_EQ(cumsum->info().output_shape, (std::vector<int64_t>{2, 3}));

  // np.histogram([0.1, 0.6, 0.7, 1.0, 2.0], 2, (0, 1))[0] == [1, 3]
  auto hist = RunJob(*engine, Spec(DType::kFloat64, {5}, {Histogram(2, 0, 1)}),
                     Raw(std::vector<double>{0.1, 0.6, 0.7, 1.0, 2.0}));
  EXPECT_EQ(As<int64_t>(hist->output()), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(hist->info().output_dtype, DType::kInt64);
  EXPECT_EQ(hist->info().output_shape, (std::vector<int64_t>{2}));

  // np.convolve([1, 2, 3], [0, 1, 0.5], 'full') == [0, 1, 2.5, 4, 1.5]; 'same' == [1, 2.5, 4]
  auto full = RunJob(*engine, Spec(DType::kFloat32, {3}, {Convolve({0, 1, 0.5},
                                                                   ConvolveMode::kFull)}),
                     AsBytes({1, 2, 3}));
  EXPECT_EQ(AsFloats(full->output()), (std::vector<float>{0, 1, 2.5f, 4, 1.5f}));
  auto same = RunJob(*engine, Spec(DType::kFloat32, {3}, {Convolve({0, 1, 0.5},
                                                                   ConvolveMode::kSame)}),
                     AsBytes({1, 2, 3}));
  EXPECT_EQ(AsFloats(same->output()), (std::vector<float>{1, 2.5f, 4}));

  // np.sort([3, -1, 7, 7, 2])[::-1][:3] == [7, 7, 3] (int32 stays int32)
  auto topk = RunJob(*engine, Spec(DType::kInt32, {5}, {Topk(3)}),
                     Raw(std::vector<int32_t>{3, -1, 7, 7, 2}));
  EXPECT_EQ(As<int32_t>(topk->output()), (std::vector<int32_t>{7, 7, 3}));
  EXPECT_EQ(topk->info().output_dtype, DType::kInt32);
}

TEST(RowResizeEngine, Int32CumsumGivesInt64AndPipelinesCompose) {
  auto engine = MakeEngine();
  auto cumsum = RunJob(*engine, Spec(DType::kInt32, {2, 2}, {Cumsum()}),
                       Raw(std::vector<int32_t>{2147483647, 1, -3, -4}));
  EXPECT_EQ(As<int64_t>(cumsum->output()),
            (std::vector<int64_t>{2147483647, 2147483648LL, -3, -7}));
  // affine(2) | cumsum | topk(2) | sum on [[1, 2, 3]]: [2, 6, 12] -> [12, 6] -> 18
  OpSpec affine;
  affine.kind = OpKind::kAffine;
  affine.alpha = 2;
  OpSpec sum;
  sum.kind = OpKind::kSum;
  auto chain = RunJob(*engine, Spec(DType::kFloat32, {1, 3}, {affine, Cumsum(), Topk(2), sum}),
                      AsBytes({1, 2, 3}));
  EXPECT_EQ(AsFloats(chain->output()), (std::vector<float>{18}));
}

}  // namespace
}  // namespace gpupipe::engine
