// A gpupiped on the CPU backend shared by a test suite, a scratch directory per test, and the
// gpupipe CLI pointed at the daemon.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "client/npy.h"
#include "tests/integration/binaries.h"
#include "tests/integration/process.h"
#include "tests/testing/random_tensor.h"

namespace gpupipe::testing {

class CliFixture : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { daemon_ = new DaemonProcess(DaemonBinary(), {"--backend", "cpu"}); }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(daemon_->port(), 0) << daemon_->error();
    char tmpl[] = "/tmp/gpupipe-cli-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  // Runs `gpupipe --target <daemon> args...`.
  CommandResult Gpupipe(std::vector<std::string> args) {
    args.insert(args.begin(), {CliBinary(), "--target", daemon_->target()});
    return RunCommand(args);
  }

  // Writes a float32 .npy into the test's directory and returns its path.
  std::string WriteInput(const std::vector<float>& x, std::vector<int64_t> shape) {
    client::NpyArray array;
    array.dtype = v1::DTYPE_FLOAT32;
    array.shape = std::move(shape);
    array.data = AsBytes(x);
    const std::string path = dir_ + "/x.npy";
    EXPECT_TRUE(client::WriteNpy(path, array).ok());
    return path;
  }

  static inline DaemonProcess* daemon_ = nullptr;
  std::string dir_;
};

}  // namespace gpupipe::testing
