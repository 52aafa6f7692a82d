// JobClient against an in-process fake JobService that replays scripted events.
#include "client/job_client.h"

#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"

namespace gpupipe {
namespace client {
namespace {

using ::testing::HasSubstr;

class FakeJobService final : public v1::JobService::Service {
 public:
  std::vector<v1::JobEvent> events;
  grpc::Status final_status = grpc::Status::OK;
  v1::SubmitRequest last_request;
  // The next `refusals` calls are refused UNAVAILABLE before any event, as a draining daemon
  // refuses them, marked as having accepted no job unless `mark_refusals` is false.
  int refusals = 0;
  bool mark_refusals = true;
  // The mark on the scripted call too (which a daemon never sends after an event).
  bool mark_final = false;
  int submits = 0;  // calls received
  // The next `undecodable` Submit calls get UNIMPLEMENTED with no message, as gRPC answers a
  // request it cannot decode.
  int undecodable = 0;
  std::mutex mu;

  grpc::Status Submit(grpc::ServerContext* context, const v1::SubmitRequest* request,
                      grpc::ServerWriter<v1::JobEvent>* writer) override {
    {
      std::lock_guard<std::mutex> lock(mu);
      ++submits;
      if (undecodable > 0) {
        --undecodable;
        return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "");
      }
      if (refusals > 0) {
        --refusals;
        if (mark_refusals) context->AddTrailingMetadata(kAcceptedMetadataKey, "0");
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down");
      }
      last_request = *request;
      if (mark_final) context->AddTrailingMetadata(kAcceptedMetadataKey, "0");
    }
    for (const v1::JobEvent& e : events) writer->Write(e);
    return final_status;
  }

  // SubmitSmall: UNIMPLEMENTED (a daemon without it) unless `small_answers`; then
  // `small_status` (marked as having accepted no job where `mark_small`) or `small_response`.
  bool small_answers = false;
  grpc::Status small_status = grpc::Status::OK;
  bool mark_small = true;
  v1::CompleteJob small_response;
  int submit_smalls = 0;  // calls received
  v1::SubmitRequest last_small_request;
  std::vector<std::string> small_peers;  // each call's client address, in order

  grpc::Status SubmitSmall(grpc::ServerContext* context, const v1::SubmitRequest* request,
                           v1::CompleteJob* response) override {
    std::lock_guard<std::mutex> lock(mu);
    ++submit_smalls;
    last_small_request = *request;
    small_peers.push_back(context->peer());
    if (!small_answers) return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "");
    if (!small_status.ok()) {
      if (mark_small) context->AddTrailingMetadata(kAcceptedMetadataKey, "0");
      return small_status;
    }
    *response = small_response;
    return grpc::Status::OK;
  }

  grpc::Status Describe(grpc::ServerContext*, const v1::DescribeRequest*,
                        v1::DescribeResponse* response) override {
    response->set_backend("cpu");
    response->set_server_version("fake");
    return grpc::Status::OK;
  }
};

class JobClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port, 0);
    target_ = "127.0.0.1:" + std::to_string(port);
    ClientOptions options;
    options.deadline_seconds = 10;
    absl::StatusOr<std::unique_ptr<JobClient>> client = JobClient::Create(target_, options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  void Script(std::vector<v1::JobEvent> events, grpc::Status status = grpc::Status::OK) {
    service_.events = std::move(events);
    service_.final_status = status;
  }

  static v1::JobEvent Accepted(std::vector<int64_t> shape) {
    v1::JobEvent e;
    e.set_job_id("j9");
    e.mutable_accepted()->set_job_id("j9");
    e.mutable_accepted()->set_backend("cpu");
    e.mutable_accepted()->set_output_dtype(v1::DTYPE_FLOAT32);
    for (int64_t d : shape) e.mutable_accepted()->add_output_shape(d);
    return e;
  }
  static v1::JobEvent Chunk(int64_t offset, std::string data) {
    v1::JobEvent e;
    e.mutable_chunk()->set_offset(offset);
    e.mutable_chunk()->set_data(std::move(data));
    return e;
  }
  static v1::JobEvent Done(int code = 0, std::string message = "") {
    v1::JobEvent e;
    e.mutable_done()->set_code(code);
    e.mutable_done()->set_message(std::move(message));
    return e;
  }

  // A job with a result of one float32.
  void ScriptOneFloat() { Script({Accepted({1}), Chunk(0, std::string(4, 'x')), Done()}); }

  int Submits() {
    std::lock_guard<std::mutex> lock(service_.mu);
    return service_.submits;
  }

  int SubmitSmalls() {
    std::lock_guard<std::mutex> lock(service_.mu);
    return service_.submit_smalls;
  }

  absl::StatusOr<JobResult> SubmitAsyncAndWait(const v1::SubmitRequest& request) {
    std::promise<absl::StatusOr<JobResult>> done;
    client_->SubmitAsync(request,
                         [&](absl::StatusOr<JobResult> r) { done.set_value(std::move(r)); });
    return done.get_future().get();
  }

  // The daemon answers SubmitSmall with one float32 "yyyy".
  void AnswerSmall() {
    service_.small_answers = true;
    v1::CompleteJob& job = service_.small_response;
    *job.mutable_accepted() = Accepted({1}).accepted();
    job.mutable_chunk()->set_data("yyyy");
    job.mutable_timing()->set_total_us(7);
    job.mutable_done()->set_code(0);
  }

  std::string target_;
  FakeJobService service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<JobClient> client_;
};

