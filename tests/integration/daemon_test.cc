// The daemon as a process: start-up, Describe, one log line per job, clean shutdown.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "client/job_client.h"
#include "absl/strings/str_split.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "nlohmann/json.hpp"
#include "tests/integration/binaries.h"
#include "tests/integration/process.h"
#include "tests/testing/random_tensor.h"

namespace gpupipe::testing {
namespace {

v1::SubmitRequest ReluRequest(const std::vector<float>& x) {
  v1::SubmitRequest request;
  request.mutable_input()->set_dtype(v1::DTYPE_FLOAT32);
  request.mutable_input()->add_shape(static_cast<int64_t>(x.size()));
  request.mutable_input()->set_data(AsBytes(x));
  request.add_ops()->mutable_relu();
  request.set_client_tag("daemon-test");
  return request;
}

TEST(Daemon, ServesDescribeAndJobsAndLogsEachJob) {
  DaemonProcess daemon(DaemonBinary(), {"--backend", "cpu"});
  ASSERT_NE(daemon.port(), 0) << daemon.error();
  EXPECT_NE(daemon.log().find("backend cpu: requested with --backend cpu"), std::string::npos)
      << daemon.log();
  auto client = client::JobClient::Create(daemon.target());
  ASSERT_TRUE(client.ok());
  absl::StatusOr<v1::DescribeResponse> d = (*client)->Describe();
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->backend(), "cpu");

  absl::StatusOr<client::JobResult> result = (*client)->Submit(ReluRequest({-1, 2}));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(AsFloats(result->output.data()), (std::vector<float>{0, 2}));
  // The log line is made when the job ends, after its last event, and written with the job
  // lines of the next moment (Logger::Gather).
  const std::string id = result->accepted.job_id();
  for (int i = 0; i < 100 && daemon.log().find("job " + id + " OK") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_NE(daemon.log().find("job " + id + " OK"), std::string::npos) << daemon.log();
  EXPECT_NE(daemon.log().find("tag=\"daemon-test\""), std::string::npos) << daemon.log();
  EXPECT_EQ(daemon.Terminate(), 0) << daemon.log();
  EXPECT_NE(daemon.log().find("SIGTERM: shutting down"), std::string::npos) << daemon.log();
  // Its last line, written as it exits without destructors.
  EXPECT_NE(daemon.log().find("gpupiped: stopped\n"), std::string::npos) << daemon.log();
}

// Waits for a job's line in the daemon's log; whether it came.
bool WaitForJobLine(const DaemonProcess& daemon, const std::string& id) {
  return daemon.WaitForLog("job " + id + " OK", std::chrono::seconds(5));
}

TEST(Daemon, JsonLogsAreOneObjectPerLineWithTheJobsFields) {
  DaemonProcess daemon(DaemonBinary(), {"--backend", "cpu", "--log-format", "json"});
  ASSERT_NE(daemon.port(), 0) << daemon.error();
  client::ClientOptions options;
  options.client_id = "json-test";
  auto client = client::JobClient::Create(daemon.target(), options);
  ASSERT_TRUE(client.ok());
  absl::StatusOr<client::JobResult> result = (*client)->Submit(ReluRequest({-1, 2, 3}));
  ASSERT_TRUE(result.ok()) << result.status();
  const std::string id = result->accepted.job_id();
  ASSERT_TRUE(WaitForJobLine(daemon, id)) << daemon.log();
  EXPECT_EQ(daemon.Terminate(), 0) << daemon.log();

  int jobs = 0;
  bool listening = false;
  for (absl::string_view line : absl::StrSplit(daemon.log(), '\n', absl::SkipEmpty())) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(j.is_discarded()) << "not JSON: " << line;
    ASSERT_TRUE(j.contains("time") && j.contains("level") && j.contains("msg")) << line;
    const std::string msg = j["msg"];
    listening |= msg.rfind("listening on ", 0) == 0;
    if (msg.rfind("job ", 0) != 0) continue;
    ++jobs;
    EXPECT_EQ(j["level"], "info");
    EXPECT_EQ(j["job_id"], id);
    EXPECT_EQ(j["status"], "OK");
    EXPECT_EQ(j["client"], "ipv4:127.0.0.1/json-test");
    EXPECT_EQ(j["tag"], "daemon-test");
    EXPECT_EQ(j["ops"], "relu");
    EXPECT_EQ(j["shape"], (std::vector<int64_t>{3}));
    EXPECT_EQ(j["bytes_in"], 12);
    EXPECT_EQ(j["bytes_out"], 12);
    EXPECT_TRUE(j["total_us"].is_number()) << line;
  }
  EXPECT_EQ(jobs, 1) << daemon.log();
  EXPECT_TRUE(listening) << daemon.log();
}

TEST(Daemon, JobLinesWaitTheirGatherDelay) {
  // A delay long enough that the line cannot have come by the time the result has.
  DaemonProcess daemon(DaemonBinary(), {"--backend", "cpu", "--log-gather-ms", "3000"});
  ASSERT_NE(daemon.port(), 0) << daemon.error();
  auto client = client::JobClient::Create(daemon.target());
  ASSERT_TRUE(client.ok());
  const auto sent = std::chrono::steady_clock::now();
  absl::StatusOr<client::JobResult> result = (*client)->Submit(ReluRequest({-1, 2}));
  ASSERT_TRUE(result.ok()) << result.status();
  const std::string id = result->accepted.job_id();
  const bool early = daemon.log().find("job " + id + " OK") != std::string::npos;
  const auto checked = std::chrono::steady_clock::now();
  // Only a check made well inside the delay says anything.
  if (checked - sent < std::chrono::milliseconds(2500)) EXPECT_FALSE(early) << daemon.log();
  EXPECT_TRUE(WaitForJobLine(daemon, id)) << daemon.log();
  EXPECT_GE(std::chrono::steady_clock::now() - sent, std::chrono::milliseconds(2900));
  EXPECT_EQ(daemon.Terminate(), 0) << daemon.log();
}

// The names of `pid`'s threads, one entry per thread.
std::multiset<std::string> ThreadNames(pid_t pid) {
  std::multiset<std::string> names;
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& task : std::filesystem::directory_iterator(tasks)) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    if (std::getline(comm, name)) names.insert(name);
  }
  return names;
}

