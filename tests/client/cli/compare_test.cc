#include "client/cli/compare.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpupipe {
namespace cli {
namespace {

using ::testing::HasSubstr;

CompareRow Row(v1::LaunchMode launch, v1::Staging staging, std::vector<double> device_us,
               std::vector<double> end_to_end_us, std::string graph = "") {
  CompareRow row;
  row.launch = launch;
  row.staging = staging;
  row.device_us = std::move(device_us);
  row.end_to_end_us = std::move(end_to_end_us);
  row.bytes_in = 25600;
  row.bytes_out = 25600;
  row.graph = std::move(graph);
  return row;
}

CompareReport Report() {
  CompareReport r;
  r.input_path = "x.npy";
  r.input_dtype = v1::DTYPE_FLOAT32;
  r.input_shape = {64, 100};
  r.input_bytes = 25600;
  r.ops = "affine(alpha=2) | softmax";
  r.backend = "cuda";
  r.repeat = 3;
  r.rows.push_back(Row(v1::LAUNCH_STREAM, v1::STAGING_DIRECT, {20, 30, 10}, {1300, 1200, 1100}));
  r.rows.push_back(
      Row(v1::LAUNCH_GRAPH_PDL, v1::STAGING_PIPELINE, {8, 10, 12}, {1000, 900, 950}, "hit"));
  return r;
}

TEST(CompareTest, Median) {
  EXPECT_EQ(Median({}), 0);
  EXPECT_EQ(Median({7}), 7);
  EXPECT_EQ(Median({3, 1, 2}), 2);
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(Median({5, 5, 1, 9, 5}), 5);
  EXPECT_EQ(Median({10, 1}), 5.5);
}

TEST(CompareTest, ConfigName) {
  EXPECT_EQ(ConfigName(v1::LAUNCH_GRAPH_PDL, v1::STAGING_PIPELINE), "graph-pdl/pipeline");
  EXPECT_EQ(ConfigName(v1::LAUNCH_AUTO, v1::STAGING_AUTO), "auto/auto");
}

TEST(CompareTest, SpeedupBaseIsStreamDirectElseTheFirstRow) {
  std::vector<CompareRow> rows = {Row(v1::LAUNCH_PDL, v1::STAGING_DIRECT, {}, {}),
                                  Row(v1::LAUNCH_STREAM, v1::STAGING_PIPELINE, {}, {}),
                                  Row(v1::LAUNCH_STREAM, v1::STAGING_DIRECT, {}, {})};
  EXPECT_EQ(SpeedupBase(rows), 2u);
  rows.pop_back();
  EXPECT_EQ(SpeedupBase(rows), 0u);
  EXPECT_EQ(SpeedupBase({}), 0u);
}

TEST(CompareTest, Stats) {
  const std::vector<CompareStats> stats = ComputeStats(Report());
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_EQ(stats[0].device_us, 20);
  EXPECT_EQ(stats[0].end_to_end_us, 1200);
  EXPECT_DOUBLE_EQ(stats[0].gbps, 51200.0 / 20 / 1e3);
  EXPECT_DOUBLE_EQ(*stats[0].speedup, 1.0);
  EXPECT_EQ(stats[1].device_us, 10);
  EXPECT_EQ(stats[1].end_to_end_us, 950);
  EXPECT_DOUBLE_EQ(*stats[1].speedup, 2.0);

  // Speedups are against stream/direct wherever it is in the list.
  CompareReport moved = Report();
  std::swap(moved.rows[0], moved.rows[1]);
  const std::vector<CompareStats> moved_stats = ComputeStats(moved);
  EXPECT_DOUBLE_EQ(*moved_stats[0].speedup, 2.0);
  EXPECT_DOUBLE_EQ(*moved_stats[1].speedup, 1.0);

  // Without stream/direct, the first row is the base.
  CompareReport no_base = Report();
  no_base.rows[0].launch = v1::LAUNCH_PDL;
  no_base.rows.push_back(Row(v1::LAUNCH_GRAPH, v1::STAGING_DIRECT, {40}, {2000}));
  const std::vector<CompareStats> no_base_stats = ComputeStats(no_base);
  EXPECT_DOUBLE_EQ(*no_base_stats[0].speedup, 1.0);
  EXPECT_DOUBLE_EQ(*no_base_stats[2].speedup, 0.5);

  // A zero device time (a backend that measures nothing) has no speedup and no throughput.
  CompareReport zero = Report();
  zero.rows[1].device_us = {0, 0};
  const std::vector<CompareStats> zero_stats = ComputeStats(zero);
  EXPECT_FALSE(zero_stats[1].speedup.has_value());
  EXPECT_EQ(zero_stats[1].gbps, 0);
  zero.rows[0].device_us = {0};
  EXPECT_FALSE(ComputeStats(zero)[0].speedup.has_value());
}

TEST(CompareTest, FirstDifference) {
  EXPECT_EQ(FirstDifference("abcd", "abcd"), -1);
  EXPECT_EQ(FirstDifference("", ""), -1);
  EXPECT_EQ(FirstDifference("abcd", "abXd"), 2);
  EXPECT_EQ(FirstDifference("abcd", "Xbcd"), 0);
  EXPECT_EQ(FirstDifference("abc", "abcd"), 3);
  EXPECT_EQ(FirstDifference("abcd", "ab"), 2);
  // Bytes, not characters: embedded zeros count.
  EXPECT_EQ(FirstDifference(std::string("a\0b", 3), std::string("a\0c", 3)), 2);
}

TEST(CompareTest, MismatchMessage) {
  CompareReport r = Report();
  EXPECT_EQ(MismatchMessage(r), "");
  r.rows[1].first_difference = 1024;
  EXPECT_EQ(MismatchMessage(r),
            "outputs differ from the first run (stream/direct): graph-pdl/pipeline from byte 1024");
  // The reference configuration's own repeats are checked too.
  r.rows[0].first_difference = 0;
  EXPECT_EQ(MismatchMessage(r),
            "outputs differ from the first run (stream/direct): stream/direct from byte 0, "
            "graph-pdl/pipeline from byte 1024");
}

TEST(CompareTest, Text) {
  EXPECT_EQ(RenderCompareText(Report()),
            "ops       affine(alpha=2) | softmax\n"
            "input     x.npy float32[64, 100] (25.0 KiB), backend cuda\n"
            "runs      3 per configuration after 1 warm-up; times are medians\n"
            "\n"
            "launch     staging    device  end-to-end  GB/s  speedup  graph\n"
            "stream     direct    20.0 us     1.20 ms  2.56    1.00x  -\n"
            "graph-pdl  pipeline  10.0 us    950.0 us  5.12    2.00x  hit\n"
            "\n"
            "results   identical in all 2 configurations\n");
  CompareReport bad = Report();
  bad.rows[1].first_difference = 4;
  EXPECT_THAT(RenderCompareText(bad),
              HasSubstr("results   outputs differ from the first run (stream/direct): "
                        "graph-pdl/pipeline from byte 4\n"));
  CompareReport zero = Report();
  zero.rows[0].device_us = {0};
  EXPECT_THAT(RenderCompareText(zero),
              HasSubstr("stream     direct     0.0 us     1.20 ms  0.00        -  -\n"));
}

TEST(CompareTest, Json) {
  nlohmann::ordered_json j = CompareJson(Report());
  EXPECT_EQ(j.dump(),
            R"({"status":"ok","ops":"affine(alpha=2) | softmax",)"
            R"("input":{"path":"x.npy","shape":[64,100],"dtype":"float32"},)"
            R"("backend":"cuda","repeat":3,"rows":[)"
            R"({"launch":"stream","staging":"direct","device_us":20.0,"end_to_end_us":1200.0,)"
            R"("gbps":2.56,"speedup":1.0,"graph":null},)"
            R"({"launch":"graph-pdl","staging":"pipeline","device_us":10.0,)"
            R"("end_to_end_us":950.0,"gbps":5.12,"speedup":2.0,"graph":"hit"}],)"
            R"("skipped":{"launch":[],"staging":[]},"identical":true})");

  CompareReport bad = Report();
  bad.rows[1].first_difference = 4;
  nlohmann::ordered_json e = CompareJson(bad);
  EXPECT_EQ(e["status"], "error");
  EXPECT_EQ(e["code"], "INTERNAL");
  EXPECT_EQ(e["message"], MismatchMessage(bad));
  EXPECT_EQ(e["identical"], false);
  EXPECT_EQ(e["rows"].size(), 2u);
}

v1::DescribeResponse Supporting(std::vector<v1::LaunchMode> launches,
                                std::vector<v1::Staging> stagings) {
  v1::DescribeResponse d;
  d.set_backend("cuda");
  for (v1::LaunchMode l : launches) d.add_launch_modes(l);
  for (v1::Staging s : stagings) d.add_stagings(s);
  return d;
}

TEST(CompareTest, PlanRunsWhatTheBackendSupportsAndSkipsTheRest) {
  CompareArgs args;
  args.launches = {v1::LAUNCH_STREAM, v1::LAUNCH_PDL, v1::LAUNCH_GRAPH};
  args.stagings = {v1::STAGING_DIRECT, v1::STAGING_BULK};
  absl::StatusOr<ComparePlan> plan =
      PlanCompare(args, Supporting({v1::LAUNCH_AUTO, v1::LAUNCH_STREAM, v1::LAUNCH_GRAPH},
                                   {v1::STAGING_AUTO, v1::STAGING_DIRECT, v1::STAGING_PIPELINE}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->launches, (std::vector<v1::LaunchMode>{v1::LAUNCH_STREAM, v1::LAUNCH_GRAPH}));
  EXPECT_EQ(plan->skipped_launches, std::vector<v1::LaunchMode>{v1::LAUNCH_PDL});
  EXPECT_EQ(plan->stagings, std::vector<v1::Staging>{v1::STAGING_DIRECT});
  EXPECT_EQ(plan->skipped_stagings, std::vector<v1::Staging>{v1::STAGING_BULK});

  // Defaults none of which the backend has: auto alone, the defaults skipped.
  plan = PlanCompare(args, Supporting({v1::LAUNCH_AUTO}, {v1::STAGING_AUTO}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->launches, std::vector<v1::LaunchMode>{v1::LAUNCH_AUTO});
  EXPECT_EQ(plan->skipped_launches.size(), 3u);
  EXPECT_EQ(plan->stagings, std::vector<v1::Staging>{v1::STAGING_AUTO});

  // Values given explicitly are not replaced by auto.
  args.launches_given = true;
  plan = PlanCompare(args, Supporting({v1::LAUNCH_AUTO}, {v1::STAGING_AUTO}));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(plan.status().message(),
            "compare: the cuda backend supports none of the --launch values asked for (it "
            "supports auto)");
}

TEST(CompareTest, SkippedModesAreShown) {
  CompareReport report = Report();
  report.skipped_launches = {v1::LAUNCH_PDL};
  report.skipped_stagings = {v1::STAGING_BULK, v1::STAGING_PRIMITIVES};
  EXPECT_THAT(RenderCompareText(report),
              HasSubstr("skipped   launch pdl; staging bulk, primitives: not supported by the "
                        "cuda backend\n"));
  const nlohmann::ordered_json j = CompareJson(report);
  EXPECT_EQ(j["skipped"]["launch"], nlohmann::ordered_json::array({"pdl"}));
  EXPECT_EQ(j["skipped"]["staging"], nlohmann::ordered_json::array({"bulk", "primitives"}));
}

}  // namespace
}  // namespace cli
}  // namespace gpupipe
