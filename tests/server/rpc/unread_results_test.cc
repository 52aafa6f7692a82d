// Results held for clients that do not read them: the ledger's limits on their own, and the
// in-process service refusing a client whose calls leave results unread, while every byte a
// reading client takes, and every call that ends, leaves the ledger.
#include "server/rpc/unread_results.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "client/job_client.h"
#include "server/engine/backends/cpu/cpu_backend.h"
#include "server/rpc/call_context.h"
#include "server/rpc/job_service.h"
#include "server/rpc/status_mapping.h"
#include "tests/testing/random_tensor.h"

namespace gpupipe::rpc {
namespace {

using gpupipe::testing::AsBytes;
using gpupipe::testing::AsFloats;
using Clock = std::chrono::steady_clock;

constexpr int64_t kMib = int64_t{1} << 20;

TEST(UnreadResults, RefusesAClientAtItsLimitAndEveryoneAtTheTotal) {
  UnreadResults unread({/*max_bytes=*/10 * kMib, /*max_client_bytes=*/4 * kMib});
  EXPECT_TRUE(unread.Check("a").ok());
  unread.Hold("a", 4 * kMib - 1);
  EXPECT_TRUE(unread.Check("a").ok());
  unread.Hold("a", 1);
  const absl::Status full = unread.Check("a");
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("client 'a' has 4.0 MiB"), std::string::npos) << full;
  EXPECT_NE(full.message().find("(gpupiped --max-client-unread-mib)"), std::string::npos) << full;
  EXPECT_TRUE(unread.Check("b").ok());  // another client is not held to a's bytes

  unread.Hold("b", 3 * kMib);
  unread.Hold("c", 3 * kMib);
  // At the total, a client holding unread results is refused; one holding none is not.
  const absl::Status busy = unread.Check("b");
  EXPECT_EQ(busy.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(busy.message().find("(gpupiped --max-unread-mib)"), std::string::npos) << busy;
  EXPECT_TRUE(unread.Check("d").ok());
  EXPECT_EQ(unread.total_bytes(), 10 * kMib);
  EXPECT_EQ(unread.clients().size(), 3u);

  unread.Release("a", 4 * kMib);
  unread.Release("b", 3 * kMib);
  EXPECT_TRUE(unread.Check("a").ok());
  EXPECT_TRUE(unread.Check("d").ok());
  EXPECT_EQ(unread.total_bytes(), 3 * kMib);
  ASSERT_EQ(unread.clients().size(), 1u);  // clients with nothing held are forgotten
  EXPECT_EQ(unread.clients()[0].first, "c");
}

TEST(UnreadResults, NamesAnAnonymousClient) {
  UnreadResults unread({kMib, kMib});
  unread.Hold("", kMib);
  EXPECT_NE(unread.Check("").message().find("an anonymous client"), std::string::npos);
}

// The service with the CPU backend, small unread limits, and a client whose receive window
// never grows (no BDP probing), so that a call it does not read holds its result on the server.
class UnreadServiceTest : public ::testing::Test {
 protected:
  void SetUp() override { Start({/*max_bytes=*/64 * kMib, /*max_client_bytes=*/3 * kMib}); }

  // Two lanes a level: a call whose reader stalls holds its job's lane until the reader idle
  // timeout, and the other lane serves the calls that come meanwhile.
  void Start(UnreadLimits limits) {
    engine::CpuBackendOptions lanes;
    lanes.lanes_per_level = 2;
    engine_ = engine::Engine::Create(engine::CreateCpuBackend(lanes), engine::EngineOptions{});
    JobServiceOptions options{4, "test"};
    options.unread = limits;
    service_ = std::make_unique<JobServiceImpl>(engine_.get(), options);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(service_.get());
    builder.SetMaxReceiveMessageSize(16 << 20);
    server_ = builder.BuildAndStart();
    ASSERT_NE(port_, 0);
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    args.SetMaxReceiveMessageSize(-1);
    stub_ = v1::JobService::NewStub(grpc::CreateCustomChannel(
        "127.0.0.1:" + std::to_string(port_), grpc::InsecureChannelCredentials(), args));
  }
  void TearDown() override {
    for (auto& call : stalled_) call->context.TryCancel();
    stalled_.clear();
    server_->Shutdown();
    engine_->Shutdown();
    // The service (its stall watch asks the engine) goes before the engine it serves, which
    // Start replaces.
    server_.reset();
    service_.reset();
  }

  // A job whose result is `mib` MiB.
  static v1::SubmitRequest Relu(int64_t mib) {
    v1::SubmitRequest request;
    request.mutable_input()->set_dtype(v1::DTYPE_FLOAT32);
    request.mutable_input()->add_shape(mib * kMib / 4);
    request.mutable_input()->set_data(std::string(static_cast<size_t>(mib * kMib), '\0'));
    request.add_ops()->mutable_relu();
    return request;
  }

  // A Submit call whose events the client never reads.
  struct StalledCall {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader;
  };
  void Stall(const v1::SubmitRequest& request) {
    auto call = std::make_unique<StalledCall>();
    call->reader = stub_->Submit(&call->context, request);
    stalled_.push_back(std::move(call));
  }

