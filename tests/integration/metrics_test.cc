// The daemon's figures against the jobs a test ran: GetStats, `gpupipe stats`, the Prometheus
// endpoint checked by promtool, and a real Prometheus server (Debian's `prometheus` package)
// scraping it over loopback.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "client/job_client.h"
#include "nlohmann/json.hpp"
#include "tests/integration/binaries.h"
#include "tests/integration/http_get.h"
#include "tests/integration/process.h"
#include "tests/testing/random_tensor.h"

namespace gpupipe::testing {
namespace {

constexpr char kPromtool[] = "/usr/bin/promtool";
constexpr char kPrometheus[] = "/usr/bin/prometheus";

// A job of `rows` x 8 random floats through relu, checked against the CPU reference.
absl::Status RunRelu(client::JobClient& c, v1::Priority priority, int rows) {
  const std::vector<float> x = RandomFloats(int64_t{rows} * 8, FreshSeed());
  v1::SubmitRequest r;
  r.mutable_input()->set_dtype(v1::DTYPE_FLOAT32);
  r.mutable_input()->add_shape(rows);
  r.mutable_input()->add_shape(8);
  r.mutable_input()->set_data(AsBytes(x));
  r.add_ops()->mutable_relu();
  r.set_priority(priority);
  absl::StatusOr<client::JobResult> result = c.Submit(r);
  if (!result.ok()) return result.status();
  std::vector<float> want = x;
  for (float& v : want) v = v > 0 ? v : 0;
  return AsFloats(result->output.data()) == want ? absl::OkStatus()
                                                 : absl::InternalError("wrong result");
}

std::unique_ptr<client::JobClient> Client(const DaemonProcess& daemon, const std::string& id) {
  client::ClientOptions options;
  options.client_id = id;
  options.deadline_seconds = 30;
  auto c = client::JobClient::Create(daemon.target(), options);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *std::move(c) : nullptr;
}

int64_t Count(const v1::JobCounts& jobs, const std::string& status) {
  const auto it = jobs.by_status().find(status);
  return it == jobs.by_status().end() ? 0 : it->second;
}

const v1::PriorityStats* Level(const v1::StatsResponse& s, v1::Priority p) {
  for (const v1::PriorityStats& level : s.priorities()) {
    if (level.priority() == p) return &level;
  }
  return nullptr;
}

// The value of one sample line ("name{labels} value") in a scrape; -1 when absent.
double Sample(const std::string& scrape, const std::string& series) {
  const size_t at = scrape.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(scrape.substr(at + series.size() + 2));
}

TEST(Metrics, StatsAndMetricsAgreeWithTheJobsRun) {
  // The daemon's CPU clock starts at exec, before its uptime clock does, so the bound below is
  // the time since the test spawned it.
  const auto spawned = std::chrono::steady_clock::now();
  DaemonProcess daemon(DaemonBinary(), {"--backend", "cpu"});
  ASSERT_NE(daemon.port(), 0) << daemon.error();
  ASSERT_NE(daemon.metrics_port(), 0) << daemon.log();
  auto alpha = Client(daemon, "alpha");
  auto beta = Client(daemon, "beta");
  ASSERT_TRUE(alpha && beta);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(RunRelu(*alpha, v1::PRIORITY_HIGH, 4).ok());
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(RunRelu(*beta, v1::PRIORITY_NORMAL, 16).ok());
  // Refused before a job exists: no ops.
  v1::SubmitRequest empty;
  empty.mutable_input()->set_dtype(v1::DTYPE_FLOAT32);
  empty.mutable_input()->add_shape(1);
  empty.mutable_input()->set_data(std::string(4, '\0'));
  EXPECT_EQ(alpha->Submit(empty).status().code(), absl::StatusCode::kInvalidArgument);

  absl::StatusOr<v1::StatsResponse> stats = alpha->GetStats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->backend(), "cpu");
  EXPECT_GT(stats->uptime_seconds(), 0);
  const v1::PriorityStats* high = Level(*stats, v1::PRIORITY_HIGH);
  const v1::PriorityStats* normal = Level(*stats, v1::PRIORITY_NORMAL);
  const v1::PriorityStats* low = Level(*stats, v1::PRIORITY_LOW);
  ASSERT_TRUE(high && normal && low);
  EXPECT_EQ(Count(high->jobs(), "OK"), 3);
  EXPECT_EQ(high->jobs().bytes_in(), 3 * 4 * 8 * 4);
  EXPECT_EQ(high->jobs().bytes_out(), 3 * 4 * 8 * 4);
  EXPECT_EQ(high->total_time().count(), 3);
  EXPECT_EQ(high->queue_wait().count(), 3);
  EXPECT_EQ(Count(normal->jobs(), "OK"), 2);
  EXPECT_EQ(normal->jobs().bytes_in(), 2 * 16 * 8 * 4);
  EXPECT_EQ(low->jobs().by_status_size(), 0);
  for (const v1::PriorityStats* level : {high, normal, low}) {
    EXPECT_GT(level->lanes(), 0);
    EXPECT_EQ(level->running(), 0);
    EXPECT_EQ(level->queued(), 0);
  }
  std::map<std::string, int64_t> ok_by_client;
  for (const v1::ClientStats& c : stats->clients()) {
    ok_by_client[c.client()] = Count(c.jobs(), "OK");
    EXPECT_EQ(c.active_jobs(), 0) << c.client();
  }
  EXPECT_EQ(ok_by_client["ipv4:127.0.0.1/alpha"], 3);
  EXPECT_EQ(ok_by_client["ipv4:127.0.0.1/beta"], 2);
  EXPECT_EQ(stats->rejected().at("invalid_argument"), 1);
  // The daemon's own CPU time: some, and no more than all the machine's cores could give it
  // since it was spawned.
  const double alive_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - spawned).count();
  EXPECT_GT(stats->process_cpu_seconds(), 0);
  EXPECT_LT(stats->process_cpu_seconds(),
            alive_seconds * std::max(1u, std::thread::hardware_concurrency()));

