// A Run split over several calls (RunRequest.stripes and join), in-process over a loopback port
// on the CPU backend: the client library's split runs give the bytes of one call, and raw
// calls that misbehave fail the job once, or refuse the run on all of its calls.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "client/job_client.h"
#include "server/engine/backends/cpu/cpu_backend.h"
#include "server/rpc/job_service.h"
#include "tests/testing/random_tensor.h"

namespace gpupipe::rpc {
namespace {

using RawStream = grpc::ClientReaderWriter<v1::RunRequest, v1::JobEvent>;

constexpr int kMaxRunStreams = 4;
constexpr int kMaxWaitingRuns = 3;
constexpr auto kTimeout = std::chrono::milliseconds(400);

class RunStripesTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(kTimeout); }

  // (Re)starts the engine and the service with `timeout` for uploads and runs' calls.
  void Start(std::chrono::milliseconds timeout) {
    if (server_) {
      server_->Shutdown();
      engine_->Shutdown();
      // The service (its stall watch asks the engine) goes before the engine it serves.
      server_.reset();
      service_.reset();
    }
    engine::EngineOptions options;
    options.limits.max_stream_input_bytes = 64 << 20;
    options.limits.upload_idle_timeout_ms = timeout.count();
    options.chunk_policy.min_chunk_bytes = 0;  // jobs that ask for small chunks
    options.on_job_done = [this](const engine::JobRecord& r) {
      std::lock_guard<std::mutex> lock(done_mu_);
      done_.push_back(r.status);
    };
    engine_ = engine::Engine::Create(engine::CreateCpuBackend({}), options);
    JobServiceOptions service_options{4, "test"};
    service_options.upload_idle_timeout = timeout;
    service_options.max_run_streams = kMaxRunStreams;
    service_options.waiting_runs.max_client_runs = kMaxWaitingRuns;
    service_ = std::make_unique<JobServiceImpl>(engine_.get(), service_options);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(port_, 0);
    target_ = "127.0.0.1:" + std::to_string(port_);
    channel_ = grpc::CreateChannel(target_, grpc::InsecureChannelCredentials());
    stub_ = v1::JobService::NewStub(channel_);
  }

