// SubmitSmall calls against the in-process service, as a hostile mix of clients makes them: many
// at once on one lane, some cancelled by their client at once or a moment later, some with a
// deadline that passes while they wait. Every call must end exactly once, with its job's right
// result or a cancellation, and leave nothing behind: no call in progress (its reactor reached
// OnDone), no job in flight, no unread bytes.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/engine/backends/cpu/cpu_backend.h"
#include "server/rpc/job_service.h"
#include "tests/testing/random_tensor.h"

namespace gpupipe::rpc {
namespace {

using gpupipe::testing::AsBytes;
using gpupipe::testing::AsFloats;
using Clock = std::chrono::steady_clock;

constexpr int kClients = 8;
constexpr int kCallsPerClient = 60;
constexpr int kCalls = kClients * kCallsPerClient;
// Every call's deadline, so that a call the service never ends fails the test instead of
// hanging it: far beyond what any of them takes.
constexpr auto kCallDeadline = std::chrono::seconds(60);

class SubmitSmallReactorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // One lane a level, so that the flood's jobs queue behind one another and its cancels and
    // deadlines find them queued.
    engine::CpuBackendOptions lanes;
    lanes.lanes_per_level = 1;
    // Every call comes from one client (one address, no client-id): its jobs in flight must not
    // meet the per-client limit, which would refuse calls that are to be served.
    engine::EngineOptions options;
    options.admission.max_client_jobs = 4 * kCalls;
    engine_ = engine::Engine::Create(engine::CreateCpuBackend(lanes), options);
    service_ = std::make_unique<JobServiceImpl>(engine_.get(), JobServiceOptions{4, "test"});
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(port_, 0);
  }
  void TearDown() override {
    server_->Shutdown();
    engine_->Shutdown();
    server_.reset();
    service_.reset();
  }

  std::unique_ptr<v1::JobService::Stub> NewStub() const {
    return v1::JobService::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port_),
                                                       grpc::InsecureChannelCredentials()));
  }

  // Jobs of all priorities that ended with `status`, by the engine's count.
  int64_t JobsEnded(const std::string& status) const {
    const v1::StatsResponse stats = service_->Stats();
    int64_t n = 0;
    for (const v1::PriorityStats& p : stats.priorities()) {
      const auto it = p.jobs().by_status().find(status);
      if (it != p.jobs().by_status().end()) n += it->second;
    }
    return n;
  }

  int64_t UnreadBytes() const {
    const v1::StatsResponse stats = service_->Stats();
    for (const v1::PoolStats& pool : stats.pools()) {
      if (pool.name() == "unread_results") return pool.used_bytes();
    }
    return -1;
  }

  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<JobServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

// One call and what its client saw.
struct SmallCall {
  grpc::ClientContext context;
  v1::SubmitRequest request;  // gRPC may read it until the call ends
  v1::CompleteJob response;
  std::vector<float> input;
  grpc::Status status;
  int ends = 0;  // times its callback ran
};

