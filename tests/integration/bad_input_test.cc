// Bad input against the real daemon: a clear status naming the field, and the daemon stays up
// and keeps serving.
#include <google/protobuf/unknown_field_set.h>
#include <gtest/gtest.h>

#include "client/job_client.h"
#include "tests/integration/binaries.h"
#include "tests/integration/process.h"
#include "tests/testing/random_tensor.h"

namespace gpupipe::testing {
namespace {

class BadInput : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // 1 MiB inputs at most, so the size-limit cases stay small.
    daemon_ = new DaemonProcess(DaemonBinary(), {"--backend", "cpu", "--max-input-mib", "1"});
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(daemon_->port(), 0) << daemon_->error();
    auto c = client::JobClient::Create(daemon_->target());
    ASSERT_TRUE(c.ok());
    client_ = *std::move(c);
  }

  // After every bad request: the daemon is alive and a good job still works.
  void TearDown() override {
    ASSERT_TRUE(daemon_->alive()) << daemon_->log();
    absl::StatusOr<client::JobResult> r = client_->Submit(Valid());
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(AsFloats(r->output.data()), (std::vector<float>{3, 0, 7}));
  }

  static v1::SubmitRequest Valid() {
    v1::SubmitRequest request;
    request.mutable_input()->set_dtype(v1::DTYPE_FLOAT32);
    request.mutable_input()->add_shape(3);
    request.mutable_input()->set_data(AsBytes({1, -3, 3}));
    v1::AffineOp* affine = request.add_ops()->mutable_affine();
    affine->set_alpha(2);
    affine->set_beta(1);
    request.add_ops()->mutable_relu();
    return request;
  }

  void ExpectRejected(const v1::SubmitRequest& request, absl::StatusCode code,
                      const std::string& needle) {
    absl::Status s = client_->Submit(request).status();
    EXPECT_EQ(s.code(), code) << s;
    EXPECT_NE(s.message().find(needle), std::string::npos) << s;
  }

  static DaemonProcess* daemon_;
  std::unique_ptr<client::JobClient> client_;
};

DaemonProcess* BadInput::daemon_ = nullptr;

TEST_F(BadInput, UnknownOp) {
  v1::SubmitRequest request = Valid();
  v1::Op* op = request.add_ops();
  op->GetReflection()->MutableUnknownFields(op)->AddLengthDelimited(77, "");
  ExpectRejected(request, absl::StatusCode::kInvalidArgument, "ops[2]: unknown op kind");
}

TEST_F(BadInput, OpWithNoKind) {
  v1::SubmitRequest request = Valid();
  request.add_ops();
  ExpectRejected(request, absl::StatusCode::kInvalidArgument, "ops[2]: no op kind is set");
}

TEST_F(BadInput, BadParams) {
  v1::SubmitRequest request = Valid();
  request.mutable_ops(0)->mutable_affine()->set_alpha(std::numeric_limits<double>::infinity());
  ExpectRejected(request, absl::StatusCode::kInvalidArgument, "ops[0] (affine).alpha");
}

TEST_F(BadInput, ShapeNotMatchingTheByteCount) {
  v1::SubmitRequest request = Valid();
  request.mutable_input()->set_shape(0, 4);
  ExpectRejected(request, absl::StatusCode::kInvalidArgument,
                 "input.data: 12 bytes do not match shape [4] of float32 (16 bytes expected)");
}

TEST_F(BadInput, DtypeNotMatchingTheByteCount) {
  v1::SubmitRequest request = Valid();
  request.mutable_input()->set_dtype(v1::DTYPE_FLOAT64);
  // float64 is not in this catalog yet: the byte count is checked first.
  ExpectRejected(request, absl::StatusCode::kInvalidArgument, "input.data: 12 bytes");
}

TEST_F(BadInput, EmptyPipeline) {
  v1::SubmitRequest request = Valid();
  request.clear_ops();
  ExpectRejected(request, absl::StatusCode::kInvalidArgument, "ops: the pipeline is empty");
}

TEST_F(BadInput, EmptyTensor) {
  v1::SubmitRequest request = Valid();
  request.mutable_input()->set_shape(0, 0);
  request.mutable_input()->clear_data();
  ExpectRejected(request, absl::StatusCode::kInvalidArgument, "input.shape: the tensor is empty");
}

TEST_F(BadInput, RequestOverTheSizeLimit) {
  v1::SubmitRequest request = Valid();
  const int64_t n = (1 << 20) / 4 + 1;  // one element over 1 MiB
  request.mutable_input()->set_shape(0, n);
  request.mutable_input()->set_data(std::string(n * 4, '\0'));
  ExpectRejected(request, absl::StatusCode::kResourceExhausted,
                 "over this server's limit of 1048576 bytes");
}

TEST_F(BadInput, RequestOverTheTransportLimit) {
  // Larger than the daemon's gRPC receive limit (limit + 1 MiB): refused before decoding.
  v1::SubmitRequest request = Valid();
  const int64_t n = (3 << 20) / 4;
  request.mutable_input()->set_shape(0, n);
  request.mutable_input()->set_data(std::string(n * 4, '\0'));
  absl::Status s = client_->Submit(request).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
}

TEST_F(BadInput, MissingDtype) {
  v1::SubmitRequest request = Valid();
  request.mutable_input()->clear_dtype();
  ExpectRejected(request, absl::StatusCode::kInvalidArgument, "input.dtype: must be set");
}

TEST_F(BadInput, RowOpOnAScalar) {
  v1::SubmitRequest request = Valid();
  request.add_ops()->mutable_sum();
  request.add_ops()->mutable_sum();
  ExpectRejected(request, absl::StatusCode::kInvalidArgument, "ops[3] (sum)");
}

}  // namespace
}  // namespace gpupipe::testing
