// Decoding of cumsum, histogram, convolve and topk, and their entries in Describe.
#include <gtest/gtest.h>

#include "server/rpc/convert.h"

namespace gpupipe::rpc {
namespace {

v1::SubmitRequest Request() {
  v1::SubmitRequest request;
  request.mutable_input()->set_dtype(v1::DTYPE_FLOAT32);
  request.mutable_input()->add_shape(4);
  request.mutable_input()->set_data(std::string(16, '\0'));
  return request;
}

TEST(DecodeRowResizeOps, DecodesParams) {
  v1::SubmitRequest request = Request();
  request.add_ops()->mutable_cumsum();
  v1::HistogramOp* h = request.add_ops()->mutable_histogram();
  h->set_bins(256);
  h->set_lo(-1);
  h->set_hi(2);
  v1::ConvolveOp* c = request.add_ops()->mutable_convolve();
  c->add_taps(0.25);
  c->add_taps(0.5);
  c->set_mode(v1::ConvolveOp::MODE_SAME);
  request.add_ops()->mutable_topk()->set_k(3);
  absl::StatusOr<engine::JobSpec> spec = DecodeJobSpec(request);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->ops.size(), 4u);
  EXPECT_EQ(spec->ops[0].kind, engine::OpKind::kCumsum);
  EXPECT_EQ(spec->ops[1].kind, engine::OpKind::kHistogram);
  EXPECT_EQ(spec->ops[1].bins, 256);
  EXPECT_EQ(spec->ops[1].lo, -1);
  EXPECT_EQ(spec->ops[1].hi, 2);
  EXPECT_EQ(spec->ops[2].kind, engine::OpKind::kConvolve);
  EXPECT_EQ(spec->ops[2].taps, (std::vector<double>{0.25, 0.5}));
  EXPECT_EQ(spec->ops[2].mode, engine::ConvolveMode::kSame);
  EXPECT_EQ(spec->ops[3].kind, engine::OpKind::kTopk);
  EXPECT_EQ(spec->ops[3].k, 3);
}

TEST(DecodeRowResizeOps, Defaults) {
  v1::SubmitRequest request = Request();
  v1::HistogramOp* h = request.add_ops()->mutable_histogram();
  h->set_lo(0);
  h->set_hi(1);
  request.add_ops()->mutable_convolve()->add_taps(1);
  absl::StatusOr<engine::JobSpec> spec = DecodeJobSpec(request);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->ops[0].bins, 10) << "NumPy's default";
  EXPECT_EQ(spec->ops[1].mode, engine::ConvolveMode::kFull) << "NumPy's default";
}

TEST(DecodeRowResizeOps, RequiredParamsAreNamed) {
  v1::SubmitRequest request = Request();
  request.add_ops()->mutable_histogram()->set_lo(0);
  absl::StatusOr<engine::JobSpec> spec = DecodeJobSpec(request);
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(spec.status().message().find("ops[0] (histogram).hi: is required"),
            std::string::npos)
      << spec.status();

  request = Request();
  request.add_ops()->mutable_topk();
  spec = DecodeJobSpec(request);
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("ops[0] (topk).k: is required"), std::string::npos)
      << spec.status();
}

TEST(DecodeRowResizeOps, UnknownConvolveModeIsRejected) {
  v1::SubmitRequest request = Request();
  v1::ConvolveOp* c = request.add_ops()->mutable_convolve();
  c->add_taps(1);
  c->set_mode(static_cast<v1::ConvolveOp::Mode>(9));
  absl::StatusOr<engine::JobSpec> spec = DecodeJobSpec(request);
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("ops[0] (convolve).mode: unknown value 9"),
            std::string::npos)
      << spec.status();
}

}  // namespace
}  // namespace gpupipe::rpc
