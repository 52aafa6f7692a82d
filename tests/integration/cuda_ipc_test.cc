// CUDA IPC regions end to end: this test is the client process. It allocates device buffers,
// exports them with cudaIpcGetMemHandle, registers them with gpupiped --backend cuda (another
// process, as IPC requires), and runs jobs whose input and output stay on the device. Results
// are read back and checked against the same jobs on a CPU daemon, on fresh random data.
// Skips where no CUDA device or no cuda daemon is usable.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "client/job_client.h"
#include "tests/integration/binaries.h"
#include "tests/integration/process.h"
#include "tests/testing/random_tensor.h"

namespace gpupipe::testing {
namespace {

// A device buffer of this process, exported for IPC.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(int64_t bytes) : bytes_(bytes) {
    if (cudaMalloc(&ptr_, static_cast<size_t>(bytes)) != cudaSuccess) {
      ptr_ = nullptr;
      return;
    }
    cudaIpcMemHandle_t h{};
    if (cudaIpcGetMemHandle(&h, ptr_) == cudaSuccess) {
      handle_.assign(reinterpret_cast<const char*>(&h), sizeof(h));
    }
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  bool ok() const { return ptr_ != nullptr && !handle_.empty(); }
  const std::string& handle() const { return handle_; }
  char* data() const { return static_cast<char*>(ptr_); }
  void Upload(const std::string& bytes, int64_t offset = 0) const {
    ASSERT_EQ(cudaMemcpy(data() + offset, bytes.data(), bytes.size(), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  std::string Download(int64_t bytes, int64_t offset = 0) const {
    std::string out(static_cast<size_t>(bytes), '\0');
    EXPECT_EQ(cudaMemcpy(out.data(), data() + offset, out.size(), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return out;
  }

 private:
  void* ptr_ = nullptr;
  int64_t bytes_;
  std::string handle_;
};

class CudaIpc : public ::testing::Test {
 protected:
  void SetUp() override {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      GTEST_SKIP() << "no CUDA device in this process";
    }
    // 1 MiB chunks: the 4 MiB rows below are split across chunks.
    gpu_ = std::make_unique<DaemonProcess>(
        DaemonBinary(), std::vector<std::string>{"--backend", "cuda", "--chunk-mib", "1", "--quiet",
                                                 "--max-input-mib", "64"});
    if (gpu_->port() == 0) GTEST_SKIP() << "no cuda daemon: " << gpu_->error();
    cpu_ = std::make_unique<DaemonProcess>(
        DaemonBinary(),
        std::vector<std::string>{"--backend", "cpu", "--quiet", "--max-input-mib", "64"});
    ASSERT_NE(cpu_->port(), 0) << cpu_->error();
    gpu_client_ = *client::JobClient::Create(gpu_->target());
    cpu_client_ = *client::JobClient::Create(cpu_->target());
  }

  static v1::SubmitRequest Request(std::vector<int64_t> shape, const std::string& ops_pb) {
    v1::SubmitRequest r;
    r.mutable_input()->set_dtype(v1::DTYPE_FLOAT32);
    for (int64_t d : shape) r.mutable_input()->add_shape(d);
    if (ops_pb == "affine|relu") {
      r.add_ops()->mutable_affine()->set_alpha(2);
      r.mutable_ops(0)->mutable_affine()->set_beta(1);
      r.add_ops()->mutable_relu();
    } else if (ops_pb == "softmax") {
      r.add_ops()->mutable_softmax();
    } else if (ops_pb == "sum") {
      r.add_ops()->mutable_sum();
    } else if (ops_pb == "cumsum") {
      r.add_ops()->mutable_cumsum();
    }
    return r;
  }

  // The CPU daemon's result for `request` on `input`.
  std::string Reference(v1::SubmitRequest request, const std::string& input) {
    request.mutable_input()->set_data(input);
    absl::StatusOr<client::JobResult> r = cpu_client_->Submit(request);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->output.data() : std::string();
  }

  std::unique_ptr<DaemonProcess> gpu_, cpu_;
  std::unique_ptr<client::JobClient> gpu_client_, cpu_client_;
};

// Within the float32 rounding of a row's reduction against the CPU's wider accumulation.
void ExpectClose(const std::string& got, const std::string& want, bool exact, int64_t reduced) {
  const std::vector<float> g = AsFloats(got), w = AsFloats(want);
  ASSERT_EQ(g.size(), w.size());
  for (size_t i = 0; i < g.size(); ++i) {
    const float tol = exact ? 0.0f
                            : 2e-4f * std::fabs(w[i]) + 1e-6f +
                                  1e-5f * std::sqrt(static_cast<float>(reduced)) * 8;
    ASSERT_LE(std::fabs(g[i] - w[i]), tol) << "element " << i << ": " << g[i] << " vs " << w[i];
  }
}

TEST_F(CudaIpc, JobsRunOnDeviceBuffersOfAnotherProcessWithNoHostCopy) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  struct Case {
    std::vector<int64_t> shape;
    const char* ops;
    bool exact;
    int64_t reduced;
  };
  // Whole-row chunks (copied device to device both ways) and 4 MiB rows split across 1 MiB
  // chunks (sum: input read back for the split combine; cumsum: pieces written into the output
  // region from the host).
  const Case cases[] = {{{64, 65536}, "affine|relu", true, 1},
                        {{64, 65536}, "softmax", false, 65536},
                        {{64, 65536}, "sum", false, 65536},
                        {{3, 1 << 20}, "sum", false, 1 << 20},
                        {{2, 1 << 20}, "cumsum", false, 1 << 20}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.ops);
    int64_t n = 1;
    for (int64_t d : c.shape) n *= d;
    const std::string input = AsBytes(RandomFloats(n, seed + n));
    const std::string want = Reference(Request(c.shape, c.ops), input);
    DeviceBuffer in(n * 4 + 4096), out(static_cast<int64_t>(want.size()) + 4096);
    ASSERT_TRUE(in.ok() && out.ok());
    in.Upload(input, 256);
    auto in_region = gpu_client_->RegisterCudaRegion(in.handle());
    auto out_region = gpu_client_->RegisterCudaRegion(out.handle());
    ASSERT_TRUE(in_region.ok()) << in_region.status();
    ASSERT_TRUE(out_region.ok()) << out_region.status();
    EXPECT_TRUE(in_region->device());
    EXPECT_EQ(in_region->size(), static_cast<uint64_t>(n * 4 + 4096));

    v1::SubmitRequest request = Request(c.shape, c.ops);
    request.mutable_input_region()->set_region_id(in_region->region_id());
    request.mutable_input_region()->set_offset(256);
    request.mutable_output_region()->set_region_id(out_region->region_id());
    request.mutable_output_region()->set_offset(512);
    absl::StatusOr<client::JobResult> r = gpu_client_->Submit(request);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->accepted.backend(), "cuda");
    EXPECT_EQ(r->timing.bytes_in(), n * 4);
    ExpectClose(out.Download(static_cast<int64_t>(want.size()), 512), want, c.exact, c.reduced);

    // Device input, result streamed back; and inline input, device output.
    v1::SubmitRequest streamed = Request(c.shape, c.ops);
    *streamed.mutable_input_region() = request.input_region();
    absl::StatusOr<client::JobResult> s = gpu_client_->Submit(streamed);
    ASSERT_TRUE(s.ok()) << s.status();
    ExpectClose(s->output.data(), want, c.exact, c.reduced);
    if (n * 4 <= (int64_t{32} << 20)) {
      v1::SubmitRequest inline_in = Request(c.shape, c.ops);
      inline_in.mutable_input()->set_data(input);
      *inline_in.mutable_output_region() = request.output_region();
      ASSERT_EQ(cudaMemset(out.data(), 0, want.size() + 512), cudaSuccess);
      // The clear is asynchronous to this process: it must be done before the daemon writes.
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      ASSERT_TRUE(gpu_client_->Submit(inline_in).ok());
      ExpectClose(out.Download(static_cast<int64_t>(want.size()), 512), want, c.exact, c.reduced);
    }
    EXPECT_TRUE(gpu_client_->UnregisterRegion(in_region->region_id()).ok());
    EXPECT_TRUE(gpu_client_->UnregisterRegion(out_region->region_id()).ok());
  }
  EXPECT_EQ(gpu_client_->GetStats()->regions(), 0);
}

TEST_F(CudaIpc, BadHandlesAndSlicesGetClearErrorsAndTheDaemonServesOn) {
  absl::StatusOr<v1::RegisterRegionResponse> zeros =
      gpu_client_->RegisterCudaRegion(std::string(64, '\0'));
  EXPECT_EQ(zeros.status().code(), absl::StatusCode::kInvalidArgument) << zeros.status();
  EXPECT_EQ(gpu_client_->RegisterCudaRegion("short").status().code(),
            absl::StatusCode::kInvalidArgument);
  DeviceBuffer buffer(1 << 20);
  ASSERT_TRUE(buffer.ok());
  absl::StatusOr<v1::RegisterRegionResponse> too_big =
      gpu_client_->RegisterCudaRegion(buffer.handle(), (1 << 20) + (4 << 20));
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kInvalidArgument) << too_big.status();
  auto region = gpu_client_->RegisterCudaRegion(buffer.handle(), 4096);
  ASSERT_TRUE(region.ok()) << region.status();
  v1::SubmitRequest request = Request({2, 1024}, "affine|relu");  // 8 KiB: past 4096
  request.mutable_input_region()->set_region_id(region->region_id());
  EXPECT_EQ(gpu_client_->Submit(request).status().code(), absl::StatusCode::kInvalidArgument);
  // The CPU daemon has no device for it.
  EXPECT_EQ(cpu_client_->RegisterCudaRegion(buffer.handle()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(gpu_client_->UnregisterRegion(region->region_id()).ok());
  EXPECT_TRUE(gpu_->alive());
  EXPECT_TRUE(gpu_client_->Health().ok());
}

}  // namespace
}  // namespace gpupipe::testing