TEST(Daemon, ItsOwnThreadsAreNamedForWhatTheyDo) {
  DaemonProcess daemon(DaemonBinary(), {"--backend", "cpu", "--metrics-listen", "127.0.0.1:0"});
  ASSERT_NE(daemon.port(), 0) << daemon.error();
  // The log's writer starts with the first job line.
  auto client = client::JobClient::Create(daemon.target());
  ASSERT_TRUE(client.ok());
  absl::StatusOr<client::JobResult> result = (*client)->Submit(ReluRequest({-1, 2}));
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_TRUE(WaitForJobLine(daemon, result->accepted.job_id())) << daemon.log();
  const std::multiset<std::string> names = ThreadNames(daemon.pid());
  // Every priority level has lanes, and each lane its workers.
  for (const char* worker : {"gp-work-high", "gp-work-normal", "gp-work-low"}) {
    EXPECT_GE(names.count(worker), 2u) << worker;
  }
  for (const char* one : {"gp-stall-watch", "gp-metrics", "gp-log"}) {
    EXPECT_EQ(names.count(one), 1u) << one;
  }
  EXPECT_EQ(daemon.Terminate(), 0) << daemon.log();
}

TEST(Daemon, AtLevelWarningOnlyWarningsAreLogged) {
  const int port = FreeLoopbackPort();
  ASSERT_NE(port, 0);
  // Plaintext on every interface: a warning, which this level keeps.
  DaemonProcess daemon(DaemonBinary(),
                       {"--backend", "cpu", "--log-level", "warning", "--listen",
                        "0.0.0.0:" + std::to_string(port), "--insecure"},
                       port);
  ASSERT_NE(daemon.port(), 0) << daemon.error();
  auto client = client::JobClient::Create(daemon.target());
  ASSERT_TRUE(client.ok());
  absl::StatusOr<client::JobResult> result = (*client)->Submit(ReluRequest({-1, 2}));
  ASSERT_TRUE(result.ok()) << result.status();
  // A job the daemon finished is logged before its last event reaches the client, so its line
  // would be in the log by the time it has stopped.
  EXPECT_EQ(daemon.Terminate(), 0) << daemon.log();
  EXPECT_EQ(daemon.log().find("job "), std::string::npos) << daemon.log();
  EXPECT_EQ(daemon.log().find("listening on"), std::string::npos) << daemon.log();
  EXPECT_NE(daemon.log().find("gpupiped: warning: --insecure: serving plaintext"),
            std::string::npos)
      << daemon.log();
}

