// End to end on the GPU: gpupiped --backend cuda, driven by the CLI, checked against the CPU
// reference on fresh random data. Skips where the daemon finds no usable device.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "client/job_client.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "client/npy.h"
#include "kernels/cpu/reference_ops.h"
#include "tests/integration/binaries.h"
#include "tests/integration/process.h"
#include "tests/testing/random_tensor.h"

namespace gpupipe::testing {
namespace {

class CudaDaemon : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = std::make_unique<DaemonProcess>(
        DaemonBinary(), std::vector<std::string>{"--backend", "cuda", "--max-input-mib", "64",
                                                 "--streams-per-priority", "1"});
    if (daemon_->port() == 0) {
      GTEST_SKIP() << "gpupiped --backend cuda did not start: " << daemon_->error();
    }
    char tmpl[] = "/tmp/gpupipe-cuda-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (daemon_->port() != 0) EXPECT_EQ(daemon_->Terminate(), 0) << daemon_->log();
    if (!dir_.empty()) std::system(("rm -rf " + dir_).c_str());
  }

  // Submits `affine(alpha=2,beta=1) | relu | softmax` on rows x cols with the CLI and checks
  // the result against the CPU reference. Returns the CLI's JSON.
  nlohmann::json SubmitAndCheck(int64_t rows, int64_t cols, std::vector<std::string> extra) {
    const uint64_t seed = FreshSeed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::vector<float> x = RandomFloats(rows * cols, seed);
    client::NpyArray in{v1::DTYPE_FLOAT32, {rows, cols}, AsBytes(x)};
    EXPECT_TRUE(client::WriteNpy(dir_ + "/x.npy", in).ok());
    std::vector<std::string> args = {CliBinary(), "--target", daemon_->target(), "submit",
                                     "--input", dir_ + "/x.npy", "--ops",
                                     "affine(alpha=2,beta=1) | relu | softmax", "--output",
                                     dir_ + "/y.npy", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    CommandResult r = RunCommand(args);
    EXPECT_EQ(r.exit_code, 0) << r.err << daemon_->log();
    if (r.exit_code != 0) return {};

    kernels::EwProgram program;
    program.Append({kernels::EwOpcode::kAffine, 2.0f, 1.0f});
    program.Append({kernels::EwOpcode::kRelu});
    std::vector<float> tmp(x.size()), want(x.size());
    kernels::cpu::Elementwise(x.data(), tmp.data(), rows * cols, program);
    kernels::cpu::RowSoftmax(tmp.data(), want.data(), rows, cols);
    absl::StatusOr<client::NpyArray> y = client::ReadNpy(dir_ + "/y.npy");
    EXPECT_TRUE(y.ok()) << y.status();
    if (!y.ok()) return {};
    std::vector<float> got = AsFloats(y->data);
    EXPECT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
      if (!(std::fabs(got[i] - want[i]) <= 1e-9f + 2e-4f * std::fabs(want[i]))) {
        ADD_FAILURE() << "element " << i << ": " << got[i] << " vs " << want[i];
        break;
      }
    }
    std::printf("%s\n", r.out.c_str());
    return nlohmann::json::parse(r.out);
  }
  // Whether Describe lists `feature` among what the daemon's kernel code can use.
  bool DaemonHasFeature(const std::string& feature) {
    auto client = client::JobClient::Create(daemon_->target());
    if (!client.ok()) return false;
    absl::StatusOr<v1::DescribeResponse> d = (*client)->Describe();
    if (!d.ok()) {
      ADD_FAILURE() << d.status();
      return false;
    }
    const auto& features = d->device().features();
    return std::find(features.begin(), features.end(), feature) != features.end();
  }

  std::unique_ptr<DaemonProcess> daemon_;
  std::string dir_;
};

TEST_F(CudaDaemon, CliSubmitMatchesTheCpuReference) {
  nlohmann::json j = SubmitAndCheck(300, 5000, {});
  ASSERT_FALSE(j.is_null());
  EXPECT_EQ(j["backend"], "cuda");
  EXPECT_GE(j["timing"]["kernels"].get<int>(), 1);
}

TEST_F(CudaDaemon, LongRowSoftmaxIsAPdlChainedPair) {
  // Rows too long for one block's registers take the statistics + normalization kernels.
  nlohmann::json j = SubmitAndCheck(4, 300000, {"--launch", "pdl", "--explain"});
  ASSERT_FALSE(j.is_null());
  ASSERT_TRUE(j.contains("plan")) << j.dump();
  const auto& kernels = j["plan"]["kernels"];
  ASSERT_EQ(kernels.size(), 2u) << j.dump();
  EXPECT_EQ(kernels[0]["name"], "softmax.stats");
  EXPECT_EQ(kernels[1]["name"], "softmax.normalize");
  ASSERT_EQ(j["plan"]["edges"].size(), 1u);
  // A daemon whose kernel code lacks PDL (sm_80 code) chains them in stream order instead.
  EXPECT_EQ(j["plan"]["edges"][0]["kind"], DaemonHasFeature("pdl") ? "pdl" : "stream");
  EXPECT_EQ(j["timing"]["kernels"], 2);
}

