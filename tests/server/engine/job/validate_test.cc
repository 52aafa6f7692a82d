#include "server/engine/job/validate.h"

#include <gtest/gtest.h>

#include <limits>

namespace gpupipe::engine {
namespace {

JobSpec ValidSpec() {
  JobSpec spec;
  spec.dtype = DType::kFloat32;
  spec.shape = {2, 3};
  spec.ops = {{OpKind::kAffine, 2.0, 1.0}, {OpKind::kRelu}};
  return spec;
}

constexpr int64_t kValidBytes = 2 * 3 * 4;

TEST(ValidateJob, AcceptsAValidJob) {
  EXPECT_TRUE(ValidateJob(ValidSpec(), kValidBytes, Limits{}).ok());
}

TEST(ValidateJob, AcceptsAScalarForElementwiseOps) {
  JobSpec spec = ValidSpec();
  spec.shape = {};
  EXPECT_TRUE(ValidateJob(spec, 4, Limits{}).ok());
}

TEST(ValidateJob, RejectsByteCountNotMatchingShape) {
  absl::Status s = ValidateJob(ValidSpec(), kValidBytes - 4, Limits{});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("input.data"), std::string::npos) << s;
  EXPECT_NE(s.message().find("[2, 3]"), std::string::npos) << s;
}

TEST(ValidateJob, RejectsEmptyTensor) {
  JobSpec spec = ValidSpec();
  spec.shape = {0, 3};
  absl::Status s = ValidateJob(spec, 0, Limits{});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("input.shape"), std::string::npos) << s;
  EXPECT_NE(s.message().find("empty"), std::string::npos) << s;
}

TEST(ValidateJob, RejectsNegativeDimension) {
  JobSpec spec = ValidSpec();
  spec.shape = {2, -3};
  absl::Status s = ValidateJob(spec, kValidBytes, Limits{});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("input.shape[1]"), std::string::npos) << s;
}

TEST(ValidateJob, RejectsOverflowingShape) {
  JobSpec spec = ValidSpec();
  spec.shape = {int64_t{1} << 40, int64_t{1} << 40};
  absl::Status s = ValidateJob(spec, 4, Limits{});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

TEST(ValidateJob, RejectsInputOverTheSizeLimit) {
  Limits limits;
  limits.max_input_bytes = 16;
  absl::Status s = ValidateJob(ValidSpec(), kValidBytes, limits);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("limit of 16 bytes"), std::string::npos) << s;
}

TEST(ValidateJob, StreamedInputsHaveTheirOwnLimit) {
  Limits limits;
  limits.max_input_bytes = 16;
  limits.max_stream_input_bytes = kValidBytes;
  // Inline: over the limit, pointed at Run, which could carry it.
  absl::Status inline_status = ValidateJob(ValidSpec(), kValidBytes, limits, InputPath::kInline);
  EXPECT_EQ(inline_status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(inline_status.message().find("can be streamed with Run"), std::string::npos)
      << inline_status;
  EXPECT_TRUE(ValidateJob(ValidSpec(), kValidBytes, limits, InputPath::kStreamed).ok());
  limits.max_stream_input_bytes = kValidBytes - 1;
  absl::Status streamed = ValidateJob(ValidSpec(), kValidBytes, limits, InputPath::kStreamed);
  EXPECT_EQ(streamed.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(streamed.message().find("for streamed inputs"), std::string::npos) << streamed;
  // Too large for either path: no hint.
  limits.max_stream_input_bytes = 16;
  EXPECT_EQ(ValidateJob(ValidSpec(), kValidBytes, limits).message().find("Run"),
            std::string::npos);
}

TEST(ValidateJob, RejectsEmptyPipeline) {
  JobSpec spec = ValidSpec();
  spec.ops.clear();
  absl::Status s = ValidateJob(spec, kValidBytes, Limits{});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("ops: the pipeline is empty"), std::string::npos) << s;
}

TEST(ValidateJob, RejectsTooManyOps) {
  JobSpec spec = ValidSpec();
  spec.ops.assign(65, OpSpec{OpKind::kRelu});
  absl::Status s = ValidateJob(spec, kValidBytes, Limits{});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("65 ops"), std::string::npos) << s;
}

