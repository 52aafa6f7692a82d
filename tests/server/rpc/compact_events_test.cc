// SubmitRequest.compact_events against the in-process service: a small job comes as one
// CompleteJob event; clients that do not ask, jobs with a plan and large results still get their
// events one by one.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "client/result_assembler.h"
#include "server/engine/backends/cpu/cpu_backend.h"
#include "server/rpc/job_service.h"
#include "tests/testing/random_tensor.h"

namespace gpupipe::rpc {
namespace {

using gpupipe::testing::AsBytes;
using gpupipe::testing::AsFloats;

class CompactEventsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    engine_ = engine::Engine::Create(engine::CreateCpuBackend({}), engine::EngineOptions{});
    service_ = std::make_unique<JobServiceImpl>(engine_.get(), JobServiceOptions{4, "test"});
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    builder.SetMaxReceiveMessageSize(16 << 20);
    server_ = builder.BuildAndStart();
    ASSERT_NE(port, 0);
    stub_ = v1::JobService::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                                        grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    server_->Shutdown();
    engine_->Shutdown();
  }

  // The raw events of one Submit, and the call's status.
  std::vector<v1::JobEvent> Events(const v1::SubmitRequest& request, grpc::Status* status) {
    grpc::ClientContext context;
    auto reader = stub_->Submit(&context, request);
    std::vector<v1::JobEvent> events;
    v1::JobEvent event;
    while (reader->Read(&event)) events.push_back(event);
    *status = reader->Finish();
    return events;
  }

  static v1::SubmitRequest Relu(const std::vector<float>& x, bool compact) {
    v1::SubmitRequest request;
    request.mutable_input()->set_dtype(v1::DTYPE_FLOAT32);
    request.mutable_input()->add_shape(static_cast<int64_t>(x.size()));
    request.mutable_input()->set_data(AsBytes(x));
    request.add_ops()->mutable_relu();
    request.set_compact_events(compact);
    return request;
  }

  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<JobServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::JobService::Stub> stub_;
};