TEST_F(CudaDaemon, DescribeSaysHowTheDaemonWaitsForTheDevice) {
  const auto wait_of = [](const DaemonProcess& daemon) -> std::string {
    auto client = client::JobClient::Create(daemon.target());
    if (!client.ok()) return client.status().ToString();
    absl::StatusOr<v1::DescribeResponse> d = (*client)->Describe();
    return d.ok() ? d->device().wait() : d.status().ToString();
  };
  EXPECT_EQ(wait_of(*daemon_), "auto");
  DaemonProcess blocking(DaemonBinary(), {"--backend", "cuda", "--cuda-wait", "block"});
  ASSERT_NE(blocking.port(), 0) << blocking.error();
  EXPECT_EQ(wait_of(blocking), "block");
  EXPECT_EQ(blocking.Terminate(), 0) << blocking.log();
}

TEST_F(CudaDaemon, GraphModeReplaysACachedGraph) {
  nlohmann::json first = SubmitAndCheck(64, 1000, {"--launch", "graph-pdl"});
  nlohmann::json second = SubmitAndCheck(64, 1000, {"--launch", "graph-pdl"});
  ASSERT_FALSE(first.is_null());
  ASSERT_FALSE(second.is_null());
  // One lane per priority: the second job meets the graph the first one left.
  EXPECT_EQ(first["timing"]["graph"], "miss");
  EXPECT_EQ(second["timing"]["graph"], "hit");
}

// A device fault on purpose (gpupiped --inject-device-fault, test builds only): the daemon's
// handling of device errors on the real GPU.
class CudaFault : public ::testing::Test {
 protected:
  // Starts the daemon with the fault `kind` at its `job`th job; false (and skips) without a GPU.
  bool Start(const std::string& kind, int job) {
    daemon_ = std::make_unique<DaemonProcess>(
        DaemonBinary(), std::vector<std::string>{"--backend", "cuda", "--streams-per-priority",
                                                 "1", "--inject-device-fault",
                                                 kind + ":" + std::to_string(job)});
    return daemon_->port() != 0;
  }
  CommandResult Health() {
    return RunCommand({CliBinary(), "--target", daemon_->target(), "--deadline", "5", "health"});
  }
  // A small relu job through the client library; its status.
  absl::Status Job() {
    auto client = client::JobClient::Create(daemon_->target());
    v1::SubmitRequest r;
    r.mutable_input()->set_dtype(v1::DTYPE_FLOAT32);
    r.mutable_input()->add_shape(4);
    r.mutable_input()->set_data(AsBytes(std::vector<float>{-1, 2, -3, 4}));
    r.add_ops()->mutable_relu();
    absl::StatusOr<client::JobResult> got = (*client)->Submit(r);
    if (got.ok() && AsFloats(got->output.data()) != std::vector<float>{0, 2, 0, 4}) {
      return absl::InternalError("wrong result");
    }
    return got.status();
  }
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(CudaFault, ALaunchErrorFailsOnlyItsJob) {
  if (!Start("launch", 2)) GTEST_SKIP() << "no usable GPU: " << daemon_->error();
  EXPECT_TRUE(Job().ok());
  const absl::Status failed = Job();
  EXPECT_EQ(failed.code(), absl::StatusCode::kInternal) << failed;
  // The message names the CUDA error (which one depends on the CUDA version; fault_injection.h).
  EXPECT_NE(failed.message().find("launching the injected fault: cudaErrorInvalid"),
            std::string::npos)
      << failed;
  EXPECT_TRUE(Job().ok()) << "the next job";
  EXPECT_EQ(Health().exit_code, 0);
  EXPECT_EQ(daemon_->Terminate(), 0) << daemon_->log();
}

TEST_F(CudaFault, AStickyErrorTurnsHealthNotServingAndTheDaemonExitsNonZero) {
  if (!Start("sticky", 2)) GTEST_SKIP() << "no usable GPU: " << daemon_->error();
  EXPECT_TRUE(Job().ok());
  EXPECT_EQ(Health().out, "SERVING\n");
  // A health Watch from before the fault sees the daemon turn NOT_SERVING.
  auto channel = grpc::CreateChannel(daemon_->target(), grpc::InsecureChannelCredentials());
  std::vector<int> seen;
  grpc::ClientContext watch_context;
  std::thread watcher([&] {
    auto reader = grpc::health::v1::Health::NewStub(channel)->Watch(
        &watch_context, grpc::health::v1::HealthCheckRequest());
    grpc::health::v1::HealthCheckResponse response;
    while (reader->Read(&response)) seen.push_back(response.status());
    reader->Finish();
  });
  const absl::Status failed = Job();
  EXPECT_FALSE(failed.ok());
  EXPECT_NE(failed.message().find("cudaErrorIllegalAddress"), std::string::npos) << failed;
  // The daemon stops by itself, with exit code 3, so that a supervisor restarts it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (daemon_->alive() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_FALSE(daemon_->alive()) << daemon_->log();
  EXPECT_EQ(daemon_->Terminate(), 3) << daemon_->log();
  watch_context.TryCancel();
  watcher.join();
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.front(), grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_EQ(seen.back(), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  EXPECT_NE(daemon_->log().find("the GPU failed for good"), std::string::npos) << daemon_->log();
}

}  // namespace
}  // namespace gpupipe::testing