  void TearDown() override {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (engine_->jobs_in_flight() != 0 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(engine_->jobs_in_flight(), 0);
    server_->Shutdown();
    engine_->Shutdown();
  }

  std::vector<absl::Status> Done() {
    std::lock_guard<std::mutex> lock(done_mu_);
    return done_;
  }
  // Waits up to 5 s for the engine to have logged `jobs` jobs, and a moment more for any
  // further one; true when exactly `jobs` ended.
  bool WaitForJobs(size_t jobs) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (Done().size() < jobs && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return Done().size() == jobs;
  }

  // [rows, cols] float32 through `op`, in chunks of `chunk_bytes` so that the result has many.
  static v1::SubmitRequest Spec(int64_t rows, int64_t cols, const std::string& op,
                                uint64_t chunk_bytes = 64 << 10) {
    v1::SubmitRequest request;
    request.mutable_input()->set_dtype(v1::DTYPE_FLOAT32);
    request.mutable_input()->add_shape(rows);
    request.mutable_input()->add_shape(cols);
    if (op == "relu") request.add_ops()->mutable_relu();
    if (op == "softmax") request.add_ops()->mutable_softmax();
    if (op == "sum") request.add_ops()->mutable_sum();
    request.mutable_options()->set_chunk_bytes(chunk_bytes);
    return request;
  }

  static absl::StatusOr<client::JobResult> Run(client::JobClient& client,
                                               const v1::SubmitRequest& spec,
                                               const std::string& bytes, int streams) {
    int64_t at = 0;
    return client.Run(
        spec, static_cast<int64_t>(bytes.size()),
        [&](char* buffer, int64_t n) {
          std::memcpy(buffer, bytes.data() + at, static_cast<size_t>(n));
          at += n;
          return absl::OkStatus();
        },
        {}, {}, nullptr, streams);
  }

  // A raw call of a run: its context and stream.
  struct RawCall {
    grpc::ClientContext context;
    std::unique_ptr<RawStream> stream;
  };
  std::unique_ptr<RawCall> Open(const std::string& client_id = "") {
    auto call = std::make_unique<RawCall>();
    call->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    if (!client_id.empty()) call->context.AddMetadata("client-id", client_id);
    call->stream = stub_->Run(&call->context);
    return call;
  }
  static v1::RunStripes Stripe(const std::string& key, uint32_t index, uint32_t count) {
    v1::RunStripes stripes;
    stripes.set_key(key);
    stripes.set_index(index);
    stripes.set_count(count);
    return stripes;
  }
  static bool SendSpec(RawCall& call, const v1::SubmitRequest& spec, const v1::RunStripes& s) {
    v1::RunRequest m;
    *m.mutable_spec() = spec;
    *m.mutable_stripes() = s;
    return call.stream->Write(m);
  }
  static bool SendJoin(RawCall& call, const v1::RunStripes& s) {
    v1::RunRequest m;
    *m.mutable_join() = s;
    return call.stream->Write(m);
  }
  static bool SendData(RawCall& call, const std::string& bytes) {
    v1::RunRequest m;
    m.set_data(bytes);
    return call.stream->Write(m);
  }
  // Reads the rest of the call: its status, and the code of its Done (-1 for none).
  static std::pair<grpc::Status, int> Drain(RawCall& call) {
    v1::JobEvent e;
    int done = -1;
    while (call.stream->Read(&e)) {
      if (e.has_done()) done = e.done().code();
    }
    return {call.stream->Finish(), done};
  }
  // Reads the rest of the call and expects an OK Done and an OK status.
  static void ExpectEndsOk(RawCall& call) {
    auto [status, done] = Drain(call);
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(done, 0);
  }

  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<JobServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string target_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::JobService::Stub> stub_;
  int port_ = 0;
  std::mutex done_mu_;
  std::vector<absl::Status> done_;
};

const std::string kKey = "0123456789abcdef";

TEST_F(RunStripesTest, ASplitRunGivesTheBytesOfOneCall) {
  const uint64_t seed = gpupipe::testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  // 4 MiB and a ragged tail: several upload messages per call, many result chunks.
  const int64_t rows = 97, cols = 10811;
  const std::string bytes =
      gpupipe::testing::AsBytes(gpupipe::testing::RandomFloats(rows * cols, seed));
  // Calls on connections of their own (Create), and all on one given channel.
  absl::StatusOr<std::unique_ptr<client::JobClient>> own = client::JobClient::Create(target_);
  ASSERT_TRUE(own.ok()) << own.status();
  client::JobClient shared(channel_, client::ClientOptions{});
  for (const char* op : {"relu", "softmax", "sum"}) {
    SCOPED_TRACE(op);
    absl::StatusOr<client::JobResult> one = Run(shared, Spec(rows, cols, op), bytes, 1);
    ASSERT_TRUE(one.ok()) << one.status();
    for (int streams : {2, 3, kMaxRunStreams}) {
      SCOPED_TRACE(streams);
      for (client::JobClient* client : {own->get(), &shared}) {
        absl::StatusOr<client::JobResult> split =
            Run(*client, Spec(rows, cols, op), bytes, streams);
        ASSERT_TRUE(split.ok()) << split.status();
        EXPECT_EQ(split->output.data(), one->output.data());  // bit-identical
        EXPECT_EQ(split->output.shape_size(), one->output.shape_size());
        EXPECT_TRUE(split->has_timing);
        EXPECT_EQ(split->timing.bytes_in(), static_cast<int64_t>(bytes.size()));
      }
    }
  }
  // The engine logs a job just after its Done went out, so the last may still be on its way.
  EXPECT_TRUE(WaitForJobs(3u * (1 + 3 * 2))) << Done().size();  // each job once
  for (const absl::Status& s : Done()) EXPECT_TRUE(s.ok()) << s;
}

TEST_F(RunStripesTest, MoreStreamsThanUploadMessagesStillRun) {
  const std::string bytes = gpupipe::testing::AsBytes(gpupipe::testing::RandomFloats(64, 1));
  absl::StatusOr<std::unique_ptr<client::JobClient>> client = client::JobClient::Create(target_);
  ASSERT_TRUE(client.ok());
  absl::StatusOr<client::JobResult> got = Run(**client, Spec(4, 16, "relu"), bytes, 3);
  ASSERT_TRUE(got.ok()) << got.status();
  const std::vector<float> y = gpupipe::testing::AsFloats(got->output.data());
  const std::vector<float> x = gpupipe::testing::AsFloats(bytes);
  ASSERT_EQ(y.size(), x.size());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], x[i] < 0 ? 0.0f : x[i]);
}

