// The streaming upload RPC (Run) in-process over a loopback port, on the CPU backend: driven by
// the client library where the client behaves, and by the raw stub where it must not.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "client/job_client.h"
#include "server/engine/backends/cpu/cpu_backend.h"
#include "server/rpc/job_service.h"
#include "tests/testing/random_tensor.h"

namespace gpupipe::rpc {
namespace {

using gpupipe::testing::AsBytes;
using gpupipe::testing::AsFloats;
using RawStream = grpc::ClientReaderWriter<v1::RunRequest, v1::JobEvent>;

constexpr int64_t kMaxInline = 8 << 20;
constexpr int64_t kMaxStreamed = 32 << 20;

class RunTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(JobServiceOptions{4, "test"}); }

  // (Re)starts the engine and the service with `service_options`.
  void Start(JobServiceOptions service_options) {
    if (server_) {
      server_->Shutdown();
      engine_->Shutdown();
      // The service (its stall watch asks the engine) goes before the engine it serves.
      server_.reset();
      service_.reset();
    }
    engine::EngineOptions options;
    options.limits.max_input_bytes = kMaxInline;
    options.limits.max_stream_input_bytes = kMaxStreamed;
    options.chunk_policy.min_chunk_bytes = 0;  // jobs that ask for small chunks
    options.on_job_done = [this](const engine::JobRecord& r) {
      std::lock_guard<std::mutex> lock(done_mu_);
      done_.push_back(r.status);
    };
    engine_ = engine::Engine::Create(engine::CreateCpuBackend({}), options);
    service_ = std::make_unique<JobServiceImpl>(engine_.get(), service_options);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(service_.get());
    builder.SetMaxReceiveMessageSize(16 << 20);
    server_ = builder.BuildAndStart();
    ASSERT_NE(port_, 0);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(port_),
                                   grpc::InsecureChannelCredentials());
    client_ = std::make_unique<client::JobClient>(channel_, client::ClientOptions{});
    stub_ = v1::JobService::NewStub(channel_);
  }

  void TearDown() override {
    // Every test leaves the engine without a job: nothing leaked, nothing stuck.
    EXPECT_TRUE(WaitIdle()) << engine_->jobs_in_flight() << " jobs still in flight";
    server_->Shutdown();
    engine_->Shutdown();
  }

  // Waits up to 10 s for `jobs` jobs in flight.
  bool WaitInFlight(int64_t jobs) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (engine_->jobs_in_flight() != jobs && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return engine_->jobs_in_flight() == jobs;
  }
  bool WaitIdle() { return WaitInFlight(0); }

  // The final statuses of the jobs that ended so far, in the order they ended (the engine's
  // log of them).
  std::vector<absl::Status> Done() {
    std::lock_guard<std::mutex> lock(done_mu_);
    return done_;
  }

  static v1::SubmitRequest Spec(std::vector<int64_t> shape, const char* op = "relu") {
    v1::SubmitRequest request;
    request.mutable_input()->set_dtype(v1::DTYPE_FLOAT32);
    for (int64_t d : shape) request.mutable_input()->add_shape(d);
    if (std::string(op) == "relu") request.add_ops()->mutable_relu();
    if (std::string(op) == "softmax") request.add_ops()->mutable_softmax();
    return request;
  }

  // Streams `bytes` from memory through JobClient::Run.
  absl::StatusOr<client::JobResult> Run(const v1::SubmitRequest& spec, const std::string& bytes) {
    int64_t at = 0;
    return client_->Run(spec, static_cast<int64_t>(bytes.size()), [&](char* buffer, int64_t n) {
      std::memcpy(buffer, bytes.data() + at, static_cast<size_t>(n));
      at += n;
      return absl::OkStatus();
    });
  }

  static void WriteSpec(RawStream* s, const v1::SubmitRequest& spec) {
    v1::RunRequest m;
    *m.mutable_spec() = spec;
    s->Write(m);
  }
  static void WriteData(RawStream* s, const std::string& bytes) {
    v1::RunRequest m;
    m.set_data(bytes);
    s->Write(m);
  }
  // Reads the rest of the call and returns its status.
  static grpc::Status Drain(RawStream* s) {
    v1::JobEvent e;
    while (s->Read(&e)) {
    }
    return s->Finish();
  }

  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<JobServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<client::JobClient> client_;
  std::unique_ptr<v1::JobService::Stub> stub_;
  int port_ = 0;
  std::mutex done_mu_;
  std::vector<absl::Status> done_;
};