TEST(ValidateJob, RejectsNonFiniteOrUnrepresentableAffineParams) {
  for (double bad : {std::numeric_limits<double>::infinity(), std::nan(""), 1e300}) {
    JobSpec spec = ValidSpec();
    spec.ops[0].beta = bad;
    absl::Status s = ValidateJob(spec, kValidBytes, Limits{});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("ops[0] (affine).beta"), std::string::npos) << s;
  }
}

TEST(ValidateJob, RejectsUnsupportedDtype) {
  JobSpec spec = ValidSpec();
  spec.dtype = DType::kInt64;
  absl::Status s = ValidateJob(spec, 2 * 3 * 8, Limits{});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("ops[0] (affine): dtype int64 is not supported"), std::string::npos)
      << s;
}

TEST(ValidateJob, EveryFloatOpTakesEveryFloatDtype) {
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kFloat16}) {
    for (OpKind kind : {OpKind::kAffine, OpKind::kScale, OpKind::kAdd, OpKind::kRelu,
                        OpKind::kClamp, OpKind::kAbs, OpKind::kSqrt, OpKind::kExp, OpKind::kLog,
                        OpKind::kSigmoid, OpKind::kTanh, OpKind::kPow, OpKind::kSum,
                        OpKind::kMin, OpKind::kMax, OpKind::kMean, OpKind::kNorm2,
                        OpKind::kArgmax, OpKind::kSoftmax, OpKind::kL2Normalize,
                        OpKind::kStandardize}) {
      JobSpec spec = ValidSpec();
      spec.dtype = dtype;
      spec.ops = {{kind}};
      absl::Status s = ValidateJob(spec, 2 * 3 * DTypeSize(dtype), Limits{});
      EXPECT_TRUE(s.ok()) << DTypeName(dtype) << ": " << s;
    }
  }
}

TEST(ValidateJob, Int32TakesOnlyTheIntegerOps) {
  for (OpKind kind : {OpKind::kAdd, OpKind::kRelu, OpKind::kClamp, OpKind::kAbs, OpKind::kSum,
                      OpKind::kMin, OpKind::kMax, OpKind::kArgmax}) {
    JobSpec spec = ValidSpec();
    spec.dtype = DType::kInt32;
    spec.ops = {{kind}};
    absl::Status s = ValidateJob(spec, 2 * 3 * 4, Limits{});
    EXPECT_TRUE(s.ok()) << s;
  }
  for (OpKind kind : {OpKind::kAffine, OpKind::kScale, OpKind::kSqrt, OpKind::kExp, OpKind::kLog,
                      OpKind::kSigmoid, OpKind::kTanh, OpKind::kPow, OpKind::kMean,
                      OpKind::kNorm2, OpKind::kSoftmax, OpKind::kL2Normalize,
                      OpKind::kStandardize}) {
    JobSpec spec = ValidSpec();
    spec.dtype = DType::kInt32;
    spec.ops = {{kind, 1.0}};
    absl::Status s = ValidateJob(spec, 2 * 3 * 4, Limits{});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("dtype int32 is not supported (supported: float32, float64, "
                               "float16)"),
              std::string::npos)
        << s;
  }
}

