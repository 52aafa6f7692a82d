#include "client/bench/bench_report.h"

#include <gtest/gtest.h>

namespace gpupipe::bench {
namespace {

Sample Ok(double latency, double server = 0, int kernels = 0, int batch = 1) {
  Sample s;
  s.latency_us = latency;
  s.outcome.ok = true;
  s.outcome.server_us = server;
  s.outcome.kernels = kernels;
  s.outcome.batch_jobs = batch;
  s.outcome.stream = "normal/0";
  return s;
}

TEST(BenchReport, PercentilesAreNearestRank) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);
  const Percentiles p = PercentilesOf(v);
  EXPECT_EQ(p.p50, 50);
  EXPECT_EQ(p.p90, 90);
  EXPECT_EQ(p.p99, 99);
  EXPECT_EQ(p.max, 100);
  EXPECT_DOUBLE_EQ(p.mean, 50.5);
  EXPECT_EQ(PercentilesOf({}).p50, 0);
}

TEST(BenchReport, SummarizeCountsErrorsAndSharesABatchsKernels) {
  LoadResult r;
  r.seconds = 2;
  r.samples = {Ok(100, 60, 2, 1), Ok(200, 150, 2, 4), Ok(300, 250, 2, 4)};
  Sample failed;
  failed.outcome.error = "boom";
  r.samples.push_back(failed);
  Sample mismatch = Ok(100, 50, 2, 1);
  mismatch.outcome.mismatch = true;
  r.samples.push_back(mismatch);
  const ServiceSummary s = Summarize("gpupipe", r, {"entry"});
  EXPECT_EQ(s.requests, 5);
  EXPECT_EQ(s.errors, 1);
  EXPECT_EQ(s.mismatches, 1);
  EXPECT_DOUBLE_EQ(s.throughput, 2.0);  // 4 successful over 2 s
  EXPECT_EQ(s.error_messages.at("boom"), 1);
  // Kernels per job: 2 + 0.5 + 0.5 + 2, over 4 jobs.
  EXPECT_DOUBLE_EQ(s.kernels_per_job, 5.0 / 4);
  EXPECT_DOUBLE_EQ(s.batched_fraction, 0.5);
  EXPECT_EQ(s.lanes.at("normal/0"), 4);
  ASSERT_EQ(s.entries.size(), 1u);
  EXPECT_EQ(s.entries[0].requests, 4);
}

TEST(BenchReport, SuccessfulJobsAreCountedPerDaemonInEveryFormat) {
  LoadResult r;
  r.seconds = 1;
  r.sent = 4;
  for (const char* daemon : {"ipv4:127.0.0.1:7001", "ipv4:127.0.0.1:7002", "ipv4:127.0.0.1:7001"}) {
    r.samples.push_back(Ok(100));
    r.samples.back().outcome.daemon = daemon;
  }
  Sample failed;
  failed.outcome.error = "UNAVAILABLE";
  r.samples.push_back(failed);
  BenchReport report;
  report.balanced = true;
  BenchPoint point;
  point.concurrency = 2;
  point.gpupipe = Summarize("gpupipe", r, {"e"});
  EXPECT_EQ(point.gpupipe.errors, 1);
  EXPECT_EQ(point.gpupipe.daemons, (std::map<std::string, int64_t>{{"ipv4:127.0.0.1:7001", 2},
                                                                   {"ipv4:127.0.0.1:7002", 1}}));
  report.points = {point};
  const nlohmann::json j = ReportJson(report);
  EXPECT_EQ(j["points"][0]["gpupipe"]["daemons"]["ipv4:127.0.0.1:7001"], 2);
  EXPECT_EQ(j["points"][0]["gpupipe"]["sent"], 4);
  EXPECT_EQ(j["balanced"], true);
  EXPECT_NE(ReportCsv(report).find(",ipv4:127.0.0.1:7001=2;ipv4:127.0.0.1:7002=1,,\n"),
            std::string::npos)
      << ReportCsv(report);
  EXPECT_NE(ReportText(report).find("per daemon: ipv4:127.0.0.1:7001 2, ipv4:127.0.0.1:7002 1"),
            std::string::npos)
      << ReportText(report);
}

TEST(BenchReport, JsonAndCsvCarryEveryPointAndTheFloor) {
  BenchReport report;
  report.target = "t";
  report.backend = "cpu";
  report.channels = 2;
  BenchPoint point;
  point.concurrency = 4;
  LoadResult r;
  r.seconds = 1;
  r.samples = {Ok(100, 50)};
  point.gpupipe = Summarize("gpupipe", r, {"e"});
  r.samples = {Ok(50)};
  point.echo = Summarize("echo", r, {"e"});
  report.points = {point};
  const nlohmann::json j = ReportJson(report);
  ASSERT_EQ(j["points"].size(), 1u);
  EXPECT_EQ(j["points"][0]["concurrency"], 4);
  EXPECT_DOUBLE_EQ(j["points"][0]["gpupipe"]["throughput"].get<double>(), 1.0);
  EXPECT_TRUE(j["points"][0]["gpupipe"].contains("breakdown_us"));
  EXPECT_DOUBLE_EQ(j["points"][0]["vs_echo"]["p50"].get<double>(), 2.0);
  const std::string csv = ReportCsv(report);
  EXPECT_NE(csv.find("concurrency,4,gpupipe,1,"), std::string::npos) << csv;
  EXPECT_NE(csv.find("concurrency,4,echo,1,"), std::string::npos) << csv;
  EXPECT_NE(ReportText(report).find("vs echo: 1.00x throughput, 2.00x p50"), std::string::npos)
      << ReportText(report);
  // No CPU measured: null in JSON, empty in CSV, no line in the text.
  EXPECT_TRUE(j["points"][0]["gpupipe"]["cpu_us_per_request"]["client"].is_null());
  EXPECT_EQ(ReportText(report).find("CPU a request"), std::string::npos);
}

TEST(BenchReport, CpuPerRequestOfBothEnds) {
  BenchReport report;
  BenchPoint point;
  point.concurrency = 1;
  LoadResult r;
  r.seconds = 1;
  r.samples = {Ok(100, 50)};
  point.gpupipe = Summarize("gpupipe", r, {"e"});
  point.gpupipe.client_cpu_us = 61.4;
  point.gpupipe.server_cpu_us = 120.6;
  point.echo = Summarize("echo", r, {"e"});
  point.echo->client_cpu_us = 40;  // the floor's server not read
  report.points = {point};
  const nlohmann::json j = ReportJson(report);
  EXPECT_DOUBLE_EQ(j["points"][0]["gpupipe"]["cpu_us_per_request"]["client"].get<double>(), 61.4);
  EXPECT_DOUBLE_EQ(j["points"][0]["gpupipe"]["cpu_us_per_request"]["server"].get<double>(),
                   120.6);
  EXPECT_TRUE(j["points"][0]["echo"]["cpu_us_per_request"]["server"].is_null());
  const std::string csv = ReportCsv(report);
  EXPECT_NE(csv.find(",client_cpu_us,server_cpu_us\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",61,121\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",40,\n"), std::string::npos) << csv;
  EXPECT_NE(ReportText(report).find(
                "CPU a request: gpupipe client 61 us, daemon 121 us; echo client 40 us, server ? us"),
            std::string::npos)
      << ReportText(report);
}

}  // namespace
}  // namespace gpupipe::bench