TEST_F(RunTest, StreamedJobEqualsUnaryJob) {
  const uint64_t seed = gpupipe::testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  // 3 MiB: several upload chunks and several result chunks, with a ragged last chunk.
  const int64_t rows = 3, cols = (1 << 18) + 7;
  const std::string bytes = AsBytes(gpupipe::testing::RandomFloats(rows * cols, seed));
  for (const char* op : {"relu", "softmax"}) {
    SCOPED_TRACE(op);
    v1::SubmitRequest unary = Spec({rows, cols}, op);
    unary.mutable_input()->set_data(bytes);
    absl::StatusOr<client::JobResult> want = client_->Submit(unary);
    ASSERT_TRUE(want.ok()) << want.status();
    std::vector<v1::JobEvent::EventCase> kinds;
    int64_t at = 0;
    int64_t progress = 0;
    absl::StatusOr<client::JobResult> got = client_->Run(
        Spec({rows, cols}, op), static_cast<int64_t>(bytes.size()),
        [&](char* buffer, int64_t n) {
          EXPECT_LE(n, client::kUploadChunkBytes);
          std::memcpy(buffer, bytes.data() + at, static_cast<size_t>(n));
          at += n;
          return absl::OkStatus();
        },
        [&](const v1::JobEvent& e) { kinds.push_back(e.event_case()); },
        [&](int64_t sent, int64_t total) {
          EXPECT_GT(sent, progress);
          EXPECT_EQ(total, static_cast<int64_t>(bytes.size()));
          progress = sent;
        });
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(progress, static_cast<int64_t>(bytes.size()));
    EXPECT_EQ(got->output.data(), want->output.data());  // bit-identical
    EXPECT_EQ(got->output.dtype(), want->output.dtype());
    EXPECT_EQ(got->timing.bytes_in(), static_cast<int64_t>(bytes.size()));
    ASSERT_GE(kinds.size(), 3u);
    EXPECT_EQ(kinds.front(), v1::JobEvent::kAccepted);
    EXPECT_EQ(kinds[kinds.size() - 2], v1::JobEvent::kTiming);
    EXPECT_EQ(kinds.back(), v1::JobEvent::kDone);
  }
}

TEST_F(RunTest, StreamedInputsMayExceedTheInlineLimit) {
  const uint64_t seed = gpupipe::testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const int64_t n = (kMaxInline / 4) + 1024;  // 8 MiB + 4 KiB
  const std::vector<float> x = gpupipe::testing::RandomFloats(n, seed);
  v1::SubmitRequest unary = Spec({n});
  unary.mutable_input()->set_data(AsBytes(x));
  absl::Status refused = client_->Submit(unary).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("can be streamed with Run"), std::string::npos) << refused;

  absl::StatusOr<client::JobResult> got = Run(Spec({n}), AsBytes(x));
  ASSERT_TRUE(got.ok()) << got.status();
  const std::vector<float> y = AsFloats(got->output.data());
  ASSERT_EQ(y.size(), x.size());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i] < 0 ? 0.0f : x[i]) << i;
}

TEST_F(RunTest, StreamedInputsOverTheirLimitAreRefusedBeforeAnyUpload) {
  grpc::ClientContext context;
  std::unique_ptr<RawStream> s = stub_->Run(&context);
  WriteSpec(s.get(), Spec({kMaxStreamed / 4 + 1}));
  const grpc::Status status = Drain(s.get());
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(status.error_message().find("for streamed inputs"), std::string::npos)
      << status.error_message();
}