TEST_F(JobClientTest, Describe) {
  absl::StatusOr<v1::DescribeResponse> d = client_->Describe();
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->server_version(), "fake");
}

TEST_F(JobClientTest, SubmitAssemblesChunksAndReportsEvents) {
  // Chunks of 1 MiB, the largest the server sends, must pass default client limits.
  const std::string mib(1 << 20, 'z');
  v1::JobEvent timing;
  timing.mutable_timing()->set_total_us(42);
  Script({Accepted({2, 1 << 18}), Chunk(0, mib), Chunk(1 << 20, mib), timing, Done()});
  v1::SubmitRequest request;
  request.set_client_tag("t");
  int events = 0;
  absl::StatusOr<JobResult> r =
      client_->Submit(request, [&](const v1::JobEvent&) { ++events; });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(events, 5);
  EXPECT_EQ(r->accepted.job_id(), "j9");
  EXPECT_EQ(r->output.data().size(), 2u << 20);
  EXPECT_EQ(r->timing.total_us(), 42);
  EXPECT_EQ(service_.last_request.client_tag(), "t");
}

// Takes the bytes of a result; fails its second write when asked to.
class CountingSink : public ResultSink {
 public:
  absl::Status Begin(v1::DType, const std::vector<int64_t>& output_shape) override {
    shape = output_shape;
    return absl::OkStatus();
  }
  absl::Status Write(int64_t offset, absl::string_view data) override {
    if (fail_second_write && writes == 1) return absl::UnavailableError("disk gone");
    EXPECT_EQ(offset, bytes);
    bytes += static_cast<int64_t>(data.size());
    ++writes;
    return absl::OkStatus();
  }
  std::vector<int64_t> shape;
  int64_t bytes = 0;
  int writes = 0;
  bool fail_second_write = false;
};

TEST_F(JobClientTest, SubmitHandsTheResultToASink) {
  const std::string mib(1 << 20, 'z');
  Script({Accepted({2, 1 << 18}), Chunk(0, mib), Chunk(1 << 20, mib), Done()});
  CountingSink sink;
  int chunks_seen = 0;
  absl::StatusOr<JobResult> r = client_->Submit(
      v1::SubmitRequest(), [&](const v1::JobEvent& e) { chunks_seen += e.has_chunk(); }, &sink);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(sink.shape, (std::vector<int64_t>{2, 1 << 18}));
  EXPECT_EQ(sink.writes, 2);
  EXPECT_EQ(sink.bytes, 2 << 20);
  EXPECT_EQ(chunks_seen, 2);
  EXPECT_TRUE(r->output.data().empty());
}