TEST(ValidateJob, Int32ParametersMustBeIntegers) {
  JobSpec spec = ValidSpec();
  spec.dtype = DType::kInt32;
  OpSpec add{OpKind::kAdd};
  add.value = 2.5;
  spec.ops = {add};
  absl::Status s = ValidateJob(spec, 24, Limits{});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("ops[0] (add).value: must be an integer in the int32 range"),
            std::string::npos)
      << s;
  add.value = 3e9;
  spec.ops = {add};
  EXPECT_EQ(ValidateJob(spec, 24, Limits{}).code(), absl::StatusCode::kInvalidArgument);
  add.value = -7;
  spec.ops = {add};
  EXPECT_TRUE(ValidateJob(spec, 24, Limits{}).ok());

  OpSpec clamp{OpKind::kClamp};
  clamp.lo = -std::numeric_limits<double>::infinity();
  clamp.hi = 0.5;
  spec.ops = {clamp};
  s = ValidateJob(spec, 24, Limits{});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("ops[0] (clamp).hi: must be an integer in the int32 range or "
                             "infinity"),
            std::string::npos)
      << s;
  clamp.hi = 5;  // an infinite lo means no lower bound
  spec.ops = {clamp};
  EXPECT_TRUE(ValidateJob(spec, 24, Limits{}).ok());
}

TEST(ValidateJob, Float64ParametersMayExceedFloat32) {
  JobSpec spec = ValidSpec();
  spec.dtype = DType::kFloat64;
  spec.ops = {{OpKind::kAffine, 1e300, 0.0}};
  EXPECT_TRUE(ValidateJob(spec, 48, Limits{}).ok());
  spec.dtype = DType::kFloat16;
  absl::Status s = ValidateJob(spec, 12, Limits{});
  EXPECT_NE(s.message().find("ops[0] (affine).alpha: must be a finite float32 value"),
            std::string::npos)
      << s;
}

TEST(ValidateJob, SumOfInt32IsInt64) {
  JobSpec spec = ValidSpec();
  spec.dtype = DType::kInt32;
  spec.ops = {{OpKind::kSum}, {OpKind::kRelu}};
  absl::Status s = ValidateJob(spec, 24, Limits{});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("ops[1] (relu): dtype int64 is not supported"), std::string::npos)
      << s;
  spec.ops = {{OpKind::kMax}, {OpKind::kRelu}};  // max of int32 stays int32
  EXPECT_TRUE(ValidateJob(spec, 24, Limits{}).ok());
}

TEST(ValidateJob, RejectsRowOpOnScalar) {
  JobSpec spec = ValidSpec();
  spec.shape = {5};
  spec.ops = {{OpKind::kSum}, {OpKind::kSoftmax}};  // sum leaves a scalar
  absl::Status s = ValidateJob(spec, 20, Limits{});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("ops[1] (softmax)"), std::string::npos) << s;
}

TEST(ValidateJob, NothingRunsOnArgmaxIndices) {
  JobSpec spec = ValidSpec();
  spec.ops = {{OpKind::kArgmax}, {OpKind::kRelu}};
  absl::Status s = ValidateJob(spec, kValidBytes, Limits{});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("ops[1] (relu): dtype int64 is not supported"), std::string::npos) << s;
}

TEST(ValidateJob, ClampBoundsMayBeInfiniteButNotNan) {
  JobSpec spec = ValidSpec();
  spec.ops = {{OpKind::kClamp}};
  EXPECT_TRUE(ValidateJob(spec, kValidBytes, Limits{}).ok());
  spec.ops[0].hi = std::nan("");
  absl::Status s = ValidateJob(spec, kValidBytes, Limits{});
  EXPECT_NE(s.message().find("ops[0] (clamp).hi"), std::string::npos) << s;
}

TEST(ValidateJob, RejectsStagesOutOfRange) {
  JobSpec spec = ValidSpec();
  spec.stages = 9;
  absl::Status s = ValidateJob(spec, kValidBytes, Limits{});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("options.stages"), std::string::npos) << s;
}

TEST(ValidateJob, RejectsRankOverLimit) {
  JobSpec spec = ValidSpec();
  spec.shape.assign(9, 1);
  absl::Status s = ValidateJob(spec, 4, Limits{});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("rank 9"), std::string::npos) << s;
}

}  // namespace
}  // namespace gpupipe::engine