TEST_F(CompactEventsTest, ASmallJobIsOneCompleteJobEvent) {
  grpc::Status status;
  const std::vector<v1::JobEvent> events = Events(Relu({1, -2, 3, -4}, true), &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(events.size(), 1u);
  ASSERT_TRUE(events[0].has_complete());
  const v1::CompleteJob& job = events[0].complete();
  EXPECT_FALSE(job.accepted().job_id().empty());
  EXPECT_EQ(job.chunk().offset(), 0);
  EXPECT_EQ(AsFloats(job.chunk().data()), (std::vector<float>{1, 0, 3, 0}));
  EXPECT_TRUE(job.has_timing());
  EXPECT_EQ(job.done().code(), 0);
  // The client library reads it as the four events it stands for.
  client::ResultAssembler assembler(false);
  ASSERT_TRUE(assembler.Add(events[0]).ok());
  absl::StatusOr<client::JobResult> result = assembler.Finish();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(AsFloats(result->output.data()), (std::vector<float>{1, 0, 3, 0}));
  EXPECT_TRUE(result->has_timing);
}

TEST_F(CompactEventsTest, ClientsThatDoNotAskGetEveryEvent) {
  grpc::Status status;
  const std::vector<v1::JobEvent> events = Events(Relu({1, -2}, false), &status);
  ASSERT_TRUE(status.ok());
  ASSERT_EQ(events.size(), 4u);
  EXPECT_TRUE(events[0].has_accepted());
  EXPECT_TRUE(events[1].has_chunk());
  EXPECT_TRUE(events[2].has_timing());
  EXPECT_TRUE(events[3].has_done());
}

TEST_F(CompactEventsTest, APlanOrALargeResultKeepsTheEventsApart) {
  grpc::Status status;
  v1::SubmitRequest explained = Relu({1, -2}, true);
  explained.set_explain(true);
  std::vector<v1::JobEvent> events = Events(explained, &status);
  ASSERT_TRUE(status.ok());
  ASSERT_GE(events.size(), 5u);
  EXPECT_TRUE(events[0].has_accepted());
  EXPECT_TRUE(events[1].has_plan());

  const std::vector<float> big = gpupipe::testing::RandomFloats(3 << 18, 1);  // 3 MiB
  events = Events(Relu(big, true), &status);
  ASSERT_TRUE(status.ok());
  ASSERT_GE(events.size(), 5u);  // Accepted, several chunks, Timing, Done
  EXPECT_TRUE(events.front().has_accepted());
  EXPECT_TRUE(events.back().has_done());
  for (const v1::JobEvent& e : events) EXPECT_FALSE(e.has_complete());
}

TEST_F(CompactEventsTest, ARefusedJobHasNoEventsAndADryRunKeepsItsPlan) {
  grpc::Status status;
  v1::SubmitRequest refused = Relu({1, 2}, true);
  refused.mutable_input()->set_data("abc");  // not 2 float32
  EXPECT_TRUE(Events(refused, &status).empty());
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  v1::SubmitRequest dry = Relu({1, 2}, true);
  dry.set_dry_run(true);
  const std::vector<v1::JobEvent> events = Events(dry, &status);
  ASSERT_TRUE(status.ok());
  // A dry run has a Plan: its events stay apart.
  ASSERT_EQ(events.size(), 3u);
  EXPECT_TRUE(events[1].has_plan());
}

TEST_F(CompactEventsTest, SubmitSmallAnswersWithTheWholeJob) {
  grpc::ClientContext context;
  v1::CompleteJob job;
  const grpc::Status status = stub_->SubmitSmall(&context, Relu({1, -2, 3, -4}, false), &job);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_FALSE(job.accepted().job_id().empty());
  EXPECT_EQ(job.accepted().output_shape_size(), 1);
  EXPECT_EQ(job.chunk().offset(), 0);
  EXPECT_EQ(AsFloats(job.chunk().data()), (std::vector<float>{1, 0, 3, 0}));
  EXPECT_TRUE(job.has_timing());
  EXPECT_GT(job.timing().total_us(), 0);
  EXPECT_EQ(job.done().code(), 0);
}

TEST_F(CompactEventsTest, SubmitSmallTakesAJobOfAnySizeThatFitsOneMessage) {
  // 768 KiB in and out: one chunk, one message, as a job near the limit.
  const std::vector<float> x = gpupipe::testing::RandomFloats(3 << 16, 3);
  grpc::ClientContext context;
  v1::CompleteJob job;
  const grpc::Status status = stub_->SubmitSmall(&context, Relu(x, false), &job);
  ASSERT_TRUE(status.ok()) << status.error_message();
  std::vector<float> expected = x;
  for (float& v : expected) v = v > 0 ? v : 0;
  EXPECT_EQ(AsFloats(job.chunk().data()), expected);
}

TEST_F(CompactEventsTest, SubmitSmallRefusesWhatDoesNotFitOneMessageBeforeAcceptingIt) {
  const auto refused = [&](const v1::SubmitRequest& request, const char* why) {
    grpc::ClientContext context;
    v1::CompleteJob job;
    const grpc::Status status = stub_->SubmitSmall(&context, request, &job);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << why;
    EXPECT_NE(status.error_message().find(why), std::string::npos) << status.error_message();
    const auto& trailers = context.GetServerTrailingMetadata();
    const auto mark = trailers.find("gpupipe-accepted");
    ASSERT_NE(mark, trailers.end()) << why;
    EXPECT_EQ(mark->second, "0");
  };
  v1::SubmitRequest explained = Relu({1, -2}, false);
  explained.set_explain(true);
  refused(explained, "send a job with explain or dry_run with Submit");
  v1::SubmitRequest dry = Relu({1, -2}, false);
  dry.set_dry_run(true);
  refused(dry, "send a job with explain or dry_run with Submit");
  // 3 MiB of result: more than one message.
  refused(Relu(gpupipe::testing::RandomFloats(3 << 18, 1), false), "is larger than SubmitSmall");
  // A small result of a job that runs as several chunks.
  v1::SubmitRequest chunked = Relu(gpupipe::testing::RandomFloats(1 << 16, 2), false);
  chunked.mutable_options()->set_chunk_bytes(64 << 10);
  refused(chunked, "chunks and SubmitSmall takes jobs of one");
  v1::SubmitRequest bad = Relu({1, 2}, false);
  bad.mutable_input()->set_data("abc");  // not 2 float32
  refused(bad, "");
  // The service still runs jobs after refusing those.
  grpc::ClientContext context;
  v1::CompleteJob job;
  EXPECT_TRUE(stub_->SubmitSmall(&context, Relu({-1}, false), &job).ok());
  EXPECT_EQ(AsFloats(job.chunk().data()), (std::vector<float>{0}));
}

}  // namespace
}  // namespace gpupipe::rpc
