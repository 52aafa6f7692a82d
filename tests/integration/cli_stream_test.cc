// The CLI's choice between Submit and Run (--stream) and the daemon's two input limits, on a
// daemon with small limits so that the cases stay small.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "client/job_client.h"
#include "client/npy.h"
#include "nlohmann/json.hpp"
#include "tests/integration/binaries.h"
#include "tests/integration/process.h"
#include "tests/testing/random_tensor.h"

namespace gpupipe::testing {
namespace {

class CliStream : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    daemon_ = new DaemonProcess(DaemonBinary(), {"--backend", "cpu", "--max-input-mib", "1",
                                                 "--max-stream-input-gib", "1", "--quiet"});
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(daemon_->port(), 0) << daemon_->error();
    char tmpl[] = "/tmp/gpupipe-cli-stream-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    EXPECT_TRUE(daemon_->alive()) << daemon_->log();
    std::system(("rm -rf " + dir_).c_str());
  }

  // This suite is about the connection's two paths: shared memory stays out of it.
  CommandResult Gpupipe(std::vector<std::string> args) {
    if (std::find(args.begin(), args.end(), "submit") != args.end()) {
      args.insert(args.end(), {"--transport", "grpc"});
    }
    args.insert(args.begin(), {CliBinary(), "--target", daemon_->target()});
    return RunCommand(args);
  }

  static inline DaemonProcess* daemon_ = nullptr;
  std::string dir_;
};

TEST_F(CliStream, DescribeShowsBothLimits) {
  auto client = client::JobClient::Create(daemon_->target());
  ASSERT_TRUE(client.ok());
  absl::StatusOr<v1::DescribeResponse> d = (*client)->Describe();
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->limits().max_input_bytes(), 1 << 20);
  EXPECT_EQ(d->limits().max_stream_input_bytes(), int64_t{1} << 30);
  const CommandResult r = Gpupipe({"describe"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("input 1.0 MiB (streamed 1.0 GiB)"), std::string::npos) << r.out;
  // The input rings, at their defaults.
  EXPECT_EQ(d->limits().input_ring_bytes(), int64_t{64} << 20);
  EXPECT_EQ(d->limits().input_ring_total_bytes(), int64_t{512} << 20);
  EXPECT_NE(r.out.find("ring of at most 64.0 MiB each, from a pool of 512.0 MiB"),
            std::string::npos)
      << r.out;
}

TEST_F(CliStream, InputsOverTheSubmitLimitGoThroughRun) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  // 1.5 MiB: over this daemon's Submit limit (1 MiB; gRPC's message limit, 1 MiB above it,
  // still lets the request reach the service), under the CLI's auto threshold.
  const std::vector<float> x = RandomFloats(3 << 17, seed);
  client::NpyArray array{v1::DTYPE_FLOAT32, {3, 1 << 17}, AsBytes(x)};
  const std::string input = dir_ + "/x.npy", output = dir_ + "/y.npy";
  ASSERT_TRUE(client::WriteNpy(input, array).ok());

  // Inline (auto at this size, or never): refused, with the way out in the message.
  for (const char* mode : {"auto", "never"}) {
    const CommandResult r =
        Gpupipe({"submit", "--input", input, "--ops", "relu", "--stream", mode});
    EXPECT_EQ(r.exit_code, 1) << mode;
    EXPECT_NE(r.err.find("RESOURCE_EXHAUSTED"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("can be streamed with Run"), std::string::npos) << r.err;
  }

  const CommandResult r = Gpupipe({"--json", "submit", "--input", input, "--ops", "relu",
                                   "--stream", "always", "--output", output});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");  // stderr is no terminal: no progress bar
  EXPECT_EQ(nlohmann::json::parse(r.out)["upload"], "stream");
  absl::StatusOr<client::NpyArray> y = client::ReadNpy(output);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape, array.shape);
  const std::vector<float> got = AsFloats(y->data);
  ASSERT_EQ(got.size(), x.size());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(got[i], x[i] < 0 ? 0.0f : x[i]) << i;
}

TEST_F(CliStream, StreamsSplitTheRunOverCallsAndGiveTheSameFile) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  // 6 MiB: several upload messages per call; softmax rows of 3 MiB split inside the row.
  const std::vector<float> x = RandomFloats(3 << 19, seed);
  client::NpyArray array{v1::DTYPE_FLOAT32, {2, 3 << 18}, AsBytes(x)};
  const std::string input = dir_ + "/x.npy";
  ASSERT_TRUE(client::WriteNpy(input, array).ok());
  std::vector<std::string> outputs;
  for (const char* streams : {"1", "3"}) {
    outputs.push_back(dir_ + "/y" + streams + ".npy");
    const CommandResult r =
        Gpupipe({"submit", "--input", input, "--ops", "affine(alpha=2)|softmax", "--stream",
                 "always", "--streams", streams, "--output", outputs.back()});
    ASSERT_EQ(r.exit_code, 0) << streams << r.err;
  }
  absl::StatusOr<client::NpyArray> one = client::ReadNpy(outputs[0]);
  absl::StatusOr<client::NpyArray> three = client::ReadNpy(outputs[1]);
  ASSERT_TRUE(one.ok() && three.ok());
  EXPECT_EQ(three->shape, array.shape);
  EXPECT_EQ(three->data, one->data);  // bit-identical

  for (const char* bad : {"0", "-1", "many", "257"}) {
    const CommandResult r =
        Gpupipe({"submit", "--input", input, "--ops", "relu", "--streams", bad});
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_NE(r.err.find("--streams: expected a number of calls from 1 to 256"), std::string::npos)
        << r.err;
  }
}

TEST_F(CliStream, StreamedInputsOverTheirLimitAreRefused) {
  // A header that promises 2 GiB: refused from the spec, before any byte is read or sent.
  const std::string input = dir_ + "/big.npy";
  // A sparse file of the full size, so the CLI's own header check passes.
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (536870912,), }";
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header.push_back('\n');
  std::FILE* f = std::fopen(input.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  const uint16_t len = static_cast<uint16_t>(header.size());
  std::fwrite("\x93NUMPY\x01\x00", 1, 8, f);
  std::fwrite(&len, 2, 1, f);
  std::fwrite(header.data(), 1, header.size(), f);
  std::fclose(f);
  ASSERT_EQ(truncate(input.c_str(), static_cast<off_t>(10 + header.size()) + (off_t{2} << 30)), 0);
  const CommandResult r = Gpupipe({"submit", "--input", input, "--ops", "relu"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("RESOURCE_EXHAUSTED"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("for streamed inputs"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace gpupipe::testing