// A dry run reads no input: it is answered with Accepted, Plan and an OK Done whatever the
// client sends after its spec (nothing, the whole input, or nothing and no half-close), and
// the call ends without waiting for the client. (The daemon once crashed here: a dry run has
// no input ring.)
TEST_F(RunTest, ADryRunIsAnsweredAtOnceWhateverFollowsItsSpec) {
  v1::SubmitRequest spec = Spec({1 << 20});
  spec.set_dry_run(true);
  for (int follow = 0; follow < 3; ++follow) {
    SCOPED_TRACE(follow == 0 ? "spec, half-close" : follow == 1 ? "spec, data, half-close"
                                                                : "spec, no half-close");
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    std::unique_ptr<RawStream> s = stub_->Run(&context);
    WriteSpec(s.get(), spec);
    if (follow == 1) WriteData(s.get(), std::string(4 << 20, '\0'));
    if (follow < 2) s->WritesDone();
    std::vector<v1::JobEvent::EventCase> events;
    v1::JobEvent e;
    int done_code = -1;
    while (s->Read(&e)) {
      events.push_back(e.event_case());
      if (e.has_done()) done_code = e.done().code();
    }
    const grpc::Status status = s->Finish();
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(done_code, 0);
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.front(), v1::JobEvent::kAccepted);
    EXPECT_NE(std::find(events.begin(), events.end(), v1::JobEvent::kPlan), events.end());
  }
  // The client library sends a dry run's spec alone, and never reads its input.
  bool read = false;
  absl::StatusOr<client::JobResult> r =
      client_->Run(spec, int64_t{4} << 20, [&](char*, int64_t) {
        read = true;
        return absl::OkStatus();
      });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(read);
  EXPECT_TRUE(r->output.data().empty());
  // The daemon serves on.
  absl::StatusOr<client::JobResult> real =
      Run(Spec({4}), AsBytes(std::vector<float>{-1, 2, -3, 4}));
  ASSERT_TRUE(real.ok()) << real.status();
  EXPECT_EQ(AsFloats(real->output.data()), (std::vector<float>{0, 2, 0, 4}));
}

TEST_F(RunTest, BytesBeyondTheSizeAreInvalid) {
  grpc::ClientContext context;
  std::unique_ptr<RawStream> s = stub_->Run(&context);
  WriteSpec(s.get(), Spec({4}));
  WriteData(s.get(), std::string(20, '\0'));
  s->WritesDone();
  const grpc::Status status = Drain(s.get());
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("20 bytes sent, but the shape and dtype give 16"),
            std::string::npos)
      << status.error_message();
}

// Sent at once after the whole input, so the job may well be done before the server reads
// them: the call still ends INVALID_ARGUMENT, and no Done says OK, every time.
TEST_F(RunTest, BytesOrASpecAfterTheWholeInputAreInvalidEveryTime) {
  for (int i = 0; i < 20; ++i) {
    const bool extra_spec = i % 2 == 1;
    grpc::ClientContext context;
    std::unique_ptr<RawStream> s = stub_->Run(&context);
    WriteSpec(s.get(), Spec({4}));
    WriteData(s.get(), std::string(16, '\0'));
    if (extra_spec) {
      WriteSpec(s.get(), Spec({4}));
    } else {
      WriteData(s.get(), std::string(4, '\0'));
    }
    s->WritesDone();
    v1::JobEvent e;
    bool done_ok = false;
    while (s->Read(&e)) {
      if (e.has_done() && e.done().code() == 0) done_ok = true;
    }
    const grpc::Status status = s->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << i << ": " << status.error_message();
    EXPECT_FALSE(done_ok) << i << ": a Done(OK) for a broken upload";
    // The call ends at once, but its job (and the upload's ring, which the client's upload
    // limit counts) ends at the job's next check: wait, so that 20 tries never meet the limit.
    ASSERT_TRUE(WaitIdle());
  }
}

TEST_F(RunTest, EarlyHalfCloseIsInvalid) {
  grpc::ClientContext context;
  std::unique_ptr<RawStream> s = stub_->Run(&context);
  WriteSpec(s.get(), Spec({4}));
  WriteData(s.get(), std::string(8, '\0'));
  s->WritesDone();
  const grpc::Status status = Drain(s.get());
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "input ended after 8 of 16 bytes");
}

TEST_F(RunTest, ASecondSpecIsInvalid) {
  grpc::ClientContext context;
  std::unique_ptr<RawStream> s = stub_->Run(&context);
  WriteSpec(s.get(), Spec({4}));
  WriteData(s.get(), std::string(8, '\0'));
  WriteSpec(s.get(), Spec({4}));
  s->WritesDone();
  const grpc::Status status = Drain(s.get());
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("a second spec arrived after 8 input bytes"),
            std::string::npos)
      << status.error_message();
}

