#include "server/engine/stats/job_stats.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/engine/engine.h"

namespace gpupipe::engine {
namespace {

JobRecord Record(const std::string& client, Priority priority, absl::Status status, int64_t bytes) {
  JobRecord r;
  r.spec.client = client;
  r.spec.priority = priority;
  r.status = std::move(status);
  r.timing.bytes_in = bytes;
  r.timing.bytes_out = bytes / 2;
  r.timing.queue_us = 300;  // 0.3 ms: the 0.5 ms bucket
  r.timing.h2d_us = 100;
  r.timing.compute_us = 200;
  r.timing.d2h_us = 100;          // 0.4 ms of device time
  r.timing.total_us = 2'000'000;  // 2 s: the 5 s bucket
  return r;
}

TEST(LatencyHistogramTest, ValuesLandInTheBucketOfTheirUpperBound) {
  LatencyHistogram h;
  h.Add(0.0001);  // on a bound: that bucket
  h.Add(0.00011);
  h.Add(1000);  // past the last bound: the last bucket
  EXPECT_EQ(h.counts[0], 1);
  EXPECT_EQ(h.counts[1], 1);
  EXPECT_EQ(h.counts.back(), 1);
  EXPECT_EQ(h.count, 3);
  EXPECT_DOUBLE_EQ(h.sum, 0.0001 + 0.00011 + 1000);
}

TEST(JobStatsTest, CountsEachEndedJobByLevelStatusAndClient) {
  JobStats stats;
  stats.Ended(Record("a", Priority::kHigh, absl::OkStatus(), 1000));
  stats.Ended(Record("a", Priority::kHigh, absl::CancelledError("x"), 10));
  stats.Ended(Record("b", Priority::kLow, absl::OkStatus(), 4));

  const auto levels = stats.levels();
  const LevelJobStats& high = levels[static_cast<size_t>(Priority::kHigh)];
  EXPECT_EQ(high.jobs.by_status.at("OK"), 1);
  EXPECT_EQ(high.jobs.by_status.at("CANCELLED"), 1);
  EXPECT_EQ(high.jobs.bytes_in, 1010);
  EXPECT_EQ(high.jobs.bytes_out, 505);
  EXPECT_NEAR(high.jobs.device_seconds, 0.0008, 1e-12);
  EXPECT_EQ(high.queue_wait.count, 2);
  EXPECT_EQ(high.queue_wait.counts[2], 2);   // (0.25 ms, 0.5 ms]
  EXPECT_EQ(high.total_time.counts[12], 2);  // (1 s, 5 s]
  EXPECT_EQ(levels[static_cast<size_t>(Priority::kNormal)].jobs.by_status.size(), 0u);

  const auto clients = stats.clients();
  ASSERT_EQ(clients.size(), 2u);
  EXPECT_EQ(clients.at("a").by_status.at("OK"), 1);
  EXPECT_EQ(clients.at("a").bytes_in, 1010);
  EXPECT_EQ(clients.at("b").bytes_in, 4);
}

TEST(JobStatsTest, ClientsPastTheCapFoldIntoOtherLeastRecentFirst) {
  JobStats stats;
  for (size_t i = 0; i < JobStats::kMaxClients + 10; ++i) {
    stats.Ended(Record("c" + std::to_string(i), Priority::kNormal, absl::OkStatus(), 1));
  }
  const auto clients = stats.clients();
  EXPECT_LE(clients.size(), JobStats::kMaxClients + 1);
  ASSERT_TRUE(clients.count(JobStats::kOtherClients));
  // The earliest clients went first; the latest stayed apart; no job was lost.
  EXPECT_EQ(clients.count("c0"), 0u);
  EXPECT_EQ(clients.count("c" + std::to_string(JobStats::kMaxClients + 9)), 1u);
  int64_t jobs = 0;
  for (const auto& [name, counts] : clients) jobs += counts.by_status.at("OK");
  EXPECT_EQ(jobs, static_cast<int64_t>(JobStats::kMaxClients + 10));
}

TEST(JobStatsTest, AJobThatNeverRanCountsByStatusButAddsNoLatency) {
  JobStats stats;
  JobRecord queued = Record("a", Priority::kNormal, absl::UnavailableError("shut down"), 0);
  queued.timing = {};
  stats.Ended(queued, /*ran=*/false);
  const auto levels = stats.levels();  // a copy: levels() answers by value
  const LevelJobStats& normal = levels[static_cast<size_t>(Priority::kNormal)];
  EXPECT_EQ(normal.jobs.by_status.at("UNAVAILABLE"), 1);
  EXPECT_EQ(normal.queue_wait.count, 0);
  EXPECT_EQ(normal.device_time.count, 0);
  EXPECT_EQ(normal.total_time.count, 0);
}

TEST(JobStatsTest, RefusalsCountUnderTheLimitFlagOrTheStatus) {
  EXPECT_EQ(RefusalReason(absl::ResourceExhaustedError(
                "client x has 8 jobs queued or running (gpupiped --max-client-jobs)")),
            "max-client-jobs");
  EXPECT_EQ(RefusalReason(absl::InvalidArgumentError("ops: empty")), "invalid_argument");
  JobStats stats;
  stats.Refused(absl::InvalidArgumentError("a"));
  stats.Refused(absl::InvalidArgumentError("b"));
  stats.Refused(absl::ResourceExhaustedError("too much (gpupiped --max-queued-mib)"));
  const auto refused = stats.refused();
  EXPECT_EQ(refused.at("invalid_argument"), 2);
  EXPECT_EQ(refused.at("max-queued-mib"), 1);
}

TEST(JobStatsTest, AClientsNameCannotMintARefusalReason) {
  // The client's identity is quoted in admission messages, before the flag; its client-id is
  // the client's to choose.
  EXPECT_EQ(RefusalReason(absl::ResourceExhaustedError(
                "client 'ipv4:10.0.0.7/gpupiped --x123' has 4 uploads in progress (gpupiped "
                "--max-client-uploads); wait for one to end")),
            "max-client-uploads");
  EXPECT_EQ(RefusalReason(absl::ResourceExhaustedError("client 'gpupiped --x123' is over")),
            "resource_exhausted");
  EXPECT_EQ(RefusalReason(absl::ResourceExhaustedError("(gpupiped --max-client-jobs-and-more)")),
            "resource_exhausted");
  JobStats stats;
  for (int i = 0; i < 100; ++i) {
    stats.Refused(absl::ResourceExhaustedError(
        absl::StrCat("client 'gpupiped --x", i, "' has too many (gpupiped --max-client-jobs)")));
  }
  EXPECT_EQ(stats.refused().size(), 1u);
}

}  // namespace
}  // namespace gpupipe::engine
