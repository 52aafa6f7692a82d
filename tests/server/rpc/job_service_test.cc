// The service in-process over a loopback port, driven by the real client library.
#include "server/rpc/job_service.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "client/job_client.h"
#include "server/engine/backends/cpu/cpu_backend.h"
#include "tests/testing/random_tensor.h"

namespace gpupipe::rpc {
namespace {

using gpupipe::testing::AsBytes;
using gpupipe::testing::AsFloats;

class JobServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    engine::EngineOptions options;
    options.limits.max_input_bytes = 8 << 20;
    options.chunk_policy.min_chunk_bytes = 0;  // jobs that ask for small chunks
    engine_ = engine::Engine::Create(engine::CreateCpuBackend({}), options);
    service_ = std::make_unique<JobServiceImpl>(engine_.get(), JobServiceOptions{4, "test"});
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(service_.get());
    builder.SetMaxReceiveMessageSize(16 << 20);
    server_ = builder.BuildAndStart();
    ASSERT_NE(port_, 0);
    auto client = client::JobClient::Create("127.0.0.1:" + std::to_string(port_));
    ASSERT_TRUE(client.ok());
    client_ = *std::move(client);
  }

  void TearDown() override {
    server_->Shutdown();
    engine_->Shutdown();
  }

  static v1::SubmitRequest Request(const std::vector<float>& x, std::vector<int64_t> shape) {
    v1::SubmitRequest request;
    request.mutable_input()->set_dtype(v1::DTYPE_FLOAT32);
    for (int64_t d : shape) request.mutable_input()->add_shape(d);
    request.mutable_input()->set_data(AsBytes(x));
    return request;
  }

  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<JobServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<client::JobClient> client_;
  int port_ = 0;
};

TEST_F(JobServiceTest, SubmitStreamsTheResultAndTiming) {
  v1::SubmitRequest request = Request({1, -2, 3, -4}, {2, 2});
  request.add_ops()->mutable_affine()->set_alpha(2);
  request.add_ops()->mutable_relu();
  std::vector<v1::JobEvent::EventCase> kinds;
  absl::StatusOr<client::JobResult> result =
      client_->Submit(request, [&](const v1::JobEvent& e) { kinds.push_back(e.event_case()); });
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(AsFloats(result->output.data()), (std::vector<float>{2, 0, 6, 0}));
  EXPECT_EQ(result->accepted.backend(), "cpu");
  EXPECT_TRUE(result->has_timing);
  ASSERT_GE(kinds.size(), 4u);
  EXPECT_EQ(kinds.front(), v1::JobEvent::kAccepted);
  EXPECT_EQ(kinds.back(), v1::JobEvent::kDone);
}

TEST_F(JobServiceTest, LargeResultsArriveInChunksUnderOneMiB) {
  const uint64_t seed = gpupipe::testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<float> x = gpupipe::testing::RandomFloats(3 << 18, seed);  // 3 MiB
  v1::SubmitRequest request = Request(x, {3, 1 << 18});
  request.add_ops()->mutable_relu();
  int chunks = 0;
  absl::StatusOr<client::JobResult> result = client_->Submit(request, [&](const v1::JobEvent& e) {
    if (e.has_chunk()) {
      ++chunks;
      EXPECT_LE(e.ByteSizeLong(), 1u << 20);
    }
  });
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_GE(chunks, 4);
  std::vector<float> y = AsFloats(result->output.data());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i] < 0 ? 0.0f : x[i]);
}

TEST_F(JobServiceTest, InvalidRequestsGetInvalidArgumentNamingTheField) {
  v1::SubmitRequest request = Request({1, 2, 3}, {2, 2});
  request.add_ops()->mutable_relu();
  absl::Status s = client_->Submit(request).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("input.data"), std::string::npos) << s;
  // The service keeps serving.
  v1::SubmitRequest ok = Request({1}, {1});
  ok.add_ops()->mutable_relu();
  EXPECT_TRUE(client_->Submit(ok).ok());
}

TEST_F(JobServiceTest, DescribeReportsBackendCatalogAndLimits) {
  absl::StatusOr<v1::DescribeResponse> d = client_->Describe();
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->backend(), "cpu");
  EXPECT_EQ(d->server_version(), "test");
  // Every op kind of the API is in the catalog, once.
  ASSERT_EQ(d->ops_size(), v1::Op::descriptor()->FindOneofByName("kind")->field_count());
  EXPECT_EQ(d->ops(0).name(), "affine");
  ASSERT_EQ(d->ops(0).params_size(), 2);
  EXPECT_EQ(d->ops(0).params(0).default_value(), "1");
  for (const v1::OpInfo& op : d->ops()) {
    EXPECT_NE(v1::Op::descriptor()->FindFieldByName(op.name()), nullptr) << op.name();
    if (op.name() == "pow") {
      ASSERT_EQ(op.params_size(), 1);
      EXPECT_TRUE(op.params(0).required());
      EXPECT_EQ(op.params(0).default_value(), "");
    }
  }
  EXPECT_EQ(d->limits().max_input_bytes(), 8 << 20);
  EXPECT_LT(d->limits().max_chunk_bytes(), 1 << 20);
}

