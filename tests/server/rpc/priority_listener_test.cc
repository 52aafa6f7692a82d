// The priority listener in-process: its server beside the callback one, both over one engine,
// as gpupiped builds them, driven by the client library and by raw stubs.
#include "server/rpc/priority_listener.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/proto_buffer_writer.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <future>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "client/job_client.h"
#include "server/engine/backends/cpu/cpu_backend.h"
#include "server/rpc/status_mapping.h"
#include "tests/testing/random_tensor.h"
#include "tests/testing/recording_sink.h"

namespace gpupipe::rpc {
namespace {

using gpupipe::testing::AsBytes;
using gpupipe::testing::AsFloats;
using gpupipe::testing::RecordingSink;

constexpr int kMaxCalls = 2;
constexpr int kThreads = 3;

class PriorityListenerTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(nullptr); }

  // (Re)starts the engine and both servers; `authenticator` as JobServiceOptions'.
  void Start(const Authenticator* authenticator) {
    Stop();
    // As gpupiped: every builder takes reflection's plugin, the listener's too.
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
    engine::EngineOptions options;
    options.limits.max_input_bytes = 8 << 20;
    engine_ = engine::Engine::Create(engine::CreateCpuBackend({}), options);  // 1 lane a level
    JobServiceOptions service_options{4, "test"};
    service_options.authenticator = authenticator;
    service_options.reader_idle_timeout = std::chrono::milliseconds(400);
    service_ = std::make_unique<JobServiceImpl>(engine_.get(), service_options);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(port_, 0);
    grpc::ServerBuilder priority_builder;
    priority_builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                                      &priority_port_);
    PriorityListenerOptions listener_options;
    listener_options.max_calls = kMaxCalls;
    listener_options.threads = kThreads;
    listener_ = std::make_unique<PriorityListener>(service_.get(), listener_options,
                                                   &priority_builder);
    // No thread at all for gRPC's sync API, which a sync call would need: the listener serves
    // every call, refusals included, on its own threads.
    quota_ = std::make_unique<grpc::ResourceQuota>("priority-test");
    quota_->SetMaxThreads(1);
    priority_builder.SetResourceQuota(*quota_);
    priority_server_ = priority_builder.BuildAndStart();
    ASSERT_NE(priority_port_, 0);
    listener_->Start();
    service_->SetPriorityListener("127.0.0.1:" + std::to_string(priority_port_),
                                  engine::Priority::kHigh, kMaxCalls, kThreads);
    priority_stub_ = v1::JobService::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(priority_port_), grpc::InsecureChannelCredentials()));
  }

  // Stops and drops everything, each part before what it uses.
  void Stop() {
    if (server_) server_->Shutdown();
    if (priority_server_) priority_server_->Shutdown();
    if (listener_) listener_->Stop();
    if (engine_) engine_->Shutdown();
    server_.reset();
    priority_server_.reset();
    listener_.reset();
    service_.reset();
    engine_.reset();
  }

  void TearDown() override { Stop(); }

  static v1::SubmitRequest Request(const std::vector<float>& x, v1::Priority priority) {
    v1::SubmitRequest request;
    request.mutable_input()->set_dtype(v1::DTYPE_FLOAT32);
    request.mutable_input()->add_shape(1);
    request.mutable_input()->add_shape(static_cast<int64_t>(x.size()));
    request.mutable_input()->set_data(AsBytes(x));
    request.add_ops()->mutable_softmax();
    request.set_priority(priority);
    return request;
  }

  // A high-priority job that holds the engine's one high lane until the sink's gate opens.
  std::shared_ptr<RecordingSink> BlockHighLane() {
    auto blocker = std::make_shared<RecordingSink>();
    blocker->SetGateOpen(false);
    engine::JobSpec spec;
    spec.shape = {100};
    spec.ops = {{engine::OpKind::kRelu}};
    spec.priority = engine::Priority::kHigh;
    std::string input = AsBytes(std::vector<float>(100, 1.0f));
    EXPECT_TRUE(engine_->Submit(std::move(spec), input, blocker).ok());
    while (blocker->chunks() == 0 && !blocker->WaitDone(std::chrono::milliseconds(1))) {
    }
    return blocker;
  }

  // Waits until `n` high-priority jobs wait in the engine's queue.
  bool WaitQueuedHigh(int n) {
    for (int i = 0; i < 2000; ++i) {
      for (const engine::EngineStats::Level& level : engine_->Stats(false).levels) {
        if (level.priority == engine::Priority::kHigh && level.queued == n) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return false;
  }

  // kMaxCalls calls whose jobs wait behind BlockHighLane's: the listener is full. Empty where
  // they did not all come to wait.
  std::vector<std::future<grpc::Status>> FillWithWaitingCalls() {
    std::vector<std::future<grpc::Status>> waiting;
    for (int i = 0; i < kMaxCalls; ++i) {
      waiting.push_back(
          SubmitSmallAsync(Request({1, 2, 3}, v1::PRIORITY_HIGH), std::chrono::seconds(30)));
    }
    if (!WaitQueuedHigh(kMaxCalls)) waiting.clear();
    return waiting;
  }

  // A SubmitSmall call on the priority listener, on a thread of its own; with `token`, its
  // bearer token.
  std::future<grpc::Status> SubmitSmallAsync(v1::SubmitRequest request,
                                             std::chrono::milliseconds deadline,
                                             const std::string& token = "") {
    return std::async(std::launch::async, [this, request = std::move(request), deadline, token] {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + deadline);
      if (!token.empty()) context.AddMetadata(kAuthorizationMetadataKey, "Bearer " + token);
      v1::CompleteJob response;
      return priority_stub_->SubmitSmall(&context, request, &response);
    });
  }

  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<JobServiceImpl> service_;
  std::unique_ptr<PriorityListener> listener_;
  std::unique_ptr<grpc::ResourceQuota> quota_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<grpc::Server> priority_server_;
  std::unique_ptr<v1::JobService::Stub> priority_stub_;
  int port_ = 0;
  int priority_port_ = 0;
};

