// Several daemons behind one client: a draining daemon refuses new jobs marked as not
// accepted, and the client sends them to the next daemon; with health checks a balanced client
// sends it none at all. (tests/integration/cli_balance_test.py kills daemons under load.)
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <thread>
#include <vector>

#include "client/job_client.h"
#include "client/targets.h"
#include "tests/integration/binaries.h"
#include "tests/integration/process.h"

namespace gpupipe::testing {
namespace {

v1::SubmitRequest SmallJob() {
  v1::SubmitRequest request;
  request.mutable_input()->set_dtype(v1::DTYPE_FLOAT32);
  request.mutable_input()->add_shape(4);
  request.mutable_input()->set_data(std::string(16, '\0'));
  request.add_ops()->mutable_relu();
  return request;
}

// A job of many seconds on the CPU backend, which keeps its daemon draining after SIGTERM.
v1::SubmitRequest CostlyJob() {
  v1::SubmitRequest request;
  request.mutable_input()->set_dtype(v1::DTYPE_FLOAT32);
  request.mutable_input()->add_shape(1 << 20);
  request.mutable_input()->set_data(std::string(4 << 20, '\0'));
  for (int i = 0; i < 16; ++i) {
    v1::ConvolveOp* c = request.add_ops()->mutable_convolve();
    for (int t = 0; t < 1024; ++t) c->add_taps(0.001);
    c->set_mode(v1::ConvolveOp::MODE_SAME);
  }
  return request;
}

int64_t RefusedUnavailable(client::JobClient& client) {
  absl::StatusOr<v1::StatsResponse> stats = client.GetStats();
  EXPECT_TRUE(stats.ok()) << stats.status();
  if (!stats.ok()) return -1;
  const auto it = stats->rejected().find("unavailable");
  return it == stats->rejected().end() ? 0 : it->second;
}

class BalancedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(draining_.port(), 0) << draining_.error();
    ASSERT_NE(serving_.port(), 0) << serving_.error();
    auto to_draining = client::JobClient::Create(draining_.target());
    ASSERT_TRUE(to_draining.ok());
    to_draining_ = *std::move(to_draining);
    // A job the daemon accepted keeps it draining for the test after SIGTERM.
    costly_ = std::thread([this] {
      (void)to_draining_->Submit(CostlyJob(), [this](const v1::JobEvent& e) {
        if (e.has_accepted()) accepted_ = true;
      });
    });
    for (int i = 0; i < 5000 && !accepted_; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_TRUE(accepted_) << draining_.log();
    kill(draining_.pid(), SIGTERM);
    ASSERT_TRUE(draining_.WaitForLog("SIGTERM: shutting down")) << draining_.log();
  }

  void TearDown() override {
    kill(draining_.pid(), SIGKILL);
    if (costly_.joinable()) costly_.join();
  }

  // Both daemons, the draining one first.
  std::string BothTargets() const {
    return "127.0.0.1:" + std::to_string(draining_.port()) +
           ",127.0.0.1:" + std::to_string(serving_.port());
  }

  DaemonProcess draining_{DaemonBinary(), {"--backend", "cpu", "--shutdown-grace-seconds", "60"}};
  DaemonProcess serving_{DaemonBinary(), {"--backend", "cpu"}};
  std::unique_ptr<client::JobClient> to_draining_;
  std::atomic<bool> accepted_{false};
  std::thread costly_;
};

TEST_F(BalancedTest, ADaemonAloneRefusesEveryAttemptAndStillAnswersStats) {
  const int64_t before = RefusedUnavailable(*to_draining_);
  absl::StatusOr<client::JobResult> r = to_draining_->Submit(SmallJob());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(r.status().message(), "the server is shutting down");
  EXPECT_EQ(RefusedUnavailable(*to_draining_) - before, client::ClientOptions().submit_attempts);
}

TEST_F(BalancedTest, ARefusedJobGoesToTheNextDaemonOnce) {
  // Round-robin without health checks, so that calls do reach the draining daemon.
  const absl::StatusOr<client::ChannelTarget> both = client::ResolveTarget(BothTargets());
  ASSERT_TRUE(both.ok()) << both.status();
  grpc::ChannelArguments args;
  args.SetServiceConfigJSON(client::ServiceConfigJson(/*health_checks=*/false));
  client::JobClient balanced(
      grpc::CreateCustomChannel(both->uri, grpc::InsecureChannelCredentials(), args), {});
  auto to_serving = client::JobClient::Create(serving_.target());
  ASSERT_TRUE(to_serving.ok());
  const int64_t refused_before = RefusedUnavailable(*to_draining_);
  constexpr int kJobs = 8;
  for (int i = 0; i < kJobs; ++i) {
    absl::StatusOr<client::JobResult> r = balanced.Submit(SmallJob());
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->peer, "ipv4:" + serving_.target());
  }
  // First calls went to the draining daemon too (once both were connected), which refused
  // them; each job ran once, on the other.
  EXPECT_GE(RefusedUnavailable(*to_draining_) - refused_before, 1);
  absl::StatusOr<v1::StatsResponse> stats = (*to_serving)->GetStats();
  ASSERT_TRUE(stats.ok());
  int64_t ok = 0;
  for (const v1::PriorityStats& p : stats->priorities()) {
    const auto it = p.jobs().by_status().find("OK");
    if (it != p.jobs().by_status().end()) ok += it->second;
  }
  EXPECT_EQ(ok, kJobs);
}

TEST_F(BalancedTest, HealthChecksKeepJobsOffADrainingDaemon) {
  auto balanced = client::JobClient::Create(BothTargets());
  ASSERT_TRUE(balanced.ok()) << balanced.status();
  EXPECT_TRUE((*balanced)->balanced());
  const int64_t refused_before = RefusedUnavailable(*to_draining_);
  for (int i = 0; i < 6; ++i) {
    absl::StatusOr<client::JobResult> r = (*balanced)->Submit(SmallJob());
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->peer, "ipv4:" + serving_.target());
  }
  EXPECT_EQ(RefusedUnavailable(*to_draining_), refused_before);
  // Regions and split runs need one daemon.
  EXPECT_EQ((*balanced)->RegisterRegion("/gpupipe-none").status().code(),
            absl::StatusCode::kFailedPrecondition);
  const client::InputReader none = [](char*, int64_t) { return absl::OkStatus(); };
  EXPECT_EQ((*balanced)->Run(SmallJob(), 16, none, {}, {}, nullptr, /*streams=*/2).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace gpupipe::testing