TEST_F(JobServiceTest, ConcurrentClientsEachGetTheirOwnResult) {
  const uint64_t seed = gpupipe::testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<std::thread> threads;
  std::atomic<int> good{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) {
        std::vector<float> x = gpupipe::testing::RandomFloats(1000 + t * 10 + i, seed + t * 7 + i);
        v1::SubmitRequest r = Request(x, {static_cast<int64_t>(x.size())});
        r.add_ops()->mutable_affine()->set_beta(1);
        r.set_priority(static_cast<v1::Priority>(1 + (t + i) % 3));
        absl::StatusOr<client::JobResult> result = client_->Submit(r);
        if (!result.ok()) continue;
        std::vector<float> y = AsFloats(result->output.data());
        bool same = y.size() == x.size();
        for (size_t k = 0; same && k < x.size(); ++k) same = y[k] == x[k] + 1.0f;
        if (same) ++good;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(good.load(), 40);
}

// A small job runs on the gRPC thread that received it (engine/scheduling/direct_run.h): all
// its events are written once the call's reactor is bound, in both event shapes, and the
// stats count it. Large jobs are queued as before.
TEST_F(JobServiceTest, SmallJobsRunDirectlyAndArriveWholeInEitherEventShape) {
  absl::StatusOr<v1::DescribeResponse> d = client_->Describe();
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->direct_run_max_bytes(), 64 << 10);
  const uint64_t seed = gpupipe::testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (bool compact : {false, true}) {
    std::vector<float> x = gpupipe::testing::RandomFloats(1024, seed + compact);
    v1::SubmitRequest r = Request(x, {1, 1024});
    r.add_ops()->mutable_affine()->set_beta(1);
    r.set_compact_events(compact);
    std::vector<v1::JobEvent::EventCase> kinds;
    absl::StatusOr<client::JobResult> result =
        client_->Submit(r, [&](const v1::JobEvent& e) { kinds.push_back(e.event_case()); });
    ASSERT_TRUE(result.ok()) << result.status();
    std::vector<float> y = AsFloats(result->output.data());
    ASSERT_EQ(y.size(), x.size());
    for (size_t k = 0; k < x.size(); ++k) ASSERT_EQ(y[k], x[k] + 1.0f) << k;
    EXPECT_TRUE(result->has_timing);
    // The client library hands a CompleteJob on as its parts.
    EXPECT_EQ(kinds, (std::vector<v1::JobEvent::EventCase>{
                         v1::JobEvent::kAccepted, v1::JobEvent::kChunk, v1::JobEvent::kTiming,
                         v1::JobEvent::kDone}));
  }
  absl::StatusOr<v1::StatsResponse> stats = client_->GetStats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->direct_runs(), 2);
  // 128 KiB in and out: queued.
  v1::SubmitRequest big = Request(gpupipe::testing::RandomFloats(16 << 10, seed), {16, 1024});
  big.add_ops()->mutable_relu();
  ASSERT_TRUE(client_->Submit(big).ok());
  stats = client_->GetStats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->direct_runs(), 2);
}

// A call whose stream holds fewer than kDirectRunEvents events would wait for its reader
// inside the reactor's constructor, before it can be read: its jobs are queued.
TEST_F(JobServiceTest, AServiceThatQueuesFewEventsRunsNoJobDirectly) {
  JobServiceImpl service(engine_.get(), JobServiceOptions{engine::kDirectRunEvents - 1, "test"});
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(port, 0);
  auto client = client::JobClient::Create("127.0.0.1:" + std::to_string(port));
  ASSERT_TRUE(client.ok()) << client.status();
  for (bool explain : {false, true}) {
    v1::SubmitRequest r = Request(gpupipe::testing::RandomFloats(1024, 7), {1, 1024});
    r.add_ops()->mutable_relu();
    r.set_explain(explain);
    r.set_compact_events(true);
    absl::StatusOr<client::JobResult> result = (*client)->Submit(r);
    ASSERT_TRUE(result.ok()) << result.status();
  }
  EXPECT_EQ(engine_->Stats(false, false).direct_runs, 0);
  server->Shutdown();
}

}  // namespace
}  // namespace gpupipe::rpc