TEST(Daemon, ABadLogFlagStopsStartUpNamingIt) {
  CommandResult r = RunCommand({DaemonBinary(), "--log-level", "verbose"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--log-level"), std::string::npos) << r.err;
  r = RunCommand({DaemonBinary(), "--log-format", "xml"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--log-format"), std::string::npos) << r.err;
}

TEST(Daemon, AClientTagCannotForgeALogLine) {
  DaemonProcess daemon(DaemonBinary(), {"--backend", "cpu"});
  ASSERT_NE(daemon.port(), 0) << daemon.error();
  auto client = client::JobClient::Create(daemon.target());
  ASSERT_TRUE(client.ok());
  v1::SubmitRequest request = ReluRequest({-1, 2});
  const std::string forged = "2026-12-02T00:00:00.000Z gpupiped: job forged OK";
  request.set_client_tag("x\"\n" + forged);
  absl::StatusOr<client::JobResult> result = (*client)->Submit(request);
  ASSERT_TRUE(result.ok()) << result.status();
  const std::string id = result->accepted.job_id();
  for (int i = 0; i < 100 && daemon.log().find("job " + id + " OK") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const std::string log = daemon.log();
  EXPECT_NE(log.find("tag=\"x\\\"\\n" + forged + "\""), std::string::npos) << log;
  EXPECT_EQ(log.find("\n" + forged), std::string::npos) << "a forged line: " << log;
  // The daemon then serves a normal job.
  EXPECT_TRUE((*client)->Submit(ReluRequest({3})).ok());
}

TEST(Daemon, AutoFallsBackToTheCpuAndSaysWhyWhereNoGpuIsUsable) {
  DaemonProcess daemon(DaemonBinary(), {"--backend", "auto"});
  ASSERT_NE(daemon.port(), 0) << daemon.error();
  const std::string log = daemon.log();
  const bool cuda = log.find("backend cuda device") != std::string::npos;
  const bool cpu = log.find("backend cpu: no usable GPU") != std::string::npos;
  EXPECT_TRUE(cuda || cpu) << log;
  EXPECT_EQ(daemon.Terminate(), 0);
}

TEST(Daemon, RejectsBadFlagsWithOneLine) {
  CommandResult r = RunCommand({DaemonBinary(), "--backend", "tpu"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "gpupiped: --backend: expected auto, cuda or cpu, got 'tpu'\n");
}

TEST(Daemon, SigtermLetsARunningJobFinish) {
  DaemonProcess daemon(DaemonBinary(), {"--backend", "cpu"});
  ASSERT_NE(daemon.port(), 0) << daemon.error();
  auto client = client::JobClient::Create(daemon.target());
  ASSERT_TRUE(client.ok());
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<float> x = RandomFloats(8 << 20, seed);  // 32 MiB: a job that takes a while here
  absl::StatusOr<client::JobResult> result;
  std::atomic<bool> accepted{false};
  std::thread submitter([&] {
    result = (*client)->Submit(ReluRequest(x), [&](const v1::JobEvent& e) {
      if (e.has_accepted()) accepted = true;
    });
  });
  // Signal once the daemon has accepted the job: from then on it must not be lost.
  for (int i = 0; i < 3000 && !accepted; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(accepted) << daemon.log();
  const int code = daemon.Terminate();
  submitter.join();
  EXPECT_EQ(code, 0) << daemon.log();
  // The job either finished before the signal or was drained; it was not lost.
  ASSERT_TRUE(result.ok()) << result.status() << "\n" << daemon.log();
  std::vector<float> y = AsFloats(result->output.data());
  ASSERT_EQ(y.size(), x.size());
  for (size_t i = 0; i < x.size(); i += 4097) ASSERT_EQ(y[i], x[i] < 0 ? 0.0f : x[i]);
}

TEST(Daemon, HealthServesAndTurnsNotServingWhileItDrains) {
  DaemonProcess daemon(DaemonBinary(), {"--backend", "cpu", "--shutdown-grace-seconds", "5"});
  ASSERT_NE(daemon.port(), 0) << daemon.error();
  CommandResult serving = RunCommand({CliBinary(), "--target", daemon.target(), "health"});
  EXPECT_EQ(serving.exit_code, 0) << serving.err;
  EXPECT_EQ(serving.out, "SERVING\n");
  CommandResult service = RunCommand(
      {CliBinary(), "--target", daemon.target(), "health", "--service", "gpupipe.v1.JobService"});
  EXPECT_EQ(service.out, "SERVING\n");
  CommandResult unknown =
      RunCommand({CliBinary(), "--target", daemon.target(), "health", "--service", "nope"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_EQ(unknown.out, "SERVICE_UNKNOWN\n");

  // A job of seconds keeps the daemon draining after SIGTERM; a Watch sees it turn.
  auto channel = grpc::CreateChannel(daemon.target(), grpc::InsecureChannelCredentials());
  std::vector<int> seen;
  std::mutex seen_mu;
  grpc::ClientContext watch_context;
  std::thread watcher([&] {
    grpc::health::v1::HealthCheckRequest request;
    auto reader = grpc::health::v1::Health::NewStub(channel)->Watch(&watch_context, request);
    grpc::health::v1::HealthCheckResponse response;
    while (reader->Read(&response)) {
      std::lock_guard<std::mutex> lock(seen_mu);
      seen.push_back(response.status());
    }
    reader->Finish();
  });
  auto client = client::JobClient::Create(daemon.target());
  v1::SubmitRequest costly = ReluRequest(std::vector<float>(1 << 20, 1.0f));
  for (int i = 0; i < 4; ++i) {
    v1::ConvolveOp* c = costly.add_ops()->mutable_convolve();
    for (int t = 0; t < 1024; ++t) c->add_taps(0.001);
    c->set_mode(v1::ConvolveOp::MODE_SAME);
  }
  std::atomic<bool> accepted{false};
  std::thread job([&] {
    (void)(*client)->Submit(costly, [&](const v1::JobEvent& e) {
      if (e.has_accepted()) accepted = true;
    });
  });
  while (!accepted) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  kill(daemon.pid(), SIGTERM);
  ASSERT_TRUE(daemon.WaitForLog("SIGTERM: shutting down")) << daemon.log();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CommandResult draining = RunCommand({CliBinary(), "--target", daemon.target(), "health"});
  EXPECT_EQ(draining.exit_code, 1) << draining.out << draining.err;
  EXPECT_EQ(draining.out, "NOT_SERVING\n");
  {
    std::lock_guard<std::mutex> lock(seen_mu);
    ASSERT_GE(seen.size(), 2u);
    EXPECT_EQ(seen.front(), grpc::health::v1::HealthCheckResponse::SERVING);
    EXPECT_EQ(seen.back(), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  }
  EXPECT_EQ(daemon.Terminate(), 0);
  job.join();
  watch_context.TryCancel();
  watcher.join();
}

}  // namespace
}  // namespace gpupipe::testing