  // The same figures on the Prometheus endpoint.
  const HttpResponse scrape = HttpGet(daemon.metrics_port(), "/metrics");
  ASSERT_EQ(scrape.status, 200) << scrape.headers;
  // Read later than GetStats, so no less.
  EXPECT_GE(Sample(scrape.body, "process_cpu_seconds_total"), stats->process_cpu_seconds());
  EXPECT_EQ(Sample(scrape.body, R"(gpupipe_jobs_total{priority="high",status="OK"})"), 3);
  EXPECT_EQ(Sample(scrape.body, R"(gpupipe_jobs_total{priority="normal",status="OK"})"), 2);
  EXPECT_EQ(Sample(scrape.body, R"(gpupipe_input_bytes_total{priority="normal"})"), 1024);
  EXPECT_EQ(Sample(scrape.body, R"(gpupipe_job_duration_seconds_count{priority="high"})"), 3);
  EXPECT_EQ(
      Sample(scrape.body, R"(gpupipe_job_duration_seconds_bucket{priority="high",le="+Inf"})"), 3);
  EXPECT_EQ(Sample(scrape.body, R"(gpupipe_rejected_total{reason="invalid_argument"})"), 1);
  EXPECT_EQ(Sample(scrape.body, R"(gpupipe_info{version="gpupiped 0.1.0",backend="cpu"})"), 1);