TEST_F(RunStripesTest, JoinsMayComeBeforeTheSpec) {
  const std::string bytes(8 * 4, '\0');  // zeros: relu gives zeros
  std::unique_ptr<RawCall> c1 = Open();
  ASSERT_TRUE(SendJoin(*c1, Stripe(kKey, 1, 2)));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::unique_ptr<RawCall> c0 = Open();
  ASSERT_TRUE(SendSpec(*c0, Spec(1, 8, "relu"), Stripe(kKey, 0, 2)));
  ASSERT_TRUE(SendData(*c0, bytes.substr(0, 20)));  // message 0
  ASSERT_TRUE(SendData(*c1, bytes.substr(20)));     // message 1
  c0->stream->WritesDone();
  c1->stream->WritesDone();
  ExpectEndsOk(*c0);
  ExpectEndsOk(*c1);
}

// A dry run split over calls reads no input on any of them: each call gets the plan and an
// OK Done, whether it sends data or not, and the daemon serves on.
TEST_F(RunStripesTest, ADryRunEndsEveryCallAtOnce) {
  v1::SubmitRequest spec = Spec(4, 1024, "relu");
  spec.set_dry_run(true);
  std::unique_ptr<RawCall> c1 = Open();
  ASSERT_TRUE(SendJoin(*c1, Stripe(kKey, 1, 2)));
  std::unique_ptr<RawCall> c0 = Open();
  ASSERT_TRUE(SendSpec(*c0, spec, Stripe(kKey, 0, 2)));
  SendData(*c1, std::string(4096, '\0'));  // may fail: the call may be over already
  c1->stream->WritesDone();
  ExpectEndsOk(*c0);
  ExpectEndsOk(*c1);
  const std::string bytes(4 * 1024 * 4, '\0');
  absl::StatusOr<std::unique_ptr<client::JobClient>> client = client::JobClient::Create(target_);
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<client::JobResult> real = Run(**client, Spec(4, 1024, "relu"), bytes, 2);
  ASSERT_TRUE(real.ok()) << real.status();
  EXPECT_EQ(real->output.data(), bytes);
}

TEST_F(RunStripesTest, ACancelledStripeFailsTheJobOnceOnEveryCall) {
  std::vector<std::unique_ptr<RawCall>> calls;
  for (int i = 0; i < 3; ++i) calls.push_back(Open());
  ASSERT_TRUE(SendSpec(*calls[0], Spec(1, 4096, "relu"), Stripe(kKey, 0, 3)));
  ASSERT_TRUE(SendJoin(*calls[1], Stripe(kKey, 1, 3)));
  ASSERT_TRUE(SendJoin(*calls[2], Stripe(kKey, 2, 3)));
  v1::JobEvent accepted;  // the run has started: every call has joined
  ASSERT_TRUE(calls[0]->stream->Read(&accepted));
  ASSERT_TRUE(accepted.has_accepted());
  const std::string message(1024, '\0');
  for (int m = 0; m < 6; ++m) ASSERT_TRUE(SendData(*calls[m % 3], message));
  calls[1]->context.TryCancel();
  for (int i = 0; i < 3; ++i) {
    auto [status, done] = Drain(*calls[i]);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED) << i << status.error_message();
    if (i != 1) EXPECT_EQ(done, static_cast<int>(grpc::StatusCode::CANCELLED)) << i;
  }
  ASSERT_TRUE(WaitForJobs(1));
  EXPECT_EQ(Done()[0].code(), absl::StatusCode::kCancelled);  // one job, failed once
}