TEST_F(RunTest, MalformedStartsAreInvalid) {
  {
    SCOPED_TRACE("data first");
    grpc::ClientContext context;
    std::unique_ptr<RawStream> s = stub_->Run(&context);
    WriteData(s.get(), std::string(8, '\0'));
    s->WritesDone();
    const grpc::Status status = Drain(s.get());
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find("must carry the spec"), std::string::npos);
  }
  {
    SCOPED_TRACE("nothing at all");
    grpc::ClientContext context;
    std::unique_ptr<RawStream> s = stub_->Run(&context);
    s->WritesDone();
    const grpc::Status status = Drain(s.get());
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find("ended before the spec"), std::string::npos);
  }
  {
    SCOPED_TRACE("bytes inside the spec");
    grpc::ClientContext context;
    std::unique_ptr<RawStream> s = stub_->Run(&context);
    v1::SubmitRequest spec = Spec({4});
    spec.mutable_input()->set_data(std::string(16, '\0'));
    WriteSpec(s.get(), spec);
    s->WritesDone();
    const grpc::Status status = Drain(s.get());
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find("spec.input.data: must be empty in Run"),
              std::string::npos);
  }
  {
    SCOPED_TRACE("an invalid spec");
    grpc::ClientContext context;
    std::unique_ptr<RawStream> s = stub_->Run(&context);
    v1::SubmitRequest spec = Spec({4});
    spec.clear_ops();
    WriteSpec(s.get(), spec);
    s->WritesDone();
    const grpc::Status status = Drain(s.get());
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find("ops:"), std::string::npos);
  }
}