TEST_F(SubmitSmallReactorTest, EveryCallEndsOnceUnderCancelsAndDeadlinesFromManyClients) {
  std::mutex mu;
  std::condition_variable all_ended;
  int ended = 0;
  std::vector<std::unique_ptr<SmallCall>> calls;
  calls.reserve(kCalls);
  for (int i = 0; i < kCalls; ++i) {
    calls.push_back(std::make_unique<SmallCall>());
    // Some large enough that the lane's queue builds up, others small enough to run at once.
    calls.back()->input = gpupipe::testing::RandomFloats(i % 3 == 0 ? 16 << 10 : 1 << 10,
                                                         static_cast<uint64_t>(i) + 1);
  }

  // Half the clients flood the lane (every call sent at once: cancels and deadlines find their
  // jobs queued); then the other half send one call at a time onto the same lane once the
  // flood has ended, cancelling a moment later (the job queued, running or done by then).
  const auto run_client = [&](int c, bool one_at_a_time) {
    std::unique_ptr<v1::JobService::Stub> stub = NewStub();
    for (int k = 0; k < kCallsPerClient; ++k) {
      SmallCall& call = *calls[static_cast<size_t>(c * kCallsPerClient + k)];
      v1::SubmitRequest& request = call.request;
      request.mutable_input()->set_dtype(v1::DTYPE_FLOAT32);
      request.mutable_input()->add_shape(static_cast<int64_t>(call.input.size()));
      request.mutable_input()->set_data(AsBytes(call.input));
      request.add_ops()->mutable_relu();
      request.add_ops()->mutable_softmax();
      const int kind = k % 4;  // 0, 1: read; 2: cancelled; 3: a deadline that may pass
      call.context.set_deadline(std::chrono::system_clock::now() +
                                (kind == 3 ? std::chrono::microseconds(500 * (k % 11))
                                           : std::chrono::microseconds(kCallDeadline)));
      SmallCall* const ending = &call;  // the callback may run after this iteration
      stub->async()->SubmitSmall(&call.context, &request, &call.response,
                                 [&mu, &all_ended, &ended, ending](grpc::Status status) {
                                   std::lock_guard<std::mutex> lock(mu);
                                   ending->status = std::move(status);
                                   ++ending->ends;
                                   ++ended;
                                   all_ended.notify_all();
                                 });
      if (kind == 2) {
        std::this_thread::sleep_for(std::chrono::microseconds(one_at_a_time ? 150 * (k % 9) : 0));
        call.context.TryCancel();
      }
      if (one_at_a_time) {
        std::unique_lock<std::mutex> lock(mu);
        all_ended.wait(lock, [&] { return call.ends > 0; });  // within its deadline
      }
    }
  };
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients / 2; ++c) clients.emplace_back(run_client, c, false);
  for (std::thread& t : clients) t.join();
  clients.clear();
  {
    std::unique_lock<std::mutex> lock(mu);
    EXPECT_TRUE(all_ended.wait_for(lock, kCallDeadline + std::chrono::seconds(30),
                                   [&] { return ended == kCalls / 2; }));
  }
  for (int c = kClients / 2; c < kClients; ++c) clients.emplace_back(run_client, c, true);
  for (std::thread& t : clients) t.join();
  {
    std::unique_lock<std::mutex> lock(mu);
    // Every call has a deadline, so none is still in progress when this gives up.
    ASSERT_TRUE(all_ended.wait_for(lock, kCallDeadline + std::chrono::seconds(30),
                                   [&] { return ended == kCalls; }))
        << ended << " of " << calls.size() << " calls ended";
  }

  int cancelled = 0;
  int timed_out = 0;
  for (size_t i = 0; i < calls.size(); ++i) {
    const SmallCall& call = *calls[i];
    EXPECT_EQ(call.ends, 1) << "call " << i;
    const int kind = static_cast<int>(i % kCallsPerClient) % 4;
    if (call.status.ok()) {
      // The CPU reference: relu, then softmax over the row.
      std::vector<double> e(call.input.size());
      double max = 0;
      for (float v : call.input) max = std::max(max, static_cast<double>(std::max(v, 0.0f)));
      double sum = 0;
      for (size_t j = 0; j < e.size(); ++j) {
        e[j] = std::exp(std::max(static_cast<double>(call.input[j]), 0.0) - max);
        sum += e[j];
      }
      const std::vector<float> got = AsFloats(call.response.chunk().data());
      ASSERT_EQ(got.size(), call.input.size()) << "call " << i;
      for (size_t j = 0; j < got.size(); ++j) {
        ASSERT_NEAR(got[j], e[j] / sum, 1e-6 + 1e-4 * e[j] / sum) << "call " << i << " [" << j
                                                                  << "]";
      }
      EXPECT_EQ(call.response.done().code(), 0) << call.response.done().message();
    } else {
      // Only the cancelled and the deadline calls may fail, and only as such.
      EXPECT_TRUE(kind == 2 || kind == 3) << "call " << i << ": " << call.status.error_message();
      EXPECT_TRUE(call.status.error_code() == grpc::StatusCode::CANCELLED ||
                  call.status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED)
          << "call " << i << ": " << call.status.error_code() << " "
          << call.status.error_message();
      cancelled += call.status.error_code() == grpc::StatusCode::CANCELLED;
      timed_out += call.status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
    }
  }
  // Both ways of ending early happened, some to jobs the engine had accepted (a passing
  // deadline ends a queued job as either, whichever notices first: the call's cancellation or
  // the engine's own deadline check). No served call's job is counted as ended early.
  EXPECT_GT(cancelled, 0);
  EXPECT_GT(timed_out, 0);
  const int64_t ended_early = JobsEnded("CANCELLED") + JobsEnded("DEADLINE_EXCEEDED");
  EXPECT_GT(ended_early, 0);
  EXPECT_LE(ended_early, cancelled + timed_out);

  // Every reactor reached OnDone (the service counts calls in progress until then), every job
  // ended, and no result is left counted as unread.
  EXPECT_TRUE(service_->WaitForCalls(Clock::now() + std::chrono::seconds(10)));
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while ((engine_->jobs_in_flight() != 0 || UnreadBytes() != 0) && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(engine_->jobs_in_flight(), 0);
  EXPECT_EQ(UnreadBytes(), 0);
}

}  // namespace
}  // namespace gpupipe::rpc
