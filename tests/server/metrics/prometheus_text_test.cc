#include "server/metrics/prometheus_text.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/engine/stats/job_stats.h"

namespace gpupipe::metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

v1::StatsResponse Stats() {
  v1::StatsResponse s;
  s.set_backend("cuda");
  s.set_server_version("gpupiped 0.1.0");
  s.set_uptime_seconds(12.5);
  s.set_process_cpu_seconds(3.25);
  v1::PriorityStats* p = s.add_priorities();
  p->set_priority(v1::PRIORITY_HIGH);
  p->set_lanes(2);
  p->set_running(1);
  p->set_queued(3);
  (*p->mutable_jobs()->mutable_by_status())["OK"] = 7;
  (*p->mutable_jobs()->mutable_by_status())["CANCELLED"] = 2;
  p->mutable_jobs()->set_bytes_in(4096);
  v1::LatencyHistogram* h = p->mutable_total_time();
  h->add_bounds_seconds(0.001);
  h->add_bounds_seconds(0.01);
  h->add_counts(4);
  h->add_counts(3);
  h->add_counts(2);
  h->set_count(9);
  h->set_sum_seconds(0.5);
  v1::PoolStats* pool = s.add_pools();
  pool->set_name("input_rings");
  pool->set_used_bytes(100);
  pool->set_capacity_bytes(1000);
  (*s.mutable_rejected())["max-client-jobs"] = 5;
  return s;
}

TEST(PrometheusTextTest, CountersGaugesAndCumulativeHistogramBuckets) {
  const std::string text = RenderPrometheus(Stats());
  EXPECT_THAT(text, HasSubstr("# TYPE gpupipe_jobs_total counter\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE process_cpu_seconds_total counter\n"
                              "process_cpu_seconds_total 3.25\n"));
  EXPECT_THAT(text, HasSubstr("gpupipe_jobs_total{priority=\"high\",status=\"OK\"} 7\n"));
  EXPECT_THAT(text, HasSubstr("gpupipe_jobs_total{priority=\"high\",status=\"CANCELLED\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("gpupipe_input_bytes_total{priority=\"high\"} 4096\n"));
  EXPECT_THAT(text, HasSubstr("gpupipe_lanes_busy{priority=\"high\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("gpupipe_queued_jobs{priority=\"high\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE gpupipe_job_duration_seconds histogram\n"));
  // Buckets are cumulative and end in +Inf, which equals _count.
  EXPECT_THAT(text,
              HasSubstr("gpupipe_job_duration_seconds_bucket{priority=\"high\",le=\"0.001\"} 4\n"));
  EXPECT_THAT(text,
              HasSubstr("gpupipe_job_duration_seconds_bucket{priority=\"high\",le=\"0.01\"} 7\n"));
  EXPECT_THAT(text,
              HasSubstr("gpupipe_job_duration_seconds_bucket{priority=\"high\",le=\"+Inf\"} 9\n"));
  EXPECT_THAT(text, HasSubstr("gpupipe_job_duration_seconds_count{priority=\"high\"} 9\n"));
  EXPECT_THAT(text, HasSubstr("gpupipe_pool_used_bytes{pool=\"input_rings\"} 100\n"));
  EXPECT_THAT(text, HasSubstr("gpupipe_rejected_total{reason=\"max-client-jobs\"} 5\n"));
  EXPECT_THAT(text, HasSubstr("gpupipe_info{version=\"gpupiped 0.1.0\",backend=\"cuda\"} 1\n"));
  // Statuses in name order, so that two scrapes of the same figures read the same.
  EXPECT_LT(text.find("status=\"CANCELLED\""), text.find("status=\"OK\""));
  EXPECT_EQ(text, RenderPrometheus(Stats()));
  EXPECT_THAT(text, Not(HasSubstr("client=")));  // per-client figures stay in GetStats
}

TEST(PrometheusTextTest, EveryFamilyHasHelpAndTypeOnce) {
  const std::string text = RenderPrometheus(Stats());
  size_t helps = 0;
  size_t types = 0;
  for (size_t at = 0; (at = text.find("# HELP ", at)) != std::string::npos; ++at) ++helps;
  for (size_t at = 0; (at = text.find("# TYPE ", at)) != std::string::npos; ++at) ++types;
  EXPECT_EQ(helps, types);
  EXPECT_GE(helps, 15u);
  EXPECT_EQ(text.back(), '\n');
}

TEST(PrometheusTextTest, BucketBoundsPrintAsWrittenAndValuesExactly) {
  v1::StatsResponse s;
  v1::PriorityStats* p = s.add_priorities();
  p->set_priority(v1::PRIORITY_NORMAL);
  v1::LatencyHistogram* h = p->mutable_queue_wait();
  for (double bound : engine::LatencyHistogram::kBounds) {
    h->add_bounds_seconds(bound);
    h->add_counts(1);
  }
  h->add_counts(1);
  h->set_count(static_cast<int64_t>(engine::LatencyHistogram::kBounds.size()) + 1);
  h->set_sum_seconds(0.1 + 0.2);
  const std::string text = RenderPrometheus(s);
  for (const char* le : {"0.0001", "0.00025", "0.05", "0.1", "0.25", "1", "30"}) {
    EXPECT_THAT(text,
                HasSubstr(absl::StrCat("gpupipe_queue_wait_seconds_bucket{priority=\"normal\","
                                       "le=\"",
                                       le, "\"}")))
        << le;
  }
  // A sum keeps every digit it needs to read back as the same double.
  EXPECT_THAT(text, HasSubstr("gpupipe_queue_wait_seconds_sum{priority=\"normal\"} "
                              "0.30000000000000004\n"));
}

TEST(PrometheusTextTest, LabelValuesAreEscaped) {
  EXPECT_EQ(EscapeLabel("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  v1::StatsResponse s;
  s.set_backend("x\"y");
  EXPECT_THAT(RenderPrometheus(s), HasSubstr("backend=\"x\\\"y\""));
}

}  // namespace
}  // namespace gpupipe::metrics