TEST_F(RunTest, CancelMidUploadEndsTheJobAndTheServerStaysHealthy) {
  grpc::ClientContext context;
  std::unique_ptr<RawStream> s = stub_->Run(&context);
  WriteSpec(s.get(), Spec({1 << 20}));  // 4 MiB expected
  WriteData(s.get(), std::string(100 << 10, '\0'));
  // The job is accepted (and waits for its input) before the client goes away.
  v1::JobEvent accepted;
  ASSERT_TRUE(s->Read(&accepted));
  ASSERT_TRUE(accepted.has_accepted());
  // (The engine counts the job just after Accepted is on its way.)
  EXPECT_TRUE(WaitInFlight(1));
  context.TryCancel();
  EXPECT_EQ(Drain(s.get()).error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(WaitIdle()) << "the cancelled job never ended";
  // The lane it held serves the next job.
  absl::StatusOr<client::JobResult> next = Run(Spec({2}), AsBytes({-1.0f, 2.0f}));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(AsFloats(next->output.data()), (std::vector<float>{0.0f, 2.0f}));
}

TEST_F(RunTest, ACancelMidUploadIsLoggedAsCancelledEveryTime) {
  for (int i = 0; i < 20; ++i) {
    grpc::ClientContext context;
    std::unique_ptr<RawStream> s = stub_->Run(&context);
    WriteSpec(s.get(), Spec({1 << 20}));
    WriteData(s.get(), std::string(64 << 10, '\0'));
    v1::JobEvent accepted;
    ASSERT_TRUE(s->Read(&accepted));
    context.TryCancel();
    EXPECT_EQ(Drain(s.get()).error_code(), grpc::StatusCode::CANCELLED);
    ASSERT_TRUE(WaitIdle());
  }
  const std::vector<absl::Status> done = Done();
  ASSERT_EQ(done.size(), 20u);
  for (size_t i = 0; i < done.size(); ++i) {
    EXPECT_EQ(done[i].code(), absl::StatusCode::kCancelled) << i << ": " << done[i];
  }
}

TEST_F(RunTest, AnEarlyHalfCloseIsLoggedAsTheInvalidArgumentTheClientGets) {
  for (int i = 0; i < 5; ++i) {
    grpc::ClientContext context;
    std::unique_ptr<RawStream> s = stub_->Run(&context);
    WriteSpec(s.get(), Spec({4}));
    WriteData(s.get(), std::string(8, '\0'));
    s->WritesDone();
    EXPECT_EQ(Drain(s.get()).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    ASSERT_TRUE(WaitIdle());
  }
  for (const absl::Status& status : Done()) {
    EXPECT_EQ(status, absl::InvalidArgumentError("input ended after 8 of 16 bytes"));
  }
}

TEST_F(RunTest, ACallThatNeverSendsItsSpecEndsAtTheUploadIdleTimeout) {
  JobServiceOptions options{4, "test"};
  options.upload_idle_timeout = std::chrono::milliseconds(200);
  Start(options);
  grpc::ClientContext context;
  const auto start = std::chrono::steady_clock::now();
  std::unique_ptr<RawStream> s = stub_->Run(&context);
  const grpc::Status status = Drain(s.get());
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
  EXPECT_NE(status.error_message().find("no spec within"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  // A prompt client is not touched by the timer.
  absl::StatusOr<client::JobResult> ok = Run(Spec({2}), AsBytes({-1.0f, 2.0f}));
  EXPECT_TRUE(ok.ok()) << ok.status();
}

// A Submit call that reads only its Accepted, on a channel whose receive window does not
// grow: a result of more than the window waits in the server.
struct UnreadCall {
  std::unique_ptr<v1::JobService::Stub> stub;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader;

  // Reads the rest of the call's events and returns its status.
  grpc::Status Finish() {
    v1::JobEvent e;
    while (reader->Read(&e)) {
    }
    return reader->Finish();
  }
};
std::unique_ptr<UnreadCall> SubmitUnread(int port, v1::SubmitRequest request) {
  auto call = std::make_unique<UnreadCall>();
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  call->stub = v1::JobService::NewStub(grpc::CreateCustomChannel(
      "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials(), args));
  call->reader = call->stub->Submit(&call->context, request);
  v1::JobEvent accepted;
  EXPECT_TRUE(call->reader->Read(&accepted));
  return call;
}

// A relu job of `bytes` of float32 zeros. At 8 MiB its result is far more than the event queue
// and a window that does not grow hold.
v1::SubmitRequest ReluOfZeros(int64_t bytes, v1::Priority priority = v1::PRIORITY_NORMAL) {
  v1::SubmitRequest request;
  request.mutable_input()->set_dtype(v1::DTYPE_FLOAT32);
  request.mutable_input()->add_shape(bytes / 4);
  request.mutable_input()->set_data(std::string(static_cast<size_t>(bytes), '\0'));
  request.add_ops()->mutable_relu();
  request.set_priority(priority);
  return request;
}

TEST_F(RunTest, AReaderThatStopsReadingIsCancelledAndItsLaneFreed) {
  JobServiceOptions options{4, "test"};
  options.reader_idle_timeout = std::chrono::milliseconds(300);
  Start(options);
  // 8 MiB of results: far more than the event queue and flow control hold.
  std::unique_ptr<UnreadCall> call = SubmitUnread(port_, ReluOfZeros(8 << 20));
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitIdle()) << "the stalled job kept its lane";
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  const std::vector<absl::Status> done = Done();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].code(), absl::StatusCode::kDeadlineExceeded) << done[0];
  EXPECT_NE(done[0].message().find("--reader-idle-timeout-seconds"), std::string::npos);
  // The lane serves the next job; the stalled call was cancelled.
  absl::StatusOr<client::JobResult> next = Run(Spec({2}), AsBytes({-1.0f, 2.0f}));
  EXPECT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(call->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

TEST_F(RunTest, AStalledReaderLosesItsLaneSoonerWhileAJobWaitsForIt) {
  JobServiceOptions options{4, "test"};
  options.reader_idle_timeout = std::chrono::seconds(60);
  options.reader_idle_busy_timeout = std::chrono::milliseconds(500);
  Start(options);  // one lane
  std::unique_ptr<UnreadCall> call = SubmitUnread(port_, ReluOfZeros(8 << 20));

  // While nothing waits for its lane, the stalled call keeps it past the busy timeout.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(engine_->jobs_in_flight(), 1);
  EXPECT_TRUE(Done().empty());

  // A job that needs the lane: the stalled call is cancelled within the busy timeout (and a
  // round of the watch), not the idle one, and the job runs.
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<client::JobResult> next = Run(Spec({2}), AsBytes({-1.0f, 2.0f}));
  EXPECT_TRUE(next.ok()) << next.status();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  ASSERT_TRUE(WaitIdle());
  std::vector<absl::Status> done = Done();  // in the order the jobs ended, which may be either
  ASSERT_EQ(done.size(), 2u);
  if (done[0].ok()) std::swap(done[0], done[1]);
  EXPECT_EQ(done[0].code(), absl::StatusCode::kDeadlineExceeded) << done[0];
  EXPECT_NE(done[0].message().find("read nothing for 0.5 s"), std::string::npos) << done[0];
  EXPECT_NE(done[0].message().find("--reader-idle-busy-seconds"), std::string::npos) << done[0];
  EXPECT_TRUE(done[1].ok()) << done[1];
  EXPECT_EQ(call->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

TEST_F(RunTest, TheBusyTimeoutSparesAReaderWhoseJobIsDoneOrOfAnotherPriority) {
  JobServiceOptions options{4, "test"};
  options.reader_idle_timeout = std::chrono::seconds(60);
  options.reader_idle_busy_timeout = std::chrono::milliseconds(300);
  Start(options);  // one lane a priority
  // Done: a 1 MiB result, one event, waits for the reader; the job gave its lane back.
  std::unique_ptr<UnreadCall> done = SubmitUnread(port_, ReluOfZeros(1 << 20));
  ASSERT_TRUE(WaitInFlight(0));
  // Of another priority: a low-priority job holds the low lane, waiting for its reader.
  std::unique_ptr<UnreadCall> low = SubmitUnread(port_, ReluOfZeros(8 << 20, v1::PRIORITY_LOW));
  // Holding the normal lane, with a job of its priority waiting for it: cancelled.
  std::unique_ptr<UnreadCall> held = SubmitUnread(port_, ReluOfZeros(8 << 20));
  ASSERT_TRUE(WaitInFlight(2));
  std::this_thread::sleep_for(std::chrono::milliseconds(600));  // both past the busy timeout
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<client::JobResult> next = Run(Spec({2}), AsBytes({-1.0f, 2.0f}));
  EXPECT_TRUE(next.ok()) << next.status();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(held->Finish().error_code(), grpc::StatusCode::CANCELLED);
  // Well past the busy timeout again, jobs of normal priority having waited: the low job
  // still runs, and the done job's result is still there for its reader.
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  EXPECT_EQ(engine_->jobs_in_flight(), 1);
  int64_t bytes = 0;
  bool ok_done = false;
  v1::JobEvent e;
  while (done->reader->Read(&e)) {
    if (e.has_chunk()) bytes += static_cast<int64_t>(e.chunk().data().size());
    if (e.has_done()) ok_done = e.done().code() == 0;
  }
  EXPECT_TRUE(done->reader->Finish().ok());
  EXPECT_EQ(bytes, 1 << 20);
  EXPECT_TRUE(ok_done);
  low->context.TryCancel();
  EXPECT_EQ(low->Finish().error_code(), grpc::StatusCode::CANCELLED);
  ASSERT_TRUE(WaitIdle());
  int cut = 0;
  for (const absl::Status& status : Done()) {
    if (absl::StrContains(status.message(), "--reader-idle-busy-seconds")) ++cut;
  }
  EXPECT_EQ(cut, 1);  // the normal-priority job that held its lane, only
}

TEST_F(RunTest, AClientThatNeverHalfClosesGetsItsDoneAtTheIdleTimeout) {
  JobServiceOptions options{4, "test"};
  options.reader_idle_timeout = std::chrono::milliseconds(300);
  Start(options);
  grpc::ClientContext context;
  std::unique_ptr<RawStream> s = stub_->Run(&context);
  WriteSpec(s.get(), Spec({4}));
  WriteData(s.get(), std::string(16, '\0'));  // the whole input; no WritesDone
  bool done_ok = false;
  v1::JobEvent e;
  while (s->Read(&e)) {
    if (e.has_done() && e.done().code() == 0) done_ok = true;
  }
  EXPECT_TRUE(s->Finish().ok());
  EXPECT_TRUE(done_ok);
}

TEST_F(RunTest, AFailingReaderCancelsTheUpload) {
  int calls = 0;
  absl::StatusOr<client::JobResult> result =
      client_->Run(Spec({1 << 20}), 4 << 20, [&](char* buffer, int64_t n) {
        if (++calls == 2) return absl::DataLossError("disk on fire");
        std::memset(buffer, 0, static_cast<size_t>(n));
        return absl::OkStatus();
      });
  EXPECT_EQ(result.status(), absl::DataLossError("disk on fire"));
}

TEST_F(RunTest, DescribeReportsBothLimits) {
  absl::StatusOr<v1::DescribeResponse> d = client_->Describe();
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->limits().max_input_bytes(), kMaxInline);
  EXPECT_EQ(d->limits().max_stream_input_bytes(), kMaxStreamed);
}

}  // namespace
}  // namespace gpupipe::rpc
