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
#include <mutex>
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

class SubmitSmallReactorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // One lane a level, so that most calls wait for it and end while queued.
    engine::CpuBackendOptions lanes;
    lanes.lanes_per_level = 1;
    engine_ = engine::Engine::Create(engine::CreateCpuBackend(lanes), engine::EngineOptions{});
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
  constexpr int kClients = 8;
  constexpr int kCallsPerClient = 60;
  std::mutex mu;
  std::condition_variable all_ended;
  int ended = 0;
  std::vector<std::unique_ptr<SmallCall>> calls;
  calls.reserve(kClients * kCallsPerClient);
  for (int i = 0; i < kClients * kCallsPerClient; ++i) {
    calls.push_back(std::make_unique<SmallCall>());
    // Some large enough that the lane's queue builds up, others small enough to run at once.
    calls.back()->input = gpupipe::testing::RandomFloats(i % 3 == 0 ? 16 << 10 : 1 << 10,
                                                         static_cast<uint64_t>(i) + 1);
  }

  // Half the clients flood the lane (every call sent at once: cancels and deadlines find their
  // jobs queued); then the other half send one call at a time onto a quieter lane, cancelling
  // a moment later (the job queued, running or done by then).
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
      if (kind == 3) {
        call.context.set_deadline(std::chrono::system_clock::now() +
                                  std::chrono::microseconds(500 * (k % 11)));
      }
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
        all_ended.wait(lock, [&] { return call.ends > 0; });
      }
    }
  };
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients / 2; ++c) clients.emplace_back(run_client, c, false);
  for (std::thread& t : clients) t.join();
  clients.clear();
  {
    std::unique_lock<std::mutex> lock(mu);
    all_ended.wait_for(lock, std::chrono::seconds(60),
                       [&] { return ended == kClients / 2 * kCallsPerClient; });
  }
  for (int c = kClients / 2; c < kClients; ++c) clients.emplace_back(run_client, c, true);
  for (std::thread& t : clients) t.join();
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(all_ended.wait_for(lock, std::chrono::seconds(60),
                                   [&] { return ended == static_cast<int>(calls.size()); }))
        << ended << " of " << calls.size() << " calls ended";
  }

  int served = 0;
  for (size_t i = 0; i < calls.size(); ++i) {
    const SmallCall& call = *calls[i];
    EXPECT_EQ(call.ends, 1) << "call " << i;
    const int kind = static_cast<int>(i % kCallsPerClient) % 4;
    if (call.status.ok()) {
      ++served;
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
    }
  }
  EXPECT_GE(served, kClients * kCallsPerClient / 2);  // every call of kinds 0 and 1

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
