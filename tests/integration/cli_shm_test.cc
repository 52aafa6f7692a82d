// The CLI's shared-memory transport (--transport) against daemons on the CPU backend: the same
// result file as over the connection, auto's choice and fallback, and a daemon serving on a
// Unix socket.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "client/job_client.h"
#include "client/shared_memory.h"
#include "client/npy.h"
#include "nlohmann/json.hpp"
#include "tests/integration/binaries.h"
#include "tests/integration/process.h"
#include "tests/testing/random_tensor.h"

namespace gpupipe::testing {
namespace {

class CliShm : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    daemon_ = new DaemonProcess(DaemonBinary(), {"--backend", "cpu", "--quiet"});
    no_regions_ =
        new DaemonProcess(DaemonBinary(), {"--backend", "cpu", "--quiet", "--max-region-gib", "0"});
  }
  static void TearDownTestSuite() {
    delete daemon_;
    delete no_regions_;
  }
  void SetUp() override {
    ASSERT_NE(daemon_->port(), 0) << daemon_->error();
    ASSERT_NE(no_regions_->port(), 0) << no_regions_->error();
    char tmpl[] = "/tmp/gpupipe-cli-shm-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    EXPECT_TRUE(daemon_->alive()) << daemon_->log();
    std::system(("rm -rf " + dir_).c_str());
  }

  CommandResult Gpupipe(const std::string& target, std::vector<std::string> args) {
    args.insert(args.begin(), {CliBinary(), "--target", target});
    return RunCommand(args);
  }

  std::string WriteInput(int64_t rows, int64_t cols) {
    client::NpyArray array;
    array.dtype = v1::DTYPE_FLOAT32;
    array.shape = {rows, cols};
    array.data = AsBytes(RandomFloats(rows * cols, FreshSeed()));
    const std::string path = dir_ + "/x.npy";
    EXPECT_TRUE(client::WriteNpy(path, array).ok());
    return path;
  }

  static std::string Upload(const CommandResult& r) {
    const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    return j.is_object() && j.contains("upload") ? j["upload"].get<std::string>() : "?";
  }

  static std::string FileBytes(const std::string& path) {
    absl::StatusOr<client::NpyArray> a = client::ReadNpy(path);
    EXPECT_TRUE(a.ok()) << a.status();
    return a.ok() ? a->data : std::string();
  }

  static inline DaemonProcess* daemon_ = nullptr;
  static inline DaemonProcess* no_regions_ = nullptr;
  std::string dir_;
};

constexpr char kOps[] = "affine(alpha=2,beta=1) | relu | softmax";

TEST_F(CliShm, SharedMemoryGivesTheSameResultFileAsTheConnection) {
  const std::string x = WriteInput(64, 4096);  // 1 MiB
  for (const char* ops : {kOps, "sum", "cumsum", "topk(k=3)"}) {
    const CommandResult shm =
        Gpupipe(daemon_->target(), {"submit", "--input", x, "--ops", ops, "--transport", "shm",
                                    "--output", dir_ + "/shm.npy", "--json"});
    ASSERT_EQ(shm.exit_code, 0) << shm.err;
    EXPECT_EQ(Upload(shm), "shm") << shm.out;
    const CommandResult grpc =
        Gpupipe(daemon_->target(), {"submit", "--input", x, "--ops", ops, "--transport", "grpc",
                                    "--output", dir_ + "/grpc.npy", "--json"});
    ASSERT_EQ(grpc.exit_code, 0) << grpc.err;
    EXPECT_EQ(Upload(grpc), "inline");
    EXPECT_TRUE(FileBytes(dir_ + "/shm.npy") == FileBytes(dir_ + "/grpc.npy")) << ops;
  }
  // Nothing is left registered.
  auto client = client::JobClient::Create(daemon_->target());
  ASSERT_TRUE(client.ok());
  EXPECT_EQ((*client)->GetStats()->regions(), 0);
}

TEST_F(CliShm, AutoUsesSharedMemoryForLargeLocalInputsAndFallsBack) {
  const std::string big = WriteInput(64, 8192);  // 2 MiB
  const CommandResult local =
      Gpupipe(daemon_->target(), {"submit", "--input", big, "--ops", "relu", "--json"});
  ASSERT_EQ(local.exit_code, 0) << local.err;
  EXPECT_EQ(Upload(local), "shm");
  const std::string small = WriteInput(4, 8);
  const CommandResult tiny =
      Gpupipe(daemon_->target(), {"submit", "--input", small, "--ops", "relu", "--json"});
  ASSERT_EQ(tiny.exit_code, 0) << tiny.err;
  EXPECT_EQ(Upload(tiny), "inline");

  // A daemon with regions off: auto sends the bytes over the connection, shm says why not.
  const std::string big_again = WriteInput(64, 8192);
  const CommandResult fallback =
      Gpupipe(no_regions_->target(), {"submit", "--input", big_again, "--ops", "relu", "--json"});
  ASSERT_EQ(fallback.exit_code, 0) << fallback.err;
  EXPECT_EQ(Upload(fallback), "inline");
  const CommandResult refused =
      Gpupipe(no_regions_->target(),
              {"submit", "--input", big_again, "--ops", "relu", "--transport", "shm"});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("regions are off"), std::string::npos) << refused.err;
  EXPECT_TRUE(no_regions_->alive());
}

