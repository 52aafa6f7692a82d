// The gpupipe CLI's plan, dry-run and compare features against a real daemon on the CPU
// backend: `submit --dry-run`, `submit --explain` and `compare`.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "client/npy.h"
#include "tests/integration/binaries.h"
#include "tests/integration/cli_fixture.h"
#include "tests/integration/process.h"
#include "tests/testing/random_tensor.h"

namespace gpupipe::testing {
namespace {

int Lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

class CliPlan : public CliFixture {
 protected:
  std::string RandomInput() {
    const uint64_t seed = FreshSeed();
    RecordProperty("seed", std::to_string(seed));
    return WriteInput(RandomFloats(64 * 100, seed), {64, 100});
  }
};

TEST_F(CliPlan, DryRunPrintsThePlanAndWritesNothing) {
  const std::string input = RandomInput();
  const std::string output = dir_ + "/y.npy";
  CommandResult r = Gpupipe({"submit", "--input", input, "--ops",
                             "affine(alpha=2, beta=1) | relu | softmax", "--dry-run", "--output",
                             output});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  // The plan and nothing else: its header, one line per kernel naming its rows x cols.
  EXPECT_EQ(r.out.rfind("plan      ", 0), 0u) << r.out;
  EXPECT_TRUE(Contains(r.out, "k0  ")) << r.out;
  EXPECT_TRUE(Contains(r.out, "64 x 100")) << r.out;
  EXPECT_FALSE(Contains(r.out, "timing")) << r.out;
  EXPECT_FALSE(Contains(r.out, "output")) << r.out;
  EXPECT_NE(access(output.c_str(), F_OK), 0) << output << " was written by a dry run";
}

TEST_F(CliPlan, DryRunJsonHasThePlanAndNoTiming) {
  const std::string input = RandomInput();
  CommandResult r = Gpupipe({"submit", "--input", input, "--ops", "relu | softmax", "--dry-run",
                             "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(j["dry_run"], true);
  EXPECT_EQ(j["output"]["shape"], nlohmann::json::array({64, 100}));
  EXPECT_FALSE(j.contains("timing")) << r.out;
  ASSERT_TRUE(j.contains("plan")) << r.out;
  EXPECT_FALSE(j["plan"]["kernels"].empty()) << r.out;
}

TEST_F(CliPlan, ExplainJsonHasTheKernelsAndTheResult) {
  const std::string input = WriteInput({1, 2, 3, 4, 5, 6}, {2, 3});
  CommandResult r = Gpupipe({"submit", "--input", input, "--ops", "affine(alpha=2) | sum",
                             "--explain", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(j["dry_run"], false);
  ASSERT_TRUE(j.contains("plan")) << r.out;
  const nlohmann::json& kernels = j["plan"]["kernels"];
  ASSERT_TRUE(kernels.is_array()) << r.out;
  ASSERT_FALSE(kernels.empty()) << r.out;
  for (const nlohmann::json& k : kernels) {
    EXPECT_FALSE(k["name"].get<std::string>().empty()) << k;
    EXPECT_GT(k["rows"].get<int64_t>(), 0) << k;
    EXPECT_GT(k["cols"].get<int64_t>(), 0) << k;
  }
  EXPECT_TRUE(j["plan"]["edges"].is_array()) << r.out;
  // The job still ran: 2 * [1 + 2 + 3, 4 + 5 + 6].
  EXPECT_EQ(j["output"]["values"], nlohmann::json::array({12.0, 30.0})) << r.out;
  EXPECT_TRUE(j["timing"].contains("steps")) << r.out;
  EXPECT_TRUE(j["timing"].contains("graph")) << r.out;
}

TEST_F(CliPlan, ExplainTextPrintsThePlanBeforeTheSummary) {
  const std::string input = WriteInput({1, 2, 3, 4, 5, 6}, {2, 3});
  CommandResult r = Gpupipe({"submit", "--input", input, "--ops", "sum", "--explain"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const size_t plan = r.out.find("plan      ");
  const size_t job = r.out.find("job       ");
  ASSERT_NE(plan, std::string::npos) << r.out;
  ASSERT_NE(job, std::string::npos) << r.out;
  EXPECT_LT(plan, job) << r.out;
  EXPECT_TRUE(Contains(r.out, "[6, 15]")) << r.out;
}

TEST_F(CliPlan, CompareAsksOnlyForModesTheBackendHasAndNamesTheRest) {
  const std::string input = RandomInput();
  // Asked for modes the CPU backend lacks, and nothing else: refused before any job runs.
  CommandResult r =
      Gpupipe({"compare", "--input", input, "--ops", "affine(alpha=2) | softmax", "--launch",
               "stream,pdl", "--staging", "direct,pipeline", "--repeat", "2", "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_EQ(Lines(r.err), 1) << r.err;
  EXPECT_TRUE(Contains(r.err,
                       "the cpu backend supports none of the --launch values asked for "
                       "(it supports auto)"))
      << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["status"], "error");
  EXPECT_EQ(j["code"], "FAILED_PRECONDITION");

  // With the defaults, it runs what the backend has (auto) and says what it skipped.
  r = Gpupipe({"compare", "--input", input, "--ops", "relu", "--repeat", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["rows"].size(), 1u) << r.out;
  EXPECT_EQ(j["rows"][0]["launch"], "auto");
  EXPECT_EQ(j["skipped"]["launch"], nlohmann::json::array({"stream", "pdl", "graph", "graph-pdl"}));
  EXPECT_EQ(j["skipped"]["staging"].size(), 5u);
  r = Gpupipe({"compare", "--input", input, "--ops", "relu", "--repeat", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out,
                       "skipped   launch stream, pdl, graph, graph-pdl; staging direct, "
                       "pipeline, pipeline-thread, primitives, bulk: not supported by the "
                       "cpu backend\n"))
      << r.out;
  // An explicit list keeps what the backend has and skips the rest.
  r = Gpupipe({"compare", "--input", input, "--ops", "relu", "--launch", "pdl,auto", "--staging",
               "auto", "--repeat", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["rows"].size(), 1u);
  EXPECT_EQ(j["skipped"]["launch"], nlohmann::json::array({"pdl"}));
}

TEST_F(CliPlan, CompareAutoOnTheCpuBackend) {
  const std::string input = RandomInput();
  CommandResult r = Gpupipe({"compare", "--input", input, "--ops", "affine(alpha=2) | softmax",
                             "--launch", "auto", "--staging", "auto", "--repeat", "2", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(j["identical"], true);
  EXPECT_EQ(j["repeat"], 2);
  EXPECT_EQ(j["input"]["shape"], nlohmann::json::array({64, 100}));
  ASSERT_EQ(j["rows"].size(), 1u) << r.out;
  const nlohmann::json& row = j["rows"][0];
  EXPECT_EQ(row["launch"], "auto");
  EXPECT_EQ(row["staging"], "auto");
  EXPECT_GE(row["device_us"].get<double>(), 0);
  EXPECT_GT(row["end_to_end_us"].get<double>(), 0);
  // The only row is its own base.
  if (!row["speedup"].is_null()) EXPECT_DOUBLE_EQ(row["speedup"].get<double>(), 1.0);
}

TEST_F(CliPlan, CompareTextIsATable) {
  const std::string input = RandomInput();
  CommandResult r = Gpupipe({"compare", "--input", input, "--ops", "relu | sum", "--launch",
                             "auto", "--staging", "auto", "--repeat", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "launch  staging")) << r.out;
  EXPECT_TRUE(Contains(r.out, "\nauto    auto ")) << r.out;
  EXPECT_TRUE(Contains(r.out, "results   identical in all 1 configuration\n")) << r.out;
}

TEST_F(CliPlan, CompareUsageErrorsExitTwo) {
  const std::string input = RandomInput();
  CommandResult r =
      Gpupipe({"compare", "--input", input, "--ops", "relu", "--launch", "stream,warp"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(Lines(r.err), 1) << r.err;
  EXPECT_TRUE(Contains(r.err, "--launch: unknown value 'warp'")) << r.err;
}

}  // namespace
}  // namespace gpupipe::testing