TEST_F(RunStripesTest, AStripeThatEndsEarlyFailsTheJobOnce) {
  std::vector<std::unique_ptr<RawCall>> calls;
  for (int i = 0; i < 3; ++i) calls.push_back(Open());
  ASSERT_TRUE(SendSpec(*calls[0], Spec(1, 4096, "relu"), Stripe(kKey, 0, 3)));
  ASSERT_TRUE(SendJoin(*calls[1], Stripe(kKey, 1, 3)));
  ASSERT_TRUE(SendJoin(*calls[2], Stripe(kKey, 2, 3)));
  const std::string message(1024, '\0');
  for (int m = 0; m < 5; ++m) ASSERT_TRUE(SendData(*calls[m % 3], message));
  calls[2]->stream->WritesDone();  // message 5 was its to send
  auto [s2, d2] = Drain(*calls[2]);
  EXPECT_EQ(s2.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s2.error_message().find("input ended after 5120 of 16384 bytes (stripe 2 of 3 "
                                    "ended early)"),
            std::string::npos)
      << s2.error_message();
  for (int i : {0, 1}) {
    auto [status, done] = Drain(*calls[i]);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << i;
    EXPECT_EQ(done, static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT)) << i;
  }
  ASSERT_TRUE(WaitForJobs(1));  // one job, failed once
  EXPECT_EQ(Done()[0].code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(RunStripesTest, BytesBeyondTheInputOnOneStripeFailTheJobOnce) {
  std::vector<std::unique_ptr<RawCall>> calls;
  for (int i = 0; i < 2; ++i) calls.push_back(Open());
  ASSERT_TRUE(SendSpec(*calls[0], Spec(1, 512, "relu"), Stripe(kKey, 0, 2)));
  ASSERT_TRUE(SendJoin(*calls[1], Stripe(kKey, 1, 2)));
  ASSERT_TRUE(SendData(*calls[0], std::string(1024, '\0')));
  ASSERT_TRUE(SendData(*calls[1], std::string(2048, '\0')));  // 1 KiB too many
  auto [s1, d1] = Drain(*calls[1]);
  EXPECT_EQ(s1.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s1.error_message().find("3072 bytes sent, but the shape and dtype give 2048"),
            std::string::npos)
      << s1.error_message();
  auto [s0, d0] = Drain(*calls[0]);
  EXPECT_EQ(s0.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(d0, static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  ASSERT_TRUE(WaitForJobs(1));
  EXPECT_EQ(Done()[0].code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(RunStripesTest, BytesBeyondTheInputAfterAnotherCallHalfClosedFailEveryCall) {
  std::vector<std::unique_ptr<RawCall>> calls;
  for (int i = 0; i < 2; ++i) calls.push_back(Open());
  ASSERT_TRUE(SendSpec(*calls[0], Spec(1, 512, "relu"), Stripe(kKey, 0, 2)));
  ASSERT_TRUE(SendJoin(*calls[1], Stripe(kKey, 1, 2)));
  ASSERT_TRUE(SendData(*calls[0], std::string(1024, '\0')));
  ASSERT_TRUE(SendData(*calls[1], std::string(1024, '\0')));  // the input is whole
  calls[0]->stream->WritesDone();
  // Call 0 is done and the job ran; its Done waits for every call to end.
  ASSERT_TRUE(WaitForJobs(1));
  ASSERT_TRUE(SendData(*calls[1], std::string(16, '\0')));  // 16 bytes too many
  auto [s1, d1] = Drain(*calls[1]);
  EXPECT_EQ(s1.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s1.error_message();
  auto [s0, d0] = Drain(*calls[0]);
  EXPECT_EQ(s0.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s0.error_message();
  EXPECT_EQ(d0, static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_NE(s0.error_message().find("2064 bytes sent"), std::string::npos) << s0.error_message();
}

TEST_F(RunStripesTest, ADataMessageOverOneMiBBreaksASplitRun) {
  std::vector<std::unique_ptr<RawCall>> calls;
  for (int i = 0; i < 2; ++i) calls.push_back(Open());
  ASSERT_TRUE(SendSpec(*calls[0], Spec(1024, 1024, "relu"), Stripe(kKey, 0, 2)));
  ASSERT_TRUE(SendJoin(*calls[1], Stripe(kKey, 1, 2)));
  SendData(*calls[1], std::string((1 << 20) + 1, '\0'));  // parked, were it taken
  auto [s1, d1] = Drain(*calls[1]);
  EXPECT_EQ(s1.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s1.error_message().find("data messages of at most 1048576 bytes"), std::string::npos)
      << s1.error_message();
  EXPECT_EQ(Drain(*calls[0]).first.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(RunStripesTest, RunsWaitingForTheirCallsAreBoundedPerClient) {
  // One run more than the limit: whichever comes last is refused, the rest time out.
  std::vector<std::unique_ptr<RawCall>> waiting;
  for (int run = 0; run <= kMaxWaitingRuns; ++run) {
    waiting.push_back(Open());
    ASSERT_TRUE(SendJoin(*waiting.back(), Stripe(kKey + std::to_string(run), 1, 2)));
  }
  std::unique_ptr<RawCall> other = Open("another-client");  // has room of its own
  ASSERT_TRUE(SendJoin(*other, Stripe(kKey, 1, 2)));
  int refused = 0, timed_out = 0;
  for (const std::unique_ptr<RawCall>& call : waiting) {
    const grpc::Status status = Drain(*call).first;
    if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++refused;
      EXPECT_NE(status.error_message().find("runs waiting for their calls already"),
                std::string::npos)
          << status.error_message();
    }
    if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) ++timed_out;
  }
  EXPECT_EQ(refused, 1);
  EXPECT_EQ(timed_out, kMaxWaitingRuns);
  EXPECT_EQ(Drain(*other).first.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);

  // Runs that start or are refused leave room: with all but one place taken, one complete run
  // after another works.
  std::vector<std::unique_ptr<RawCall>> held;
  for (int run = 0; run + 1 < kMaxWaitingRuns; ++run) {
    held.push_back(Open());
    ASSERT_TRUE(SendJoin(*held.back(), Stripe(kKey + "held" + std::to_string(run), 1, 2)));
  }
  for (const char* key : {"first-run-key-16", "second-run-key-16"}) {
    std::unique_ptr<RawCall> c0 = Open();
    ASSERT_TRUE(SendSpec(*c0, Spec(1, 8, "relu"), Stripe(key, 0, 2)));
    std::unique_ptr<RawCall> c1 = Open();
    ASSERT_TRUE(SendJoin(*c1, Stripe(key, 1, 2)));
    ASSERT_TRUE(SendData(*c0, std::string(32, '\0')));
    c0->stream->WritesDone();
    c1->stream->WritesDone();
    EXPECT_TRUE(Drain(*c0).first.ok()) << key;
    EXPECT_TRUE(Drain(*c1).first.ok()) << key;
  }
  for (const std::unique_ptr<RawCall>& call : held) call->context.TryCancel();
  for (const std::unique_ptr<RawCall>& call : held) Drain(*call);
}

TEST_F(RunStripesTest, TheClientLibraryReportsARefusedCallAtOnce) {
  Start(std::chrono::seconds(10));
  std::vector<std::unique_ptr<RawCall>> waiting;  // the client's waiting runs, all taken
  for (int run = 0; run < kMaxWaitingRuns; ++run) {
    waiting.push_back(Open());
    ASSERT_TRUE(SendJoin(*waiting.back(), Stripe(kKey + std::to_string(run), 1, 2)));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // they have come
  client::JobClient client(channel_, client::ClientOptions{});
  const std::string bytes(4 << 20, '\0');
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<client::JobResult> r = Run(client, Spec(1024, 1024, "relu"), bytes, 2);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  for (const std::unique_ptr<RawCall>& call : waiting) call->context.TryCancel();
  for (const std::unique_ptr<RawCall>& call : waiting) Drain(*call);
}

TEST_F(RunStripesTest, AStalledStripeEndsTheJobAfterTheUploadIdleTimeout) {
  std::vector<std::unique_ptr<RawCall>> calls;
  for (int i = 0; i < 2; ++i) calls.push_back(Open());
  ASSERT_TRUE(SendSpec(*calls[0], Spec(1, 4096, "relu"), Stripe(kKey, 0, 2)));
  ASSERT_TRUE(SendJoin(*calls[1], Stripe(kKey, 1, 2)));
  ASSERT_TRUE(SendData(*calls[0], std::string(1024, '\0')));  // call 1 never sends message 1
  for (int i = 0; i < 2; ++i) {
    auto [status, done] = Drain(*calls[i]);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << i;
    EXPECT_EQ(done, static_cast<int>(grpc::StatusCode::DEADLINE_EXCEEDED)) << i;
  }
}

TEST_F(RunStripesTest, ARunWhoseCallsDoNotAllComeEndsOnTheOnesThatDid) {
  std::unique_ptr<RawCall> c0 = Open();
  ASSERT_TRUE(SendSpec(*c0, Spec(1, 8, "relu"), Stripe(kKey, 0, 3)));
  std::unique_ptr<RawCall> c2 = Open();
  ASSERT_TRUE(SendJoin(*c2, Stripe(kKey, 2, 3)));
  // A call of another client with the same key does not join it.
  std::unique_ptr<RawCall> foreign = Open("someone-else");
  ASSERT_TRUE(SendJoin(*foreign, Stripe(kKey, 1, 3)));
  for (RawCall* call : {c0.get(), c2.get()}) {
    auto [status, done] = Drain(*call);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
    EXPECT_NE(status.error_message().find("2 of the run's 3 calls came within 0.4 s"),
              std::string::npos)
        << status.error_message();
    EXPECT_EQ(done, -1);  // no job, no Done
  }
  EXPECT_EQ(Drain(*foreign).first.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(Done().empty());
}

TEST_F(RunStripesTest, CallsThatDisagreeRefuseTheRunOnAllOfThem) {
  {  // the count
    std::unique_ptr<RawCall> c0 = Open();
    ASSERT_TRUE(SendSpec(*c0, Spec(1, 8, "relu"), Stripe(kKey, 0, 2)));
    std::unique_ptr<RawCall> c1 = Open();
    ASSERT_TRUE(SendJoin(*c1, Stripe(kKey, 1, 3)));
    for (RawCall* call : {c0.get(), c1.get()}) {
      const grpc::Status status = Drain(*call).first;
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
      EXPECT_NE(status.error_message().find("the calls of one run disagree"), std::string::npos)
          << status.error_message();
    }
  }
  {  // a stripe claimed twice; a late call of the refused run gets the same answer
    const std::string key = "fedcba9876543210";
    std::unique_ptr<RawCall> a = Open();
    ASSERT_TRUE(SendJoin(*a, Stripe(key, 1, 3)));
    std::unique_ptr<RawCall> b = Open();
    ASSERT_TRUE(SendJoin(*b, Stripe(key, 1, 3)));
    std::unique_ptr<RawCall> late = Open();
    ASSERT_TRUE(SendSpec(*late, Spec(1, 8, "relu"), Stripe(key, 0, 3)));
    for (RawCall* call : {a.get(), b.get(), late.get()}) {
      const grpc::Status status = Drain(*call).first;
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
      EXPECT_NE(status.error_message().find("claim stripe 1"), std::string::npos)
          << status.error_message();
    }
  }
  EXPECT_TRUE(Done().empty());
}

// A call whose seat is invalid though its key and count name a run (a join claiming stripe 0,
// the spec's, or one past the count; a spec call claiming another stripe) refuses that run on
// every call at once: its other calls do not wait for the run's timeout.
TEST_F(RunStripesTest, AnInvalidSeatRefusesItsRunOnEveryCallAtOnce) {
  Start(std::chrono::seconds(10));  // refused at once, not at the timeout
  struct Case {
    bool spec_first;
    v1::RunStripes good, bad;
    const char* message;
  };
  const std::string key_a(16, 'a'), key_b(16, 'b'), key_c(16, 'c');
  const Case cases[] = {
      {true, Stripe(key_a, 0, 2), Stripe(key_a, 0, 2), "join.index: 0"},
      {true, Stripe(key_b, 0, 3), Stripe(key_b, 3, 3), "join.index: 3"},
      {false, Stripe(key_c, 1, 2), Stripe(key_c, 1, 2), "stripes.index: 1"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    const auto start = std::chrono::steady_clock::now();
    std::unique_ptr<RawCall> good = Open();
    std::unique_ptr<RawCall> bad = Open();
    if (c.spec_first) {
      ASSERT_TRUE(SendSpec(*good, Spec(1, 8, "relu"), c.good));
      ASSERT_TRUE(SendJoin(*bad, c.bad));
    } else {
      ASSERT_TRUE(SendJoin(*good, c.good));
      ASSERT_TRUE(SendSpec(*bad, Spec(1, 8, "relu"), c.bad));
    }
    for (RawCall* call : {good.get(), bad.get()}) {
      const grpc::Status status = Drain(*call).first;
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
      EXPECT_NE(status.error_message().find(c.message), std::string::npos)
          << status.error_message();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  }
  EXPECT_TRUE(Done().empty());
}

TEST_F(RunStripesTest, AnInvalidSpecRefusesTheRunOnEveryCall) {
  Start(std::chrono::seconds(10));  // refused at once, not at the timeout
  std::unique_ptr<RawCall> c1 = Open();
  ASSERT_TRUE(SendJoin(*c1, Stripe(kKey, 1, 2)));
  v1::SubmitRequest spec = Spec(1, 8, "relu");
  spec.add_ops()->mutable_pow();  // p is required
  std::unique_ptr<RawCall> c0 = Open();
  ASSERT_TRUE(SendSpec(*c0, spec, Stripe(kKey, 0, 2)));
  const auto start = std::chrono::steady_clock::now();
  for (RawCall* call : {c0.get(), c1.get()}) {
    const grpc::Status status = Drain(*call).first;
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find("pow"), std::string::npos) << status.error_message();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  int64_t refused = 0;
  for (const auto& [reason, n] : engine_->Stats().refused) refused += n;
  EXPECT_EQ(refused, 1);  // counted once
}

TEST_F(RunStripesTest, BadStripesAreRefusedWithTheFieldAndTheLimit) {
  struct Case {
    bool spec;
    v1::RunStripes stripes;
    grpc::StatusCode code;
    const char* says;
  };
  const Case cases[] = {
      // A bad index refuses the run its key names (for a while): each case has a run of its own.
      {true, Stripe("short", 0, 2), grpc::StatusCode::INVALID_ARGUMENT, "stripes.key: 5 bytes"},
      {true, Stripe("key-of-case-0001", 1, 2), grpc::StatusCode::INVALID_ARGUMENT,
       "stripes.index: 1"},
      {true, Stripe("key-of-case-0002", 0, kMaxRunStreams + 1),
       grpc::StatusCode::RESOURCE_EXHAUSTED, "over the server's limit of 4"},
      {false, Stripe("key-of-case-0003", 0, 2), grpc::StatusCode::INVALID_ARGUMENT,
       "join.index: 0"},
      {false, Stripe("key-of-case-0004", 2, 2), grpc::StatusCode::INVALID_ARGUMENT,
       "join.index: 2"},
      {false, Stripe("key-of-case-0005", 1, 0), grpc::StatusCode::INVALID_ARGUMENT,
       "join.count: 0"},
      {false, Stripe(std::string(65, 'k'), 1, 2), grpc::StatusCode::INVALID_ARGUMENT,
       "join.key: 65 bytes"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.says);
    std::unique_ptr<RawCall> call = Open();
    ASSERT_TRUE(c.spec ? SendSpec(*call, Spec(1, 8, "relu"), c.stripes)
                       : SendJoin(*call, c.stripes));
    const grpc::Status status = Drain(*call).first;
    EXPECT_EQ(status.error_code(), c.code);
    EXPECT_NE(status.error_message().find(c.says), std::string::npos) << status.error_message();
  }
  {  // a join after the spec
    std::unique_ptr<RawCall> call = Open();
    v1::SubmitRequest spec = Spec(1, 8, "relu");
    v1::RunRequest m;
    *m.mutable_spec() = spec;
    ASSERT_TRUE(call->stream->Write(m));
    ASSERT_TRUE(SendJoin(*call, Stripe(kKey, 1, 2)));
    const grpc::Status status = Drain(*call).first;
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find("only a call's first message may join"),
              std::string::npos)
        << status.error_message();
  }
}

TEST_F(RunStripesTest, ACallCancelledBeforeItsRunStartsRefusesTheRun) {
  const auto timeout = std::chrono::seconds(10);
  Start(timeout);
  std::unique_ptr<RawCall> c0 = Open();
  ASSERT_TRUE(SendSpec(*c0, Spec(1, 8, "relu"), Stripe(kKey, 0, 3)));
  std::unique_ptr<RawCall> c1 = Open();
  ASSERT_TRUE(SendJoin(*c1, Stripe(kKey, 1, 3)));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the join has come
  c1->context.TryCancel();
  const auto start = std::chrono::steady_clock::now();
  const grpc::Status status = Drain(*c0).first;
  EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_NE(status.error_message().find("stripe 1 of the run"), std::string::npos)
      << status.error_message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, timeout / 2);  // at once
  Drain(*c1);
  EXPECT_TRUE(Done().empty());
}

TEST_F(RunStripesTest, DescribeStatesTheLimit) {
  client::JobClient client(channel_, client::ClientOptions{});
  absl::StatusOr<v1::DescribeResponse> d = client.Describe();
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->limits().max_run_streams(), kMaxRunStreams);
}

}  // namespace
}  // namespace gpupipe::rpc
