// The gpupipe CLI against a real daemon: .npy in, .npy out, summaries, JSON and errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "client/npy.h"
#include "kernels/cpu/reference_ops.h"
#include "tests/integration/binaries.h"
#include "tests/integration/cli_fixture.h"
#include "tests/integration/process.h"
#include "tests/testing/random_tensor.h"

namespace gpupipe::testing {
namespace {

using Cli = CliFixture;

TEST_F(Cli, SubmitWritesTheResultAndPrintsASummary) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<float> x = RandomFloats(64 * 100, seed);
  const std::string input = WriteInput(x, {64, 100});
  const std::string output = dir_ + "/y.npy";
  CommandResult r = Gpupipe({"submit", "--input", input, "--ops",
                             "affine(alpha=2,beta=1) | relu | softmax", "--output", output,
                             "--priority", "high"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("softmax"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(output), std::string::npos) << r.out;

  absl::StatusOr<client::NpyArray> y = client::ReadNpy(output);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape, (std::vector<int64_t>{64, 100}));
  // The reference: the same ops, one by one.
  kernels::EwProgram program;
  program.Append({kernels::EwOpcode::kAffine, 2.0f, 1.0f});
  program.Append({kernels::EwOpcode::kRelu});
  std::vector<float> tmp(x.size()), want(x.size());
  kernels::cpu::Elementwise(x.data(), tmp.data(), static_cast<int64_t>(x.size()), program);
  kernels::cpu::RowSoftmax(tmp.data(), want.data(), 64, 100);
  std::vector<float> got = AsFloats(y->data);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_FLOAT_EQ(got[i], want[i]) << i;
}

TEST_F(Cli, SubmitTakesInt32AndFloat16Npy) {
  client::NpyArray ints;
  ints.dtype = v1::DTYPE_INT32;
  ints.shape = {2, 3};
  const int32_t values[] = {2147483647, 5, -7, 1, 2, 3};
  ints.data.assign(reinterpret_cast<const char*>(values), sizeof(values));
  const std::string input = dir_ + "/i4.npy";
  ASSERT_TRUE(client::WriteNpy(input, ints).ok());
  const std::string output = dir_ + "/sum.npy";
  CommandResult r = Gpupipe({"submit", "--input", input, "--ops", "add(value=1) | sum",
                             "--output", output});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  absl::StatusOr<client::NpyArray> y = client::ReadNpy(output);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->dtype, v1::DTYPE_INT64);  // np.sum of int32
  ASSERT_EQ(y->data.size(), 16u);
  int64_t sums[2];
  std::memcpy(sums, y->data.data(), 16);
  EXPECT_EQ(sums[0], int64_t{-2147483647} - 1 + 6 - 6);  // add wraps in int32
  EXPECT_EQ(sums[1], 2 + 3 + 4);

  r = Gpupipe({"submit", "--input", input, "--ops", "add(value=0.5)"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("value"), std::string::npos) << r.err;

  client::NpyArray halves;
  halves.dtype = v1::DTYPE_FLOAT16;
  halves.shape = {4};
  const uint16_t h[] = {0x3c00 /* 1 */, 0xc000 /* -2 */, 0x3800 /* 0.5 */, 0x0000};
  halves.data.assign(reinterpret_cast<const char*>(h), sizeof(h));
  const std::string input2 = dir_ + "/f2.npy";
  ASSERT_TRUE(client::WriteNpy(input2, halves).ok());
  const std::string output2 = dir_ + "/relu.npy";
  r = Gpupipe({"submit", "--input", input2, "--ops", "relu", "--output", output2});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  y = client::ReadNpy(output2);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->dtype, v1::DTYPE_FLOAT16);
  const uint16_t want[] = {0x3c00, 0x0000, 0x3800, 0x0000};
  EXPECT_EQ(y->data, std::string(reinterpret_cast<const char*>(want), sizeof(want)));
}

TEST_F(Cli, SubmitJsonIsOneObjectWithTiming) {
  const std::string input = WriteInput({1, 2, 3, 4, 5, 6}, {2, 3});
  CommandResult r = Gpupipe({"submit", "--input", input, "--ops", "sum", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["status"], "ok");
  EXPECT_FALSE(j["job_id"].get<std::string>().empty());
  EXPECT_EQ(j["backend"], "cpu");
  EXPECT_EQ(j["output"]["shape"], nlohmann::json::array({2}));
  EXPECT_TRUE(j["timing"].contains("total_us")) << r.out;
  EXPECT_EQ(j["timing"]["bytes_in"], 24);
}

TEST_F(Cli, SmallResultsArePrinted) {
  const std::string input = WriteInput({1, 2, 3, 4, 5, 6}, {2, 3});
  CommandResult r = Gpupipe({"submit", "--input", input, "--ops", "sum"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("[6, 15]"), std::string::npos) << r.out;
}

TEST_F(Cli, DescribeJsonListsTheCatalog) {
  CommandResult r = Gpupipe({"describe", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["backend"], "cpu");
  std::vector<std::string> names;
  for (const auto& op : j["ops"]) names.push_back(op["name"]);
  for (const char* op : {"affine", "relu", "sqrt", "pow", "sum", "softmax"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), op), names.end()) << op;
  }
}

TEST_F(Cli, DescribeTextNamesTheOps) {
  CommandResult r = Gpupipe({"describe"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* op : {"affine", "relu", "sum", "softmax"}) {
    EXPECT_NE(r.out.find(op), std::string::npos) << r.out;
  }
}

int LineCount(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

TEST_F(Cli, ServerErrorsExitNonZeroWithOneLine) {
  const std::string input = WriteInput({1, 2, 3}, {3});
  CommandResult r = Gpupipe({"submit", "--input", input, "--ops", "sum | sum"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(LineCount(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("INVALID_ARGUMENT"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("ops[1] (sum)"), std::string::npos) << r.err;
}

TEST_F(Cli, GrammarErrorsNameTheCause) {
  const std::string input = WriteInput({1, 2, 3}, {3});
  CommandResult r = Gpupipe({"submit", "--input", input, "--ops", "relu | sofmax"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(LineCount(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("sofmax"), std::string::npos) << r.err;
}

TEST_F(Cli, UnsupportedNpyIsAClearError) {
  const char* data_dir = std::getenv("GPUPIPE_TEST_DATA");
  const std::string path =
      std::string(data_dir ? data_dir : GPUPIPE_CLIENT_TEST_DATA) + "/u2.npy";
  CommandResult r = Gpupipe({"submit", "--input", path, "--ops", "relu"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(LineCount(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("<u2"), std::string::npos) << r.err;
}

TEST_F(Cli, UnreachableServerIsAClearError) {
  CommandResult r = RunCommand({CliBinary(), "--target", "127.0.0.1:1", "describe"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(LineCount(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("127.0.0.1:1"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace gpupipe::testing