TEST_F(JobClientTest, ASinkErrorEndsTheCall) {
  Script({Accepted({3}), Chunk(0, "abcd"), Chunk(4, "efgh"), Chunk(8, "ijkl"), Done()});
  CountingSink sink;
  sink.fail_second_write = true;
  int events = 0;
  absl::StatusOr<JobResult> r =
      client_->Submit(v1::SubmitRequest(), [&](const v1::JobEvent&) { ++events; }, &sink);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(r.status().message(), "disk gone");
  EXPECT_EQ(events, 2);  // Accepted and the first chunk; nothing after the failed one
}

TEST_F(JobClientTest, SubmitKeepsThePlan) {
  v1::JobEvent plan;
  plan.mutable_plan()->set_launch("graph");
  plan.mutable_plan()->add_kernels()->set_name("ew");
  v1::JobEvent timing;
  timing.mutable_timing()->set_graph("hit");
  Script({Accepted({1}), plan, Chunk(0, "abcd"), timing, Done()});
  v1::SubmitRequest request;
  request.set_explain(true);
  absl::StatusOr<JobResult> r = client_->Submit(request);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->has_plan);
  EXPECT_EQ(r->plan.launch(), "graph");
  EXPECT_EQ(r->timing.graph(), "hit");
  EXPECT_FALSE(r->dry_run);
  EXPECT_TRUE(service_.last_request.explain());
}

TEST_F(JobClientTest, DryRunNeedsNoOutputBytes) {
  v1::JobEvent plan;
  plan.mutable_plan()->add_kernels()->set_name("softmax.stats");
  Script({Accepted({64, 100}), plan, Done()});
  v1::SubmitRequest request;
  request.set_dry_run(true);
  absl::StatusOr<JobResult> r = client_->Submit(request);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->dry_run);
  EXPECT_TRUE(r->has_plan);
  EXPECT_TRUE(r->output.data().empty());
  EXPECT_TRUE(service_.last_request.dry_run());

  // The same stream is short for a request that is not a dry run.
  absl::StatusOr<JobResult> ran = client_->Submit(v1::SubmitRequest());
  ASSERT_FALSE(ran.ok());
  EXPECT_EQ(ran.status().code(), absl::StatusCode::kDataLoss);
}

TEST_F(JobClientTest, DryRunThatRanIsAProtocolError) {
  // A server that ignores dry_run runs the job and sends chunks.
  Script({Accepted({1}), Chunk(0, "abcd"), Done()});
  v1::SubmitRequest request;
  request.set_dry_run(true);
  absl::StatusOr<JobResult> r = client_->Submit(request);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(r.status().message(), HasSubstr("ResultChunk in a dry run"));
}

TEST_F(JobClientTest, RpcErrorKeepsCodeAndMessage) {
  Script({}, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "input.shape: rank 9 > 8"));
  absl::StatusOr<JobResult> r = client_->Submit(v1::SubmitRequest());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "input.shape: rank 9 > 8");
}

TEST_F(JobClientTest, DoneErrorKeepsCodeAndMessage) {
  Script({Accepted({1}), Done(13, "kernel failed")},
         grpc::Status(grpc::StatusCode::INTERNAL, "kernel failed"));
  absl::StatusOr<JobResult> r = client_->Submit(v1::SubmitRequest());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(r.status().message(), "kernel failed");
}

TEST_F(JobClientTest, StreamWithoutDone) {
  Script({Accepted({1}), Chunk(0, "abcd")});
  absl::StatusOr<JobResult> r = client_->Submit(v1::SubmitRequest());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(r.status().message(), HasSubstr("stream ended without a Done event"));
}

TEST_F(JobClientTest, BrokenStreamIsReported) {
  Script({Accepted({2}), Chunk(4, "abcd"), Done()});
  absl::StatusOr<JobResult> r = client_->Submit(v1::SubmitRequest());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(r.status().message(), HasSubstr("ResultChunk at offset 4, expected offset 0"));
}

TEST(JobClientCreateTest, RejectsBadArguments) {
  EXPECT_FALSE(JobClient::Create("").ok());
  ClientOptions options;
  options.deadline_seconds = 0;
  EXPECT_FALSE(JobClient::Create("127.0.0.1:1", options).ok());
}