  // And through the CLI.
  const CommandResult cli =
      RunCommand({CliBinary(), "--target", daemon.target(), "stats", "--json"});
  ASSERT_EQ(cli.exit_code, 0) << cli.err;
  const nlohmann::json j = nlohmann::json::parse(cli.out);
  EXPECT_EQ(j["priorities"][2]["priority"], "high");
  EXPECT_EQ(j["priorities"][2]["jobs"]["ended"], 3);
  EXPECT_EQ(j["rejected"]["invalid_argument"], 1);
  const CommandResult text = RunCommand({CliBinary(), "--target", daemon.target(), "stats"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(std::regex_search(text.out, std::regex("high +[0-9]+ +0 +0 +3 +3 +0 "))) << text.out;
  EXPECT_NE(text.out.find("ipv4:127.0.0.1/alpha"), std::string::npos) << text.out;
  const CommandResult watch = RunCommand({CliBinary(), "--target", daemon.target(), "stats",
                                          "--watch", "0.2", "--count", "3", "--json"});
  ASSERT_EQ(watch.exit_code, 0) << watch.err;
  EXPECT_EQ(std::count(watch.out.begin(), watch.out.end(), '\n'), 3) << watch.out;
  const std::string target = daemon.target();
  EXPECT_EQ(daemon.Terminate(), 0);
  // Watching a daemon that is gone: asked again at every refresh, and the exit status says the
  // last refresh failed.
  const CommandResult gone = RunCommand(
      {CliBinary(), "--target", target, "stats", "--watch", "0.1", "--count", "2", "--json"});
  EXPECT_EQ(gone.exit_code, 1) << gone.err;
  EXPECT_EQ(gone.out, "");
  EXPECT_NE(gone.err.find("asking again"), std::string::npos) << gone.err;
}

TEST(Metrics, TheEndpointPassesPromtool) {
  ASSERT_EQ(access(kPromtool, X_OK), 0)
      << kPromtool << " is missing: scripts/install-deps.sh installs Debian's prometheus";
  DaemonProcess daemon(DaemonBinary(), {"--backend", "cpu"});
  ASSERT_NE(daemon.port(), 0) << daemon.error();
  auto c = Client(daemon, "");
  ASSERT_TRUE(c);
  ASSERT_TRUE(RunRelu(*c, v1::PRIORITY_LOW, 2).ok());
  v1::SubmitRequest refused;  // no input: refused, so that a rejected series exists too
  refused.add_ops()->mutable_relu();
  EXPECT_FALSE(c->Submit(refused).ok());
  const HttpResponse scrape = HttpGet(daemon.metrics_port(), "/metrics");
  ASSERT_EQ(scrape.status, 200);
  EXPECT_NE(scrape.body.find("gpupipe_rejected_total{reason=\"invalid_argument\"} 1\n"),
            std::string::npos)
      << scrape.body;
  EXPECT_NE(scrape.body.find("le=\"0.1\""), std::string::npos) << scrape.body;
  char tmpl[] = "/tmp/gpupipe-scrape-XXXXXX";
  const int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(tmpl) << scrape.body;
  const CommandResult check =
      RunCommand({"/bin/sh", "-c", std::string(kPromtool) + " check metrics < " + tmpl});
  unlink(tmpl);
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  EXPECT_EQ(check.out + check.err, "") << "promtool found problems";
}

// Prometheus' instant query `query`; its first sample's value, or -1 while it has none.
double Query(int port, const std::string& query) {
  const HttpResponse r = HttpGet(port, "/api/v1/query?query=" + UrlEncode(query));
  if (r.status != 200) return -1;
  const nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_discarded() || j["status"] != "success" || j["data"]["result"].empty()) return -1;
  return std::stod(j["data"]["result"][0]["value"][1].get<std::string>());
}

TEST(Metrics, APrometheusServerSeesTheJobCounterRise) {
  ASSERT_EQ(access(kPrometheus, X_OK), 0)
      << kPrometheus << " is missing: scripts/install-deps.sh installs Debian's prometheus";
  DaemonProcess daemon(DaemonBinary(), {"--backend", "cpu"});
  ASSERT_NE(daemon.port(), 0) << daemon.error();
  auto c = Client(daemon, "");
  ASSERT_TRUE(c);
  ASSERT_TRUE(RunRelu(*c, v1::PRIORITY_NORMAL, 2).ok());

  char tmpl[] = "/tmp/gpupipe-prometheus-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  std::ofstream(dir + "/prometheus.yml")
      << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
      << "scrape_configs:\n  - job_name: gpupiped\n    static_configs:\n"
      << "      - targets: ['127.0.0.1:" << daemon.metrics_port() << "']\n";
  const int web_port = FreeLoopbackPort();
  ChildProcess prometheus({kPrometheus, "--config.file=" + dir + "/prometheus.yml",
                           "--storage.tsdb.path=" + dir + "/data",
                           "--web.listen-address=127.0.0.1:" + std::to_string(web_port)});
  const std::string jobs = "sum(gpupipe_jobs_total{job=\"gpupiped\"})";
  const auto wait_for = [&](double want) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    double got = -1;
    while (std::chrono::steady_clock::now() < until) {
      got = Query(web_port, jobs);
      if (got == want) return got;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    return got;
  };
  // The first scrape sees the job run before Prometheus started; the next, one more.
  EXPECT_EQ(wait_for(1), 1);
  ASSERT_TRUE(RunRelu(*c, v1::PRIORITY_NORMAL, 2).ok());
  EXPECT_EQ(wait_for(2), 2);
  EXPECT_EQ(Query(web_port, "up{job=\"gpupiped\"}"), 1);
  prometheus.Signal(SIGTERM);
  prometheus.Wait();
  std::system(("rm -rf " + dir).c_str());
  EXPECT_EQ(daemon.Terminate(), 0);
}

TEST(Metrics, AnEmptyListenTurnsThemOffAndATakenPortFailsTheStart) {
  DaemonProcess off(DaemonBinary(), {"--backend", "cpu", "--metrics-listen", ""});
  ASSERT_NE(off.port(), 0) << off.error();
  EXPECT_EQ(off.metrics_port(), 0);
  EXPECT_EQ(off.log().find("metrics on"), std::string::npos) << off.log();

  DaemonProcess first(DaemonBinary(), {"--backend", "cpu"});
  ASSERT_NE(first.metrics_port(), 0) << first.log();
  const CommandResult second =
      RunCommand({DaemonBinary(), "--backend", "cpu", "--listen", "127.0.0.1:0", "--metrics-listen",
                  "127.0.0.1:" + std::to_string(first.metrics_port())});
  EXPECT_NE(second.exit_code, 0);
  EXPECT_NE(second.err.find("cannot serve metrics on"), std::string::npos) << second.err;
}

}  // namespace
}  // namespace gpupipe::testing