std::vector<float> Softmax(const std::vector<float>& x) {
  float max = x[0];
  for (float v : x) max = std::max(max, v);
  double sum = 0;
  for (float v : x) sum += std::exp(static_cast<double>(v - max));
  std::vector<float> y;
  for (float v : x) y.push_back(static_cast<float>(std::exp(static_cast<double>(v - max)) / sum));
  return y;
}

TEST_F(PriorityListenerTest, TheClientSendsHighPrioritySmallJobsToTheListener) {
  const uint64_t seed = gpupipe::testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  client::ClientOptions options;
  options.priority_target = "127.0.0.1:" + std::to_string(priority_port_);
  auto client = client::JobClient::Create("127.0.0.1:" + std::to_string(port_), options);
  ASSERT_TRUE(client.ok()) << client.status();
  for (v1::Priority priority : {v1::PRIORITY_HIGH, v1::PRIORITY_LOW}) {
    const std::vector<float> x = gpupipe::testing::RandomFloats(1024, seed + priority);
    std::promise<absl::StatusOr<client::JobResult>> done;
    (*client)->SubmitAsync(Request(x, priority), [&](absl::StatusOr<client::JobResult> r) {
      done.set_value(std::move(r));
    });
    absl::StatusOr<client::JobResult> result = done.get_future().get();
    ASSERT_TRUE(result.ok()) << result.status();
    const std::vector<float> y = AsFloats(result->output.data());
    const std::vector<float> want = Softmax(x);
    ASSERT_EQ(y.size(), want.size());
    for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], want[i], 1e-6f) << i;
    EXPECT_TRUE(result->has_timing);
    // The high job went to the priority listener, the low one to the main address.
    const int want_port = priority == v1::PRIORITY_HIGH ? priority_port_ : port_;
    EXPECT_NE(result->peer.find(":" + std::to_string(want_port)), std::string::npos)
        << result->peer;
  }
}

TEST_F(PriorityListenerTest, TheMainAddressDescribesTheListener) {
  auto client = client::JobClient::Create("127.0.0.1:" + std::to_string(port_));
  ASSERT_TRUE(client.ok());
  absl::StatusOr<v1::DescribeResponse> d = (*client)->Describe();
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_TRUE(d->has_priority_listener());
  EXPECT_EQ(d->priority_listener().address(), "127.0.0.1:" + std::to_string(priority_port_));
  EXPECT_EQ(d->priority_listener().lowest(), v1::PRIORITY_HIGH);
  EXPECT_EQ(d->priority_listener().max_calls(), kMaxCalls);
  EXPECT_EQ(d->priority_listener().threads(), kThreads);
}