TEST_F(JobClientTest, SubmitSendsAJobRefusedBeforeAcceptanceAgain) {
  service_.refusals = 2;
  ScriptOneFloat();
  absl::StatusOr<JobResult> r = client_->Submit(v1::SubmitRequest());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Submits(), 3);
  EXPECT_EQ(r->output.data(), "xxxx");
  EXPECT_THAT(r->peer, ::testing::StartsWith("ipv4:127.0.0.1:"));
}

TEST_F(JobClientTest, SubmitAsyncSendsAJobRefusedBeforeAcceptanceAgain) {
  service_.refusals = 2;
  ScriptOneFloat();
  std::promise<absl::StatusOr<JobResult>> done;
  client_->SubmitAsync(v1::SubmitRequest(),
                       [&](absl::StatusOr<JobResult> r) { done.set_value(std::move(r)); });
  absl::StatusOr<JobResult> r = done.get_future().get();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Submits(), 3);
  EXPECT_THAT(r->peer, ::testing::StartsWith("ipv4:127.0.0.1:"));
}

TEST_F(JobClientTest, SubmitGivesUpAfterItsAttempts) {
  service_.refusals = 10;
  absl::StatusOr<JobResult> r = client_->Submit(v1::SubmitRequest());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(r.status().message(), "the server is shutting down");
  EXPECT_EQ(Submits(), ClientOptions().submit_attempts);

  std::promise<absl::StatusOr<JobResult>> done;
  client_->SubmitAsync(v1::SubmitRequest(),
                       [&](absl::StatusOr<JobResult> r) { done.set_value(std::move(r)); });
  EXPECT_EQ(done.get_future().get().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(Submits(), 2 * ClientOptions().submit_attempts);
}

TEST_F(JobClientTest, SubmitAttemptsOfOneNeverSendsAgain) {
  service_.refusals = 1;
  ClientOptions options;
  options.submit_attempts = 1;
  auto client = JobClient::Create(target_, options);
  ASSERT_TRUE(client.ok());
  EXPECT_EQ((*client)->Submit(v1::SubmitRequest()).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(Submits(), 1);
  options.submit_attempts = 0;
  EXPECT_EQ(JobClient::Create(target_, options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(JobClientTest, AnUnmarkedUnavailableMayHaveRunAndIsNotSentAgain) {
  service_.refusals = 1;
  service_.mark_refusals = false;
  ScriptOneFloat();
  EXPECT_EQ(client_->Submit(v1::SubmitRequest()).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(Submits(), 1);
}

TEST_F(JobClientTest, AJobWithAnEventIsNeverSentAgain) {
  // Accepted, then the daemon stopped it: whatever the trailers say, it may have run.
  service_.mark_final = true;
  Script({Accepted({1})}, grpc::Status(grpc::StatusCode::UNAVAILABLE, "stopped"));
  EXPECT_EQ(client_->Submit(v1::SubmitRequest()).status().code(), absl::StatusCode::kUnavailable);
  std::promise<absl::StatusOr<JobResult>> done;
  client_->SubmitAsync(v1::SubmitRequest(),
                       [&](absl::StatusOr<JobResult> r) { done.set_value(std::move(r)); });
  EXPECT_EQ(done.get_future().get().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(Submits(), 2);
}

TEST_F(JobClientTest, SubmitAsyncSendsASmallJobAsOneSubmitSmallCall) {
  AnswerSmall();
  ScriptOneFloat();
  absl::StatusOr<JobResult> r = SubmitAsyncAndWait(v1::SubmitRequest());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->output.data(), "yyyy");
  EXPECT_EQ(r->accepted.job_id(), "j9");
  EXPECT_TRUE(r->has_timing);
  EXPECT_EQ(r->timing.total_us(), 7);
  EXPECT_THAT(r->peer, ::testing::StartsWith("ipv4:127.0.0.1:"));
  EXPECT_EQ(SubmitSmalls(), 1);
  EXPECT_EQ(Submits(), 0);
}

TEST_F(JobClientTest, HighPriorityJobsGoOnAConnectionOfTheirOwn) {
  AnswerSmall();
  ScriptOneFloat();
  v1::SubmitRequest low;
  low.set_priority(v1::PRIORITY_LOW);
  v1::SubmitRequest high;
  high.set_priority(v1::PRIORITY_HIGH);
  for (const v1::SubmitRequest* request : {&low, &high, &low, &high}) {
    absl::StatusOr<JobResult> r = SubmitAsyncAndWait(*request);
    ASSERT_TRUE(r.ok()) << r.status();
  }
  std::lock_guard<std::mutex> lock(service_.mu);
  ASSERT_EQ(service_.small_peers.size(), 4u);
  // A connection is a client port: the low jobs share one, the high jobs another.
  EXPECT_EQ(service_.small_peers[0], service_.small_peers[2]);
  EXPECT_EQ(service_.small_peers[1], service_.small_peers[3]);
  EXPECT_NE(service_.small_peers[0], service_.small_peers[1]);
}

TEST_F(JobClientTest, ASharedRequestIsSentManyTimesAndLetGo) {
  AnswerSmall();
  auto request = std::make_shared<v1::SubmitRequest>();
  request->set_client_tag("shared");
  request->set_compact_events(true);
  std::shared_ptr<const v1::SubmitRequest> shared = request;
  constexpr int kJobs = 8;
  std::vector<std::promise<absl::StatusOr<JobResult>>> done(kJobs);
  for (int i = 0; i < kJobs; ++i) {
    client_->SubmitAsync(shared, [&done, i](absl::StatusOr<JobResult> r) {
      done[static_cast<size_t>(i)].set_value(std::move(r));
    });
  }
  for (auto& d : done) {
    absl::StatusOr<JobResult> r = d.get_future().get();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->output.data(), "yyyy");
  }
  EXPECT_EQ(SubmitSmalls(), kJobs);
  {
    std::lock_guard<std::mutex> lock(service_.mu);
    EXPECT_EQ(service_.last_small_request.client_tag(), "shared");
  }
  // The jobs let go of the request once their callbacks returned.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (shared.use_count() > 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(shared.use_count(), 2);  // `request` and `shared`
}

TEST_F(JobClientTest, ASharedRequestWithoutCompactEventsIsSentWithThemAndLeftAsItWas) {
  AnswerSmall();
  auto request = std::make_shared<v1::SubmitRequest>();
  std::promise<absl::StatusOr<JobResult>> done;
  client_->SubmitAsync(std::shared_ptr<const v1::SubmitRequest>(request),
                       [&](absl::StatusOr<JobResult> r) { done.set_value(std::move(r)); });
  ASSERT_TRUE(done.get_future().get().ok());
  EXPECT_FALSE(request->compact_events());
  std::lock_guard<std::mutex> lock(service_.mu);
  EXPECT_TRUE(service_.last_small_request.compact_events());
}

TEST_F(JobClientTest, AJobSubmitSmallRefusesGoesOnAsSubmit) {
  AnswerSmall();
  service_.small_status =
      grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the job runs as 3 chunks");
  ScriptOneFloat();
  absl::StatusOr<JobResult> r = SubmitAsyncAndWait(v1::SubmitRequest());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->output.data(), "xxxx");
  EXPECT_EQ(SubmitSmalls(), 1);
  EXPECT_EQ(Submits(), 1);
}

TEST_F(JobClientTest, AnUnmarkedSubmitSmallFailureIsTheJobsOwn) {
  // Without the mark the job may have run: it is not sent again.
  AnswerSmall();
  service_.small_status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad");
  service_.mark_small = false;
  ScriptOneFloat();
  EXPECT_EQ(SubmitAsyncAndWait(v1::SubmitRequest()).status().code(),
            absl::StatusCode::kInvalidArgument);
  service_.small_status = grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "late");
  service_.mark_small = true;  // a job's own ending, never a reason to send it again
  EXPECT_EQ(SubmitAsyncAndWait(v1::SubmitRequest()).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(Submits(), 0);
}

TEST_F(JobClientTest, ADaemonWithoutSubmitSmallIsAskedOnce) {
  ScriptOneFloat();
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<JobResult> r = SubmitAsyncAndWait(v1::SubmitRequest());
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->output.data(), "xxxx");
  }
  EXPECT_EQ(SubmitSmalls(), 1);
  EXPECT_EQ(Submits(), 3);
}

TEST_F(JobClientTest, AnUndecodableRequestDoesNotTurnSubmitSmallOff) {
  // gRPC answers a request it cannot decode (bad UTF-8 in a string field) with UNIMPLEMENTED,
  // as it answers a method the daemon lacks. A job whose Submit gets the same answer says
  // nothing about SubmitSmall: the next job still tries it.
  AnswerSmall();
  service_.small_answers = false;  // SubmitSmall: UNIMPLEMENTED
  service_.undecodable = 1;
  ScriptOneFloat();
  EXPECT_EQ(SubmitAsyncAndWait(v1::SubmitRequest()).status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(SubmitSmalls(), 1);
  EXPECT_EQ(Submits(), 1);
  service_.small_answers = true;  // the daemon does answer SubmitSmall
  absl::StatusOr<JobResult> r = SubmitAsyncAndWait(v1::SubmitRequest());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->output.data(), "yyyy");
  EXPECT_EQ(SubmitSmalls(), 2);
  EXPECT_EQ(Submits(), 1);
}

TEST_F(JobClientTest, LargePlannedOrOptedOutJobsGoAsSubmit) {
  AnswerSmall();
  ScriptOneFloat();
  v1::SubmitRequest large;
  large.mutable_input()->set_data(std::string(kSubmitSmallInputBytes + 1, '\0'));
  EXPECT_TRUE(SubmitAsyncAndWait(large).ok());
  v1::SubmitRequest explained;
  explained.set_explain(true);
  EXPECT_TRUE(SubmitAsyncAndWait(explained).ok());
  ClientOptions options;
  options.submit_small = false;
  auto streamed = JobClient::Create(target_, options);
  ASSERT_TRUE(streamed.ok());
  std::promise<absl::StatusOr<JobResult>> done;
  (*streamed)->SubmitAsync(v1::SubmitRequest(),
                           [&](absl::StatusOr<JobResult> r) { done.set_value(std::move(r)); });
  EXPECT_TRUE(done.get_future().get().ok());
  EXPECT_EQ(SubmitSmalls(), 0);
  EXPECT_EQ(Submits(), 3);
}

TEST(SubmitRetryDelayTest, ShortAndDoubling) {
  EXPECT_EQ(SubmitRetryDelay(2).count(), 50);
  EXPECT_EQ(SubmitRetryDelay(3).count(), 100);
  EXPECT_EQ(SubmitRetryDelay(30).count(), 1000);
}

TEST(JobClientCreateTest, UnreachableServerIsUnavailable) {
  ClientOptions options;
  options.deadline_seconds = 5;
  absl::StatusOr<std::unique_ptr<JobClient>> client = JobClient::Create("127.0.0.1:1", options);
  ASSERT_TRUE(client.ok());
  absl::StatusOr<v1::DescribeResponse> d = (*client)->Describe();
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kUnavailable);
}

TEST(TargetWithPortTest, AHostAloneGetsTheDefaultPort) {
  EXPECT_EQ(TargetWithPort("gpu7"), "gpu7:50051");
  EXPECT_EQ(TargetWithPort("10.0.0.7"), "10.0.0.7:50051");
  EXPECT_EQ(TargetWithPort("[::1]"), "[::1]:50051");
  EXPECT_EQ(TargetWithPort("gpu7:6000"), "gpu7:6000");
  EXPECT_EQ(TargetWithPort("[::1]:6000"), "[::1]:6000");
  EXPECT_EQ(TargetWithPort("dns:///gpupipe.default.svc:50051"), "dns:///gpupipe.default.svc:50051");
  EXPECT_EQ(TargetWithPort("unix:/run/gpupipe.sock"), "unix:/run/gpupipe.sock");
}

TEST(JobClientCreateTest, AClientCertificateNeedsItsKey) {
  ClientOptions options;
  options.tls_cert_pem = "cert";
  EXPECT_EQ(JobClient::Create("127.0.0.1:1", options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(FromGrpcStatusTest, MapsCodesOneToOne) {
  for (int code = 1; code <= 16; ++code) {
    absl::Status s = FromGrpcStatus(grpc::Status(static_cast<grpc::StatusCode>(code), "m"));
    EXPECT_EQ(static_cast<int>(s.code()), code);
    EXPECT_EQ(s.message(), "m");
  }
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
}

}  // namespace
}  // namespace client
}  // namespace gpupipe
