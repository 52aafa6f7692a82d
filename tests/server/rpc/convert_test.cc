#include "server/rpc/convert.h"

#include <gtest/gtest.h>

namespace gpupipe::rpc {
namespace {

v1::SubmitRequest ValidRequest() {
  v1::SubmitRequest request;
  request.mutable_input()->set_dtype(v1::DTYPE_FLOAT32);
  request.mutable_input()->add_shape(2);
  request.mutable_input()->set_data(std::string(8, '\0'));
  request.add_ops()->mutable_affine()->set_alpha(2);
  request.add_ops()->mutable_relu();
  request.add_ops()->mutable_softmax();
  return request;
}

TEST(DecodeJobSpec, DecodesOpsWithDefaults) {
  absl::StatusOr<engine::JobSpec> spec = DecodeJobSpec(ValidRequest());
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->ops.size(), 3u);
  EXPECT_EQ(spec->ops[0].kind, engine::OpKind::kAffine);
  EXPECT_EQ(spec->ops[0].alpha, 2.0);
  EXPECT_EQ(spec->ops[0].beta, 0.0) << "absent beta takes the default";
  EXPECT_EQ(spec->ops[2].kind, engine::OpKind::kSoftmax);
  EXPECT_EQ(spec->priority, engine::Priority::kNormal);
  EXPECT_EQ(spec->shape, (std::vector<int64_t>{2}));
}

TEST(DecodeJobSpec, CarriesChunkBytesAndTimeline) {
  v1::SubmitRequest request = ValidRequest();
  request.mutable_options()->set_chunk_bytes(4096);
  request.mutable_options()->set_timeline(true);
  absl::StatusOr<engine::JobSpec> spec = DecodeJobSpec(request);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->chunk_bytes, 4096);
  EXPECT_TRUE(spec->timeline);
  EXPECT_EQ(DecodeJobSpec(ValidRequest())->chunk_bytes, 0) << "0: the server's default";
}

TEST(EncodeTiming, CarriesChunksAndTheTimeline) {
  engine::JobTiming t;
  t.chunks = 3;
  t.gbps = 12.5;
  t.timeline.push_back({"h2d", "h2d", 2, 1.5, 2.5});
  const v1::JobEvent event = EncodeTiming("job", t);
  EXPECT_EQ(event.timing().chunks(), 3);
  EXPECT_EQ(event.timing().gbps(), 12.5);
  ASSERT_EQ(event.timing().timeline_size(), 1);
  EXPECT_EQ(event.timing().timeline(0).chunk(), 2);
  EXPECT_EQ(event.timing().timeline(0).stage(), "h2d");
  EXPECT_EQ(event.timing().timeline(0).end_us(), 2.5);
}

TEST(DecodeJobSpec, AffineWithoutParamsIsTheIdentity) {
  v1::SubmitRequest request = ValidRequest();
  request.mutable_ops(0)->mutable_affine()->clear_alpha();
  absl::StatusOr<engine::JobSpec> spec = DecodeJobSpec(request);
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->ops[0].alpha, 1.0);
}

TEST(DecodeJobSpec, RejectsAnOpWithNoKind) {
  v1::SubmitRequest request = ValidRequest();
  request.add_ops();
  absl::Status s = DecodeJobSpec(request).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("ops[3]: no op kind is set"), std::string::npos) << s;
  EXPECT_NE(s.message().find("this server knows: affine, scale, add, relu"), std::string::npos) << s;
}

TEST(DecodeJobSpec, RejectsAnOpKindFromANewerClient) {
  v1::SubmitRequest request = ValidRequest();
  v1::Op* op = request.add_ops();
  op->GetReflection()->MutableUnknownFields(op)->AddLengthDelimited(99, "");
  absl::Status s = DecodeJobSpec(request).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("ops[3]: unknown op kind (field number 99)"), std::string::npos) << s;
}

TEST(DecodeJobSpec, RejectsAnUnknownParamFromANewerClient) {
  v1::SubmitRequest request = ValidRequest();
  v1::AffineOp* affine = request.mutable_ops(0)->mutable_affine();
  affine->GetReflection()->MutableUnknownFields(affine)->AddFixed64(7, 0);
  absl::Status s = DecodeJobSpec(request).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("ops[0] (affine): unknown field number 7"), std::string::npos) << s;
}

TEST(DecodeJobSpec, RejectsMissingInputAndDtype) {
  v1::SubmitRequest request = ValidRequest();
  request.clear_input();
  EXPECT_NE(DecodeJobSpec(request).status().message().find("input: must be set"),
            std::string::npos);
  request = ValidRequest();
  request.mutable_input()->set_dtype(v1::DTYPE_UNSPECIFIED);
  EXPECT_NE(DecodeJobSpec(request).status().message().find("input.dtype"), std::string::npos);
}

TEST(DecodeJobSpec, RejectsUnknownEnumValues) {
  v1::SubmitRequest request = ValidRequest();
  request.set_priority(static_cast<v1::Priority>(42));
  absl::Status s = DecodeJobSpec(request).status();
  EXPECT_NE(s.message().find("priority: unknown value 42"), std::string::npos) << s;
  request = ValidRequest();
  request.mutable_options()->set_launch(static_cast<v1::LaunchMode>(9));
  s = DecodeJobSpec(request).status();
  EXPECT_NE(s.message().find("options.launch"), std::string::npos) << s;
}

TEST(EncodeDone, CarriesCodeAndMessage) {
  v1::JobEvent e = EncodeDone("j1", absl::CancelledError("gone"));
  EXPECT_EQ(e.job_id(), "j1");
  EXPECT_EQ(e.done().code(), 1);
  EXPECT_EQ(e.done().message(), "gone");
}

}  // namespace
}  // namespace gpupipe::rpc

namespace gpupipe::rpc {
namespace {

TEST(DecodeJobSpec, DecodesEveryElementwiseOpWithItsDefaults) {
  v1::SubmitRequest request = ValidRequest();
  request.clear_ops();
  request.add_ops()->mutable_scale()->set_alpha(3);
  request.add_ops()->mutable_add();
  request.add_ops()->mutable_clamp()->set_hi(2);
  request.add_ops()->mutable_pow()->set_p(0.5);
  absl::StatusOr<engine::JobSpec> spec = DecodeJobSpec(request);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->ops[0].alpha, 3);
  EXPECT_EQ(spec->ops[1].value, 0);
  EXPECT_EQ(spec->ops[2].lo, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(spec->ops[2].hi, 2);
  EXPECT_EQ(spec->ops[3].p, 0.5);
}

TEST(DecodeJobSpec, PowWithoutItsExponentIsRejected) {
  v1::SubmitRequest request = ValidRequest();
  request.add_ops()->mutable_pow();
  absl::Status s = DecodeJobSpec(request).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "ops[3] (pow).p: is required");
}

}  // namespace
}  // namespace gpupipe::rpc