  int64_t UnreadBytes() const {
    const v1::StatsResponse stats = service_->Stats();
    for (const v1::PoolStats& pool : stats.pools()) {
      if (pool.name() == "unread_results") return pool.used_bytes();
    }
    return -1;
  }
  // Waits (up to 10 s) until the unread pool satisfies `done`; its last value.
  template <typename Pred>
  int64_t WaitForUnread(Pred done) const {
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    int64_t bytes = UnreadBytes();
    while (!done(bytes) && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      bytes = UnreadBytes();
    }
    return bytes;
  }

  // A whole Submit call of `request`, read to its end, as client `client_id` (empty: none).
  grpc::Status SubmitAndRead(const v1::SubmitRequest& request, const std::string& client_id,
                             std::string* accepted_mark) {
    grpc::ClientContext context;
    if (!client_id.empty()) context.AddMetadata(kClientIdMetadataKey, client_id);
    auto reader = stub_->Submit(&context, request);
    v1::JobEvent event;
    while (reader->Read(&event)) {
    }
    const grpc::Status status = reader->Finish();
    const auto& trailers = context.GetServerTrailingMetadata();
    const auto mark = trailers.find(kAcceptedMetadataKey);
    *accepted_mark = mark == trailers.end() ? "" : std::string(mark->second.data(),
                                                               mark->second.size());
    return status;
  }

  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<JobServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::JobService::Stub> stub_;
  int port_ = 0;
  std::vector<std::unique_ptr<StalledCall>> stalled_;
};

TEST_F(UnreadServiceTest, AClientThatLeavesResultsUnreadIsRefusedUntilTheyAreGone) {
  for (int i = 0; i < 3; ++i) Stall(Relu(1));
  // Their jobs are done (no longer counted by admission), their results all held.
  EXPECT_EQ(WaitForUnread([](int64_t b) { return b >= 3 * kMib; }), 3 * kMib);
  EXPECT_EQ(engine_->jobs_in_flight(), 0);

  std::string mark;
  grpc::Status refused = SubmitAndRead(Relu(1), "", &mark);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(refused.error_message().find("--max-client-unread-mib"), std::string::npos)
      << refused.error_message();
  EXPECT_EQ(mark, "0");  // no job ran: the client may send it again

  // The other unary and streaming calls are refused alike.
  {
    grpc::ClientContext context;
    v1::CompleteJob response;
    const grpc::Status small = stub_->SubmitSmall(&context, Relu(1), &response);
    EXPECT_EQ(small.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << small.error_message();
  }
  {
    grpc::ClientContext context;
    auto run = stub_->Run(&context);
    v1::RunRequest spec;
    *spec.mutable_spec() = Relu(1);
    spec.mutable_spec()->mutable_input()->clear_data();
    run->Write(spec);
    run->WritesDone();
    v1::JobEvent event;
    while (run->Read(&event)) {
    }
    const grpc::Status status = run->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
    EXPECT_NE(status.error_message().find("--max-client-unread-mib"), std::string::npos);
    const auto& trailers = context.GetServerTrailingMetadata();
    const auto mark = trailers.find(kAcceptedMetadataKey);
    ASSERT_NE(mark, trailers.end());  // a Run refused at its spec is marked as Submit's are
    EXPECT_EQ(mark->second, "0");
  }

  // Stats name the bytes, the client, and the refusals.
  const v1::StatsResponse stats = service_->Stats();
  bool listed = false;
  for (const v1::ClientStats& c : stats.clients()) {
    if (c.unread_bytes() == 3 * kMib) listed = true;
  }
  EXPECT_TRUE(listed);
  EXPECT_EQ(stats.rejected().at("max-client-unread-mib"), 3);

  // Another client is not held to this one's results; its own are read, so it holds none.
  ASSERT_TRUE(SubmitAndRead(Relu(1), "other", &mark).ok());

  // The unread calls end (the client cancels them): their bytes go, and the client is served.
  for (auto& call : stalled_) call->context.TryCancel();
  EXPECT_EQ(WaitForUnread([](int64_t b) { return b == 0; }), 0);
  stalled_.clear();
  EXPECT_TRUE(SubmitAndRead(Relu(1), "", &mark).ok());
  EXPECT_EQ(UnreadBytes(), 0);
}

TEST_F(UnreadServiceTest, ADrainingDaemonAnswersUnavailableFirst) {
  // A client over its limit that reaches a draining daemon gets the marked UNAVAILABLE, which
  // clients answer by sending the job to another daemon, not the ledger's refusal.
  for (int i = 0; i < 3; ++i) Stall(Relu(1));
  EXPECT_EQ(WaitForUnread([](int64_t b) { return b >= 3 * kMib; }), 3 * kMib);
  ASSERT_TRUE(engine_->Drain(std::chrono::milliseconds(1000)));
  std::string mark;
  const grpc::Status status = SubmitAndRead(Relu(1), "", &mark);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
  EXPECT_EQ(mark, "0");
}

TEST_F(UnreadServiceTest, AllClientsTogetherAreBoundedToo) {
  TearDown();
  Start({/*max_bytes=*/2 * kMib, /*max_client_bytes=*/64 * kMib});
  Stall(Relu(2));
  EXPECT_EQ(WaitForUnread([](int64_t b) { return b >= 2 * kMib; }), 2 * kMib);
  // The client holding the results is refused at the total, under its own limit...
  std::string mark;
  const grpc::Status busy = SubmitAndRead(Relu(1), "", &mark);
  EXPECT_EQ(busy.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(busy.error_message().find("--max-unread-mib"), std::string::npos)
      << busy.error_message();
  EXPECT_EQ(mark, "0");
  EXPECT_EQ(service_->Stats().rejected().at("max-unread-mib"), 1);
  // ... and a client that holds none is not refused for it.
  EXPECT_TRUE(SubmitAndRead(Relu(1), "someone-else", &mark).ok());
}

TEST_F(UnreadServiceTest, ARunningJobsResultsDoNotCount) {
  // A job whose reader reads nothing fills its call's event queue and waits: it still counts
  // against the engine's admission (--max-client-jobs), and its results are not unread ones.
  v1::SubmitRequest many_chunks = Relu(8);
  many_chunks.mutable_options()->set_chunk_bytes(1 << 20);
  Stall(many_chunks);
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (engine_->jobs_in_flight() != 1 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_EQ(engine_->jobs_in_flight(), 1);  // waiting for room in its queue
  EXPECT_EQ(UnreadBytes(), 0);
  // The same client is served meanwhile, on the other lane: well before the stalled call's
  // reader idle timeout would end it.
  std::string mark;
  const auto start = Clock::now();
  EXPECT_TRUE(SubmitAndRead(Relu(1), "", &mark).ok());
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  // The stalled job still waits. (The served job's result reaches its client a moment before
  // the engine stops counting it, so the count may need that moment to fall back to one.)
  const auto served = Clock::now() + std::chrono::seconds(5);
  while (engine_->jobs_in_flight() > 1 && Clock::now() < served) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(engine_->jobs_in_flight(), 1);
  // Once the call ends (here: cancelled), the job ends too and nothing stays counted.
  stalled_.front()->context.TryCancel();
  EXPECT_EQ(WaitForUnread([&](int64_t b) { return b == 0 && engine_->jobs_in_flight() == 0; }),
            0);
  EXPECT_EQ(engine_->jobs_in_flight(), 0);
}

TEST_F(UnreadServiceTest, ReadResultsAndEndedCallsLeaveNothingCounted) {
  // Jobs of many chunks (each write's bytes go when it completes), small ones as one
  // CompleteJob, unary calls, an upload, a failed job and a cancelled one: every byte held for
  // them is released.
  auto client = client::JobClient::Create("127.0.0.1:" + std::to_string(port_));
  ASSERT_TRUE(client.ok()) << client.status();
  const std::vector<float> x = gpupipe::testing::RandomFloats(3 << 18, 7);
  v1::SubmitRequest many_chunks = Relu(0);
  many_chunks.mutable_input()->set_shape(0, static_cast<int64_t>(x.size()));
  many_chunks.mutable_input()->set_data(AsBytes(x));
  many_chunks.mutable_options()->set_chunk_bytes(256 << 10);
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<client::JobResult> r = (*client)->Submit(many_chunks);
    ASSERT_TRUE(r.ok()) << r.status();
    std::vector<float> want = x;
    for (float& v : want) v = v > 0 ? v : 0;
    EXPECT_EQ(AsFloats(r->output.data()), want);
  }
  v1::SubmitRequest small = Relu(0);
  small.mutable_input()->set_shape(0, 4);
  small.mutable_input()->set_data(AsBytes(std::vector<float>{1, -2, 3, -4}));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE((*client)->Submit(small).ok());
  v1::SubmitRequest spec = small;
  spec.mutable_input()->clear_data();
  ASSERT_TRUE((*client)->Run(spec, 16, [&](char* buffer, int64_t n) {
                         std::memcpy(buffer, small.input().data().data(), static_cast<size_t>(n));
                         return absl::OkStatus();
                       })
                  .ok());
  {
    // A deadline that passes while the job is queued or running: the job fails.
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(1));
    auto reader = stub_->Submit(&context, Relu(4));
    v1::JobEvent event;
    while (reader->Read(&event)) {
    }
    EXPECT_FALSE(reader->Finish().ok());
  }
  {
    grpc::ClientContext context;
    auto reader = stub_->Submit(&context, Relu(2));
    v1::JobEvent event;
    ASSERT_TRUE(reader->Read(&event));
    context.TryCancel();
    while (reader->Read(&event)) {
    }
    (void)reader->Finish();
  }
  EXPECT_EQ(WaitForUnread([](int64_t b) { return b == 0; }), 0);
  EXPECT_TRUE(service_->Stats().rejected().count("max-client-unread-mib") == 0);
}

}  // namespace
}  // namespace gpupipe::rpc