TEST_F(CliShm, AClientShrinkingItsRegionMidJobFailsTheJobNotTheDaemon) {
  // 16 MiB of input in 1 MiB chunks, each a long convolution: seconds of CPU, so the shrink
  // lands while most chunks are still to be read.
  const int64_t n = 4 << 20;
  auto shm = client::SharedMemory::Create(n * 4, "gpupipe-test");
  ASSERT_TRUE(shm.ok()) << shm.status();
  const std::vector<float> x = RandomFloats(n, FreshSeed());
  std::memcpy((*shm)->data(), x.data(), static_cast<size_t>(n * 4));
  auto client = client::JobClient::Create(daemon_->target());
  ASSERT_TRUE(client.ok());
  auto lease = (*client)->HoldRegions();
  ASSERT_TRUE(lease.ok()) << lease.status();
  auto region = (*client)->RegisterRegion((*shm)->name(), 0, (*lease)->id());
  ASSERT_TRUE(region.ok()) << region.status();
  v1::SubmitRequest request;
  request.mutable_input()->set_dtype(v1::DTYPE_FLOAT32);
  request.mutable_input()->add_shape(16);
  request.mutable_input()->add_shape(n / 16);
  request.mutable_input_region()->set_region_id(region->region_id());
  request.mutable_options()->set_chunk_bytes(1 << 20);
  v1::ConvolveOp* conv = request.add_ops()->mutable_convolve();
  for (int i = 0; i < 1023; ++i) conv->add_taps(0.001);
  conv->set_mode(v1::ConvolveOp::MODE_SAME);
  absl::StatusOr<client::JobResult> result;
  std::thread job([&] { result = (*client)->Submit(request); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const int fd = shm_open((*shm)->name().c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 0), 0);
  close(fd);
  job.join();
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition) << result.status();
  EXPECT_NE(result.status().message().find("input_region"), std::string::npos);
  EXPECT_TRUE(daemon_->alive()) << daemon_->log();
  // The daemon serves on, and the lease's end takes the region with it.
  const std::string small = WriteInput(4, 8);
  EXPECT_EQ(Gpupipe(daemon_->target(), {"submit", "--input", small, "--ops", "relu"}).exit_code, 0);
  lease->reset();
  int regions = 1;
  for (int i = 0; i < 200 && regions != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    regions = (*client)->GetStats()->regions();
  }
  EXPECT_EQ(regions, 0);
}

TEST_F(CliShm, BadTransportArgumentsAreUsageErrors) {
  const std::string x = WriteInput(4, 8);
  EXPECT_EQ(Gpupipe(daemon_->target(),
                    {"submit", "--input", x, "--ops", "relu", "--transport", "carrier-pigeon"})
                .exit_code,
            2);
  EXPECT_EQ(Gpupipe(daemon_->target(), {"submit", "--input", x, "--ops", "relu", "--transport",
                                        "shm", "--stream", "always"})
                .exit_code,
            2);
}

TEST_F(CliShm, ADaemonOnAUnixSocketServesTheCliThroughSharedMemory) {
  const std::string socket = dir_ + "/gpupipe.sock";
  const std::string target = "unix://" + socket;
  ChildProcess daemon(
      {DaemonBinary(), "--backend", "cpu", "--quiet", "--listen", target, "--metrics-listen", ""});
  auto client = client::JobClient::Create(target);
  ASSERT_TRUE(client.ok());
  absl::StatusOr<std::string> health;
  for (int i = 0; i < 300; ++i) {
    health = (*client)->Health();
    if (health.ok() && *health == "SERVING") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(health.ok() && *health == "SERVING") << health.status();
  const std::string x = WriteInput(64, 8192);
  const CommandResult r = Gpupipe(
      target, {"submit", "--input", x, "--ops", kOps, "--output", dir_ + "/y.npy", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Upload(r), "shm");
  const CommandResult over_tcp = Gpupipe(
      daemon_->target(), {"submit", "--input", x, "--ops", kOps, "--output", dir_ + "/z.npy"});
  ASSERT_EQ(over_tcp.exit_code, 0) << over_tcp.err;
  EXPECT_TRUE(FileBytes(dir_ + "/y.npy") == FileBytes(dir_ + "/z.npy"));
  daemon.Signal(SIGTERM);
  EXPECT_EQ(daemon.Wait(), 0);
}

}  // namespace
}  // namespace gpupipe::testing
