#include "client/cli/stats_view.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpupipe {
namespace cli {
namespace {

using ::testing::HasSubstr;

// 10 jobs: 4 at most 1 ms, 4 more at most 10 ms, 2 beyond.
v1::LatencyHistogram Histogram() {
  v1::LatencyHistogram h;
  h.add_bounds_seconds(0.001);
  h.add_bounds_seconds(0.01);
  h.add_counts(4);
  h.add_counts(4);
  h.add_counts(2);
  h.set_count(10);
  h.set_sum_seconds(0.2);
  return h;
}

TEST(StatsViewTest, QuantilesInterpolateInsideTheirBucket) {
  const v1::LatencyHistogram h = Histogram();
  EXPECT_DOUBLE_EQ(HistogramQuantile(h, 0.2), 0.0005);  // rank 2 of the first 4: halfway
  EXPECT_DOUBLE_EQ(HistogramQuantile(h, 0.6), 0.0055);  // rank 6: 2 of the next 4
  EXPECT_DOUBLE_EQ(HistogramQuantile(h, 0.99), 0.01);   // the unbounded bucket: its lower edge
  EXPECT_EQ(HistogramQuantile(v1::LatencyHistogram(), 0.5), -1);
}

v1::StatsResponse Stats() {
  v1::StatsResponse s;
  s.set_backend("cuda");
  s.set_server_version("gpupiped 0.1.0");
  s.set_uptime_seconds(90);
  s.set_process_cpu_seconds(12.34);
  s.set_uploads_in_progress(1);
  v1::PriorityStats* p = s.add_priorities();
  p->set_priority(v1::PRIORITY_HIGH);
  p->set_lanes(2);
  p->set_running(1);
  p->set_queued(3);
  (*p->mutable_jobs()->mutable_by_status())["OK"] = 8;
  (*p->mutable_jobs()->mutable_by_status())["CANCELLED"] = 2;
  p->mutable_jobs()->set_bytes_in(2048);
  *p->mutable_total_time() = Histogram();
  v1::ClientStats* c = s.add_clients();
  c->set_client("ipv4:10.0.0.7/batch");
  c->set_active_jobs(2);
  c->set_unread_bytes(3 << 20);
  (*c->mutable_jobs()->mutable_by_status())["OK"] = 5;
  v1::PoolStats* pool = s.add_pools();
  pool->set_name("input_rings");
  pool->set_used_bytes(1 << 20);
  pool->set_capacity_bytes(64 << 20);
  s.mutable_graph_cache()->set_hits(3);
  (*s.mutable_rejected())["unauthenticated"] = 1;
  (*s.mutable_rejected())["max-client-jobs"] = 4;
  return s;
}

TEST(StatsViewTest, UptimeInTheLargestUnitsThatFit) {
  EXPECT_EQ(FormatUptime(12.54), "12.5 s");
  EXPECT_EQ(FormatUptime(200), "3 min 20 s");
  EXPECT_EQ(FormatUptime(7500), "2 h 5 min");
  EXPECT_EQ(FormatUptime(3 * 86400 + 4 * 3600 + 59), "3 d 4 h");
}

TEST(StatsViewTest, TextShowsEachPriorityClientPoolAndRefusal) {
  const std::string text = RenderStatsText(Stats());
  EXPECT_THAT(text, HasSubstr("server    gpupiped 0.1.0 (backend cuda), up 1 min 30 s, 12.3 s "
                              "of CPU, 1 upload in progress\n"));
  EXPECT_THAT(text, HasSubstr("jobs      priority  lanes  busy  queued  ended  ok  failed"));
  // high: 2 lanes, 1 busy, 3 queued, 10 ended, 8 ok, 2 failed; total p50 3.25 ms (rank 5: the
  // first of the second bucket's 4), p99 past the last bound.
  EXPECT_THAT(text, ::testing::ContainsRegex("high +2 +1 +3 +10 +8 +2 .* 3\\.25 ms +> 10\\.00 ms"));
  // active 2, uploads 0, queued 0 B, unread 3 MiB, ended 5, ok 5, failed 0
  EXPECT_THAT(text,
              ::testing::ContainsRegex("ipv4:10.0.0.7/batch +2 +0 +0 B +3\\.0 MiB +5 +5 +0"));
  EXPECT_THAT(text, HasSubstr("pools     input_rings  used 1.0 MiB of 64.0 MiB\n"));
  EXPECT_THAT(text, HasSubstr("graphs    hits 3, updates 0"));
  EXPECT_THAT(text, HasSubstr("rejected  max-client-jobs 4, unauthenticated 1\n"));
  // A label wider than the label column keeps a space before its value.
  EXPECT_THAT(text, HasSubstr("\ndirect runs 0\n"));
  v1::StatsResponse empty;
  EXPECT_THAT(RenderStatsText(empty), HasSubstr("clients   none yet\n"));
  EXPECT_THAT(RenderStatsText(empty), HasSubstr("rejected  none\n"));
}

TEST(StatsViewTest, JsonUsesNumbersAndNamesTheQuantiles) {
  const nlohmann::ordered_json j = StatsJson(Stats());
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(j["backend"], "cuda");
  EXPECT_EQ(j["uploads_in_progress"], 1);
  const auto& high = j["priorities"][0];
  EXPECT_EQ(high["priority"], "high");
  EXPECT_EQ(high["jobs"]["ended"], 10);
  EXPECT_EQ(high["jobs"]["by_status"]["CANCELLED"], 2);
  EXPECT_EQ(high["jobs"]["bytes_in"], 2048);
  EXPECT_DOUBLE_EQ(high["total_time"]["p50_seconds"].get<double>(), 0.00325);
  EXPECT_TRUE(high["queue_wait"]["p50_seconds"].is_null());  // no jobs: no quantile
  EXPECT_EQ(high["total_time"]["buckets"][2]["count"], 2);
  EXPECT_TRUE(high["total_time"]["buckets"][2]["le_seconds"].is_null());
  EXPECT_EQ(j["clients"][0]["client"], "ipv4:10.0.0.7/batch");
  EXPECT_EQ(j["pools"][0]["capacity_bytes"], 64 << 20);
  EXPECT_EQ(j["rejected"]["max-client-jobs"], 4);
  EXPECT_EQ(j["graph_cache"]["hits"], 3);
}

}  // namespace
}  // namespace cli
}  // namespace gpupipe
