// Run (the streaming upload) on the CUDA backend, in process over loopback, against the same
// job through Run on the CPU backend, on fresh random data. Skips without a usable CUDA device.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include "client/job_client.h"
#include "server/engine/backends/cpu/cpu_backend.h"
#include "server/engine/backends/cuda/cuda_backend.h"
#include "server/rpc/job_service.h"
#include "tests/testing/random_tensor.h"

namespace gpupipe::rpc {
namespace {

using gpupipe::testing::AsBytes;
using gpupipe::testing::AsFloats;

constexpr int64_t kBuffers = 64 << 20;  // the CUDA backend holds a whole input on the device

// One engine behind its own loopback server, and a client for it.
struct Service {
  explicit Service(std::unique_ptr<engine::Backend> backend) {
    engine::EngineOptions options;
    options.limits.max_input_bytes = 8 << 20;
    options.limits.max_stream_input_bytes = kBuffers;
    options.chunk_policy.min_chunk_bytes = 0;  // jobs that ask for small chunks
    engine = engine::Engine::Create(std::move(backend), options);
    service = std::make_unique<JobServiceImpl>(engine.get(), JobServiceOptions{4, "test"});
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service.get());
    server = builder.BuildAndStart();
    client = std::make_unique<client::JobClient>(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()),
        client::ClientOptions{});
  }
  ~Service() {
    server->Shutdown();
    engine->Shutdown();
  }

  // Streams `bytes`, sleeping `pause` after each chunk so that the job waits on its input.
  absl::StatusOr<client::JobResult> Run(const v1::SubmitRequest& spec, const std::string& bytes,
                                        std::chrono::milliseconds pause = {}) {
    int64_t at = 0;
    return client->Run(spec, static_cast<int64_t>(bytes.size()), [&](char* buffer, int64_t n) {
      std::memcpy(buffer, bytes.data() + at, static_cast<size_t>(n));
      at += n;
      if (pause.count() > 0) std::this_thread::sleep_for(pause);
      return absl::OkStatus();
    });
  }

  std::unique_ptr<engine::Engine> engine;
  std::unique_ptr<JobServiceImpl> service;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<client::JobClient> client;
  int port = 0;
};

class RunCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    engine::CudaBackendOptions options;
    options.lanes_per_level = 1;
    absl::StatusOr<std::unique_ptr<engine::Backend>> backend =
        engine::CreateCudaBackend(options);
    if (!backend.ok()) GTEST_SKIP() << "no usable CUDA device: " << backend.status();
    cuda_ = std::make_unique<Service>(*std::move(backend));
    cpu_ = std::make_unique<Service>(engine::CreateCpuBackend({}));
    ASSERT_NE(cuda_->port, 0);
    ASSERT_NE(cpu_->port, 0);
  }

  static v1::SubmitRequest Spec(int64_t rows, int64_t cols) {
    v1::SubmitRequest spec;
    spec.mutable_input()->set_dtype(v1::DTYPE_FLOAT32);
    spec.mutable_input()->add_shape(rows);
    spec.mutable_input()->add_shape(cols);
    return spec;
  }

  std::unique_ptr<Service> cuda_, cpu_;
};

TEST_F(RunCudaTest, ElementwiseResultsAreBitIdenticalToTheCpu) {
  const uint64_t seed = gpupipe::testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  // 48 MiB with a ragged tail: over the Submit limit, inside the device buffers.
  const int64_t rows = 3, cols = (4 << 20) + 13;
  const std::string bytes = AsBytes(gpupipe::testing::RandomFloats(rows * cols, seed));
  v1::SubmitRequest spec = Spec(rows, cols);
  spec.add_ops()->mutable_affine()->set_alpha(2);
  spec.add_ops()->mutable_relu();
  absl::StatusOr<client::JobResult> want = cpu_->Run(spec, bytes);
  ASSERT_TRUE(want.ok()) << want.status();
  absl::StatusOr<client::JobResult> got = cuda_->Run(spec, bytes);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->accepted.backend(), "cuda");
  ASSERT_EQ(got->output.data().size(), want->output.data().size());
  EXPECT_TRUE(got->output.data() == want->output.data()) << "elementwise results differ";
}

TEST_F(RunCudaTest, RowOpsOnASlowUploadMatchTheCpu) {
  const uint64_t seed = gpupipe::testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const int64_t rows = 257, cols = 4099;  // ~4 MiB in 5 chunks, 20 ms apart
  const std::vector<float> x = gpupipe::testing::RandomFloats(rows * cols, seed);
  v1::SubmitRequest spec = Spec(rows, cols);
  spec.add_ops()->mutable_softmax();
  absl::StatusOr<client::JobResult> want = cpu_->Run(spec, AsBytes(x));
  ASSERT_TRUE(want.ok()) << want.status();
  absl::StatusOr<client::JobResult> got =
      cuda_->Run(spec, AsBytes(x), std::chrono::milliseconds(20));
  ASSERT_TRUE(got.ok()) << got.status();
  const std::vector<float> a = AsFloats(got->output.data());
  const std::vector<float> b = AsFloats(want->output.data());
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_NEAR(a[i], b[i], 1e-6 + 1e-5 * std::fabs(b[i])) << "element " << i;
  }
}

TEST_F(RunCudaTest, CancelMidUploadFreesTheLane) {
  grpc::ClientContext context;
  auto stub = v1::JobService::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(cuda_->port), grpc::InsecureChannelCredentials()));
  auto stream = stub->Run(&context);
  v1::RunRequest m;
  *m.mutable_spec() = Spec(1024, 1024);
  m.mutable_spec()->add_ops()->mutable_relu();
  ASSERT_TRUE(stream->Write(m));
  m.set_data(std::string(1 << 20, '\0'));
  ASSERT_TRUE(stream->Write(m));
  v1::JobEvent accepted;
  ASSERT_TRUE(stream->Read(&accepted));
  context.TryCancel();
  while (stream->Read(&accepted)) {
  }
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (cuda_->engine->jobs_in_flight() != 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(cuda_->engine->jobs_in_flight(), 0);
  // The one normal-priority lane serves the next job.
  v1::SubmitRequest spec = Spec(1, 2);
  spec.add_ops()->mutable_relu();
  absl::StatusOr<client::JobResult> next = cuda_->Run(spec, AsBytes({-1.0f, 2.0f}));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(AsFloats(next->output.data()), (std::vector<float>{0.0f, 2.0f}));
}

}  // namespace
}  // namespace gpupipe::rpc
