// End to end on the GPU: gpupiped --backend cuda, driven by the CLI, checked against the CPU
// reference on fresh random data. Skips where the daemon finds no usable device.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "client/npy.h"
#include "kernels/cpu/reference_ops.h"
#include "tests/integration/binaries.h"
#include "tests/integration/process.h"
#include "tests/testing/random_tensor.h"

namespace gpupipe::testing {
namespace {

TEST(CudaDaemon, CliSubmitMatchesTheCpuReference) {
  DaemonProcess daemon(DaemonBinary(), {"--backend", "cuda", "--max-input-mib", "64"});
  if (daemon.port() == 0) GTEST_SKIP() << "gpupiped --backend cuda did not start: " << daemon.error();
  char tmpl[] = "/tmp/gpupipe-cuda-test-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;

  const uint64_t seed = FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const int64_t rows = 300, cols = 5000;
  std::vector<float> x = RandomFloats(rows * cols, seed);
  client::NpyArray in{v1::DTYPE_FLOAT32, {rows, cols}, AsBytes(x)};
  ASSERT_TRUE(client::WriteNpy(dir + "/x.npy", in).ok());

  CommandResult r = RunCommand({CliBinary(), "--target", daemon.target(), "submit", "--input",
                                dir + "/x.npy", "--ops", "affine(alpha=2,beta=1) | relu | softmax",
                                "--output", dir + "/y.npy", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err << daemon.log();
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["backend"], "cuda");
  EXPECT_GE(j["timing"]["kernels"].get<int>(), 2) << "softmax is a PDL-chained pair";

  kernels::EwProgram program;
  program.Append({kernels::EwOpcode::kAffine, 2.0f, 1.0f});
  program.Append({kernels::EwOpcode::kRelu});
  std::vector<float> tmp(x.size()), want(x.size());
  kernels::cpu::Elementwise(x.data(), tmp.data(), rows * cols, program);
  kernels::cpu::RowSoftmax(tmp.data(), want.data(), rows, cols);
  absl::StatusOr<client::NpyArray> y = client::ReadNpy(dir + "/y.npy");
  ASSERT_TRUE(y.ok()) << y.status();
  std::vector<float> got = AsFloats(y->data);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-9f + 2e-4f * std::fabs(want[i])) << i;
  }
  std::printf("%s\n", r.out.c_str());
  EXPECT_EQ(daemon.Terminate(), 0);
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace gpupipe::testing