TEST_F(PriorityListenerTest, LowerPrioritiesAreRefusedAsNotAccepted) {
  for (v1::Priority priority : {v1::PRIORITY_UNSPECIFIED, v1::PRIORITY_LOW, v1::PRIORITY_NORMAL}) {
    grpc::ClientContext context;
    v1::CompleteJob response;
    const grpc::Status status =
        priority_stub_->SubmitSmall(&context, Request({1, 2, 3}, priority), &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << priority;
    EXPECT_NE(status.error_message().find("main address"), std::string::npos)
        << status.error_message();
    const auto& trailers = context.GetServerTrailingMetadata();
    const auto mark = trailers.find(kAcceptedMetadataKey);
    ASSERT_NE(mark, trailers.end());
    EXPECT_EQ(mark->second, "0");
  }
  EXPECT_EQ(engine_->Stats(false).refused["priority-min"], 3);
  // A bad request of the right priority is the request's fault, said as on the main address.
  v1::SubmitRequest bad = Request({1, 2, 3}, v1::PRIORITY_HIGH);
  bad.mutable_input()->mutable_data()->pop_back();
  grpc::ClientContext context;
  v1::CompleteJob response;
  EXPECT_EQ(priority_stub_->SubmitSmall(&context, bad, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(PriorityListenerTest, OnlySubmitSmallIsServed) {
  grpc::ClientContext submit_context;
  std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader =
      priority_stub_->Submit(&submit_context, Request({1}, v1::PRIORITY_HIGH));
  v1::JobEvent event;
  EXPECT_FALSE(reader->Read(&event));
  const grpc::Status submit = reader->Finish();
  EXPECT_EQ(submit.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(submit.error_message().find("SubmitSmall only"), std::string::npos);
  grpc::ClientContext run_context;
  auto run = priority_stub_->Run(&run_context);
  run->WritesDone();
  EXPECT_EQ(run->Finish().error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  grpc::ClientContext describe_context;
  v1::DescribeResponse description;
  const grpc::Status describe =
      priority_stub_->Describe(&describe_context, v1::DescribeRequest(), &description);
  EXPECT_EQ(describe.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_NE(describe.error_message().find("main address"), std::string::npos);
}

// A flood of other methods' calls from many clients at once, some of them streams that never
// half-close: each is refused as it comes, with its own status, and SubmitSmall serves on.
TEST_F(PriorityListenerTest, AFloodOfOtherMethodsIsRefusedEveryTimeWithItsOwnStatus) {
  constexpr int kThreads = 8;
  constexpr int kCallsEach = 30;
  std::vector<std::future<int>> wrong;
  for (int t = 0; t < kThreads; ++t) {
    wrong.push_back(std::async(std::launch::async, [&] {
      int failures = 0;
      for (int i = 0; i < kCallsEach; ++i) {
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
        grpc::Status status;
        grpc::StatusCode expected = grpc::StatusCode::FAILED_PRECONDITION;
        if (i % 3 == 0) {
          auto reader = priority_stub_->Submit(&context, Request({1}, v1::PRIORITY_HIGH));
          v1::JobEvent event;
          while (reader->Read(&event)) {
          }
          status = reader->Finish();
        } else if (i % 3 == 1) {
          auto run = priority_stub_->Run(&context);  // never half-closed
          v1::JobEvent event;
          while (run->Read(&event)) {
          }
          status = run->Finish();
        } else {
          v1::StatsResponse stats;
          status = priority_stub_->GetStats(&context, v1::StatsRequest(), &stats);
          expected = grpc::StatusCode::UNIMPLEMENTED;
        }
        const auto& trailers = context.GetServerTrailingMetadata();
        const auto mark = trailers.find(kAcceptedMetadataKey);
        if (status.error_code() != expected || mark == trailers.end() || mark->second != "0") {
          ++failures;
          ADD_FAILURE() << "call " << i << ": " << status.error_code() << " "
                        << status.error_message();
        }
      }
      return failures;
    }));
  }
  for (auto& f : wrong) EXPECT_EQ(f.get(), 0);
  grpc::ClientContext context;
  v1::CompleteJob response;
  EXPECT_TRUE(
      priority_stub_->SubmitSmall(&context, Request({1, 2, 3}, v1::PRIORITY_HIGH), &response)
          .ok());
}

TEST_F(PriorityListenerTest, ATokenIsCheckedBeforeThePriority) {
  absl::StatusOr<std::shared_ptr<const TokenTable>> tokens =
      TokenTable::Parse("alice:0123456789abcdef0123\n");
  ASSERT_TRUE(tokens.ok());
  Authenticator authenticator(*tokens);
  Start(&authenticator);
  for (v1::Priority priority : {v1::PRIORITY_LOW, v1::PRIORITY_HIGH}) {
    grpc::ClientContext context;
    v1::CompleteJob response;
    EXPECT_EQ(priority_stub_->SubmitSmall(&context, Request({1}, priority), &response)
                  .error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  grpc::ClientContext context;
  context.AddMetadata(kAuthorizationMetadataKey, "Bearer 0123456789abcdef0123");
  v1::CompleteJob response;
  const grpc::Status status =
      priority_stub_->SubmitSmall(&context, Request({1, 2}, v1::PRIORITY_HIGH), &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(AsFloats(response.chunk().data()).size(), 2u);
}

TEST_F(PriorityListenerTest, CallsBeyondTheLimitAreRefusedAndTheWaitingOnesFinish) {
  std::shared_ptr<RecordingSink> blocker = BlockHighLane();
  // Each call holds its place while its job waits for the lane.
  std::vector<std::future<grpc::Status>> waiting = FillWithWaitingCalls();
  ASSERT_EQ(waiting.size(), static_cast<size_t>(kMaxCalls));
  // A shutdown would wait for them.
  EXPECT_FALSE(service_->WaitForCalls(std::chrono::steady_clock::now() +
                                      std::chrono::milliseconds(50)));
  EXPECT_EQ(listener_->calls_in_progress(), kMaxCalls);
  grpc::ClientContext context;
  v1::CompleteJob response;
  const grpc::Status over =
      priority_stub_->SubmitSmall(&context, Request({1, 2, 3}, v1::PRIORITY_HIGH), &response);
  EXPECT_EQ(over.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << over.error_message();
  EXPECT_NE(over.error_message().find("--priority-max-calls"), std::string::npos);
  EXPECT_EQ(context.GetServerTrailingMetadata().find(kAcceptedMetadataKey)->second, "0");
  EXPECT_EQ(engine_->Stats(false).refused["priority-max-calls"], 1);
  blocker->SetGateOpen(true);
  for (std::future<grpc::Status>& call : waiting) {
    const grpc::Status status = call.get();
    EXPECT_TRUE(status.ok()) << status.error_message();
  }
  EXPECT_TRUE(service_->WaitForCalls(std::chrono::steady_clock::now() + std::chrono::seconds(5)));
}

TEST_F(PriorityListenerTest, ACallWithoutATokenTakesNoPlaceAndIsRefusedForThatWhenFull) {
  absl::StatusOr<std::shared_ptr<const TokenTable>> tokens =
      TokenTable::Parse("alice:0123456789abcdef0123\n");
  ASSERT_TRUE(tokens.ok());
  Authenticator authenticator(*tokens);
  Start(&authenticator);
  const std::string token = "0123456789abcdef0123";
  std::shared_ptr<RecordingSink> blocker = BlockHighLane();
  // While one caller with a token waits, calls without one come and go: they take no place.
  std::vector<std::future<grpc::Status>> waiting;
  waiting.push_back(
      SubmitSmallAsync(Request({1, 2, 3}, v1::PRIORITY_HIGH), std::chrono::seconds(30), token));
  ASSERT_TRUE(WaitQueuedHigh(1));
  std::vector<std::future<grpc::Status>> without;
  for (int i = 0; i < 2 * kMaxCalls; ++i) {
    without.push_back(
        SubmitSmallAsync(Request({1, 2, 3}, v1::PRIORITY_HIGH), std::chrono::seconds(30)));
  }
  for (std::future<grpc::Status>& call : without) {
    EXPECT_EQ(call.get().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  EXPECT_EQ(listener_->calls_in_progress(), 1);
  // The other places go to callers with a token, and the listener is full.
  for (int i = 1; i < kMaxCalls; ++i) {
    waiting.push_back(SubmitSmallAsync(Request({1, 2, 3}, v1::PRIORITY_HIGH),
                                       std::chrono::seconds(30), token));
  }
  ASSERT_TRUE(WaitQueuedHigh(kMaxCalls));
  EXPECT_EQ(listener_->calls_in_progress(), kMaxCalls);
  {
    // Full: a call without a token is told that it has none, not that the listener is full.
    grpc::ClientContext context;
    v1::CompleteJob response;
    const grpc::Status status =
        priority_stub_->SubmitSmall(&context, Request({1}, v1::PRIORITY_HIGH), &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
    const auto mark = context.GetServerTrailingMetadata().find(kAcceptedMetadataKey);
    ASSERT_NE(mark, context.GetServerTrailingMetadata().end());
    EXPECT_EQ(mark->second, "0");
  }
  {
    grpc::ClientContext context;
    context.AddMetadata(kAuthorizationMetadataKey, "Bearer " + token);
    v1::CompleteJob response;
    const grpc::Status status =
        priority_stub_->SubmitSmall(&context, Request({1}, v1::PRIORITY_HIGH), &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  }
  EXPECT_EQ(engine_->Stats(false).refused["priority-max-calls"], 1);
  blocker->SetGateOpen(true);
  for (std::future<grpc::Status>& call : waiting) {
    const grpc::Status status = call.get();
    EXPECT_TRUE(status.ok()) << status.error_message();
  }
  EXPECT_EQ(service_->Stats(false).rejected().at("unauthenticated"), 2 * kMaxCalls + 1);
  EXPECT_TRUE(service_->WaitForCalls(std::chrono::steady_clock::now() + std::chrono::seconds(5)));
}

TEST_F(PriorityListenerTest, TheClientSendsAJobTheFullListenerRefusedToTheMainAddress) {
  client::ClientOptions options;
  options.priority_target = "127.0.0.1:" + std::to_string(priority_port_);
  auto client = client::JobClient::Create("127.0.0.1:" + std::to_string(port_), options);
  ASSERT_TRUE(client.ok()) << client.status();
  std::shared_ptr<RecordingSink> blocker = BlockHighLane();
  // Each call holds its place while its job waits for the lane.
  std::vector<std::future<grpc::Status>> waiting = FillWithWaitingCalls();
  ASSERT_EQ(waiting.size(), static_cast<size_t>(kMaxCalls));
  std::promise<absl::StatusOr<client::JobResult>> done;
  (*client)->SubmitAsync(Request({1, 2}, v1::PRIORITY_HIGH),
                         [&](absl::StatusOr<client::JobResult> r) { done.set_value(std::move(r)); });
  ASSERT_TRUE(WaitQueuedHigh(kMaxCalls + 1));  // through the main address
  blocker->SetGateOpen(true);
  absl::StatusOr<client::JobResult> result = done.get_future().get();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(AsFloats(result->output.data()).size(), 2u);
  EXPECT_NE(result->peer.find(":" + std::to_string(port_)), std::string::npos) << result->peer;
  for (std::future<grpc::Status>& call : waiting) EXPECT_TRUE(call.get().ok());
}

TEST_F(PriorityListenerTest, CallsCancelledAnywhereOnTheirWayAllEnd) {
  // Deadlines of a millisecond or two end calls before, while and after they start, on both
  // of the listener's threads at once; every one ends and gives its place back.
  std::vector<std::thread> clients;
  for (int t = 0; t < 8; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() +
                             std::chrono::microseconds(200 + 300 * ((t + i) % 8)));
        v1::CompleteJob response;
        priority_stub_->SubmitSmall(&context, Request({1, 2, 3}, v1::PRIORITY_HIGH), &response);
      }
    });
  }
  for (std::thread& c : clients) c.join();
  for (int i = 0; i < 500 && listener_->calls_in_progress() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(listener_->calls_in_progress(), 0);
  EXPECT_TRUE(service_->WaitForCalls(std::chrono::steady_clock::now() + std::chrono::seconds(5)));
  grpc::ClientContext context;
  v1::CompleteJob response;
  const grpc::Status status =
      priority_stub_->SubmitSmall(&context, Request({1, 2, 3}, v1::PRIORITY_HIGH), &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST_F(PriorityListenerTest, AShutdownEndsTheCallsInProgress) {
  std::shared_ptr<RecordingSink> blocker = BlockHighLane();
  // Each call holds its place while its job waits for the lane.
  std::vector<std::future<grpc::Status>> waiting = FillWithWaitingCalls();
  ASSERT_EQ(waiting.size(), static_cast<size_t>(kMaxCalls));
  // As gpupiped stops: the server with a deadline, then the listener, whose calls then end.
  const auto start = std::chrono::steady_clock::now();
  priority_server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(100));
  listener_->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(listener_->calls_in_progress(), 0);
  for (std::future<grpc::Status>& call : waiting) EXPECT_FALSE(call.get().ok());
  blocker->SetGateOpen(true);
}

TEST_F(PriorityListenerTest, ACallPastItsDeadlineGivesItsPlaceBack) {
  std::shared_ptr<RecordingSink> blocker = BlockHighLane();
  // More calls than the limit, one after another: each ends at its deadline and frees its
  // place, so none finds the listener full.
  for (int i = 0; i < kMaxCalls + 2; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const grpc::Status status =
        SubmitSmallAsync(Request({1, 2, 3}, v1::PRIORITY_HIGH), std::chrono::milliseconds(100))
            .get();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  }
  blocker->SetGateOpen(true);
  ASSERT_TRUE(blocker->WaitDone());
  const grpc::Status after =
      SubmitSmallAsync(Request({1, 2, 3}, v1::PRIORITY_HIGH), std::chrono::seconds(30)).get();
  EXPECT_TRUE(after.ok()) << after.error_message();
  EXPECT_TRUE(service_->WaitForCalls(std::chrono::steady_clock::now() + std::chrono::seconds(5)));
  EXPECT_EQ(listener_->calls_in_progress(), 0);
}

// A client that never reads its reply (a raw call that sends its request and no more, over a
// connection whose receive window stays at 64 KiB) cannot keep its place: the stall watch
// cancels the call after the reader idle timeout (the fixture's, short).
TEST_F(PriorityListenerTest, AReaderThatNeverReadsLosesItsPlace) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  auto channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(priority_port_),
                                           grpc::InsecureChannelCredentials(), args);
  grpc::GenericStub generic(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext context;
  auto call = generic.PrepareCall(&context, "/gpupipe.v1.JobService/SubmitSmall", &cq);
  void* tag = nullptr;
  bool ok = false;
  call->StartCall(&context);
  ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
  // 256 KiB back: more than the window.
  v1::SubmitRequest request = Request(std::vector<float>(1 << 16, 1.0f), v1::PRIORITY_HIGH);
  request.clear_ops();
  request.add_ops()->mutable_relu();
  grpc::ByteBuffer buffer;
  bool own_buffer = false;
  const grpc::Status serialized =
      grpc::GenericSerialize<grpc::ProtoBufferWriter, v1::SubmitRequest>(request, &buffer,
                                                                          &own_buffer);
  ASSERT_TRUE(serialized.ok());
  call->Write(buffer, &buffer);
  ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
  call->WritesDone(&call);
  ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
  // The job ran and its reply waits for the reader.
  bool ran = false;
  for (int i = 0; i < 500 && !ran; ++i) {
    for (const engine::EngineStats::Level& level : engine_->Stats(false).levels) {
      if (level.priority == engine::Priority::kHigh && level.done.jobs.by_status.count("OK")) {
        ran = true;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_TRUE(ran);
  EXPECT_EQ(listener_->calls_in_progress(), 1);
  const auto start = std::chrono::steady_clock::now();
  while (listener_->calls_in_progress() > 0 &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(listener_->calls_in_progress(), 0);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(200));
  context.TryCancel();
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
}

// A raw streaming call of `method` on `port` that sends `message` and half-closes: its status
// and how many messages came back.
std::pair<grpc::Status, int> RawStreamingCall(int port, const std::string& method,
                                              const std::string& message) {
  grpc::GenericStub generic(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                                grpc::InsecureChannelCredentials()));
  grpc::CompletionQueue cq;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto call = generic.PrepareCall(&context, method, &cq);
  void* tag = nullptr;
  bool ok = false;
  call->StartCall(&context);
  cq.Next(&tag, &ok);
  grpc::Slice slice(message);
  grpc::ByteBuffer out(&slice, 1);
  call->Write(out, &out);
  cq.Next(&tag, &ok);
  call->WritesDone(&call);
  cq.Next(&tag, &ok);
  int messages = 0;
  for (;;) {
    grpc::ByteBuffer in;
    call->Read(&in, &in);
    if (!cq.Next(&tag, &ok) || !ok) break;
    ++messages;
  }
  grpc::Status status;
  call->Finish(&status, &status);
  cq.Next(&tag, &ok);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return {status, messages};
}

// Reflection's service, a sync-API one that the plugin adds to every server, is the main
// address's only: on the listener it is refused like any other method, on its own threads.
TEST_F(PriorityListenerTest, ReflectionIsServedOnTheMainAddressOnly) {
  const std::string method = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";
  const std::string list_services("\x3a\x00", 2);  // ServerReflectionRequest{list_services: ""}
  const auto [main_status, main_messages] = RawStreamingCall(port_, method, list_services);
  EXPECT_TRUE(main_status.ok()) << main_status.error_message();
  EXPECT_EQ(main_messages, 1);
  const auto [status, messages] = RawStreamingCall(priority_port_, method, list_services);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_NE(status.error_message().find("main address"), std::string::npos);
  EXPECT_EQ(messages, 0);
}

}  // namespace
}  // namespace gpupipe::rpc

