// Regions from descriptors (a memfd passed over gpupiped --region-fd-socket) against a daemon on
// the CPU backend: the job's bytes are those of the inline path, tickets are good once, a
// descriptor that is no shared-memory object is refused by name, and a daemon without the
// socket says so.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "client/fd_passing.h"
#include "client/job_client.h"
#include "tests/integration/binaries.h"
#include "tests/integration/process.h"
#include "tests/testing/random_tensor.h"

namespace gpupipe::testing {
namespace {

// A memfd of `bytes`, mapped here (unless empty).
struct Memfd {
  explicit Memfd(size_t bytes) : size(bytes) {
    fd = memfd_create("gpupipe-test", MFD_CLOEXEC);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(bytes)), 0);
    if (bytes == 0) return;
    data = static_cast<char*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    EXPECT_NE(data, MAP_FAILED);
  }
  ~Memfd() {
    if (data != nullptr) munmap(data, size);
    close(fd);
  }
  int fd = -1;
  size_t size = 0;
  char* data = nullptr;
};

class FdRegion : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/gpupipe-fd-region-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = new std::string(tmpl);
    daemon_ = new DaemonProcess(DaemonBinary(), {"--backend", "cpu", "--quiet",
                                                 "--region-fd-socket", *dir_ + "/regions.sock"});
  }
  static void TearDownTestSuite() {
    delete daemon_;
    std::system(("rm -rf " + *dir_).c_str());
    delete dir_;
  }
  void SetUp() override {
    ASSERT_NE(daemon_->port(), 0) << daemon_->error();
    absl::StatusOr<std::unique_ptr<client::JobClient>> c =
        client::JobClient::Create(daemon_->target());
    ASSERT_TRUE(c.ok());
    client_ = *std::move(c);
  }
  void TearDown() override { EXPECT_TRUE(daemon_->alive()) << daemon_->log(); }

  static inline DaemonProcess* daemon_ = nullptr;
  static inline std::string* dir_ = nullptr;
  std::unique_ptr<client::JobClient> client_;
};

TEST_F(FdRegion, AMemfdRegionGivesTheBytesOfTheInlinePath) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const int64_t rows = 64, cols = 1000;
  const std::vector<float> x = RandomFloats(rows * cols, seed);
  const size_t bytes = x.size() * sizeof(float);
  Memfd in(bytes), out(bytes);
  std::memcpy(in.data, x.data(), bytes);

  absl::StatusOr<v1::DescribeResponse> d = client_->Describe();
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->region_fd_socket(), *dir_ + "/regions.sock");
  absl::StatusOr<v1::RegisterRegionResponse> rin = client_->RegisterRegionFd(in.fd);
  ASSERT_TRUE(rin.ok()) << rin.status();
  EXPECT_EQ(rin->size(), bytes);
  absl::StatusOr<v1::RegisterRegionResponse> rout = client_->RegisterRegionFd(out.fd, bytes);
  ASSERT_TRUE(rout.ok()) << rout.status();

  v1::SubmitRequest request;
  request.mutable_input()->set_dtype(v1::DTYPE_FLOAT32);
  request.mutable_input()->add_shape(rows);
  request.mutable_input()->add_shape(cols);
  request.add_ops()->mutable_softmax();
  v1::SubmitRequest inline_request = request;
  inline_request.mutable_input()->set_data(AsBytes(x));
  absl::StatusOr<client::JobResult> want = client_->Submit(inline_request);
  ASSERT_TRUE(want.ok()) << want.status();

  request.mutable_input_region()->set_region_id(rin->region_id());
  request.mutable_input_region()->set_length(bytes);
  request.mutable_output_region()->set_region_id(rout->region_id());
  request.mutable_output_region()->set_length(bytes);
  absl::StatusOr<client::JobResult> got = client_->Submit(request);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(got->output_in_region);
  EXPECT_EQ(std::string(out.data, bytes), want->output.data());  // bit-identical
  EXPECT_TRUE(client_->UnregisterRegion(rin->region_id()).ok());
  EXPECT_TRUE(client_->UnregisterRegion(rout->region_id()).ok());
}

TEST_F(FdRegion, TicketsAreGoodOnceAndOnlyForSharedMemory) {
  Memfd m(4096);
  absl::StatusOr<std::string> ticket = client::PassDescriptor(*dir_ + "/regions.sock", m.fd);
  ASSERT_TRUE(ticket.ok()) << ticket.status();
  std::unique_ptr<v1::JobService::Stub> stub = v1::JobService::NewStub(
      grpc::CreateChannel(daemon_->target(), grpc::InsecureChannelCredentials()));
  const auto register_ticket = [&](const std::string& t) {
    grpc::ClientContext context;
    v1::RegisterRegionRequest request;
    request.set_fd_ticket(t);
    v1::RegisterRegionResponse response;
    return stub->RegisterRegion(&context, request, &response);
  };
  EXPECT_TRUE(register_ticket(*ticket).ok());
  const grpc::Status again = register_ticket(*ticket);
  EXPECT_EQ(again.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(again.error_message().find("fd_ticket: no descriptor waits under this ticket"),
            std::string::npos)
      << again.error_message();

  // A pipe is no shared-memory object: refused at the socket already.
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  absl::StatusOr<v1::RegisterRegionResponse> piped = client_->RegisterRegionFd(pipe_fds[0]);
  EXPECT_EQ(piped.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(piped.status().message().find("the descriptor is not a shared-memory object"),
            std::string::npos)
      << piped.status();
  // Read-only: jobs could not write results into it.
  const std::string proc = "/proc/self/fd/" + std::to_string(m.fd);
  const int read_only = open(proc.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(read_only, 0);
  absl::StatusOr<v1::RegisterRegionResponse> ro = client_->RegisterRegionFd(read_only);
  EXPECT_EQ(ro.status().code(), absl::StatusCode::kPermissionDenied) << ro.status();
  EXPECT_NE(ro.status().message().find("cannot be mapped for reading and writing"),
            std::string::npos)
      << ro.status();
  close(read_only);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  // An empty memfd has nothing to map.
  Memfd empty(0);
  EXPECT_EQ(client_->RegisterRegionFd(empty.fd).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(FdRegion, ADaemonWithoutTheSocketSaysSo) {
  DaemonProcess plain(DaemonBinary(), {"--backend", "cpu", "--quiet"});
  ASSERT_NE(plain.port(), 0) << plain.error();
  absl::StatusOr<std::unique_ptr<client::JobClient>> c = client::JobClient::Create(plain.target());
  ASSERT_TRUE(c.ok());
  Memfd m(4096);
  absl::StatusOr<v1::RegisterRegionResponse> r = (*c)->RegisterRegionFd(m.fd);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("--region-fd-socket"), std::string::npos) << r.status();
  // A ticket from elsewhere: the daemon has no socket for it.
  grpc::ClientContext context;
  v1::RegisterRegionRequest request;
  request.set_fd_ticket("0123456789abcdef0123456789abcdef");
  v1::RegisterRegionResponse response;
  const grpc::Status s =
      v1::JobService::NewStub(
          grpc::CreateChannel(plain.target(), grpc::InsecureChannelCredentials()))
          ->RegisterRegion(&context, request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

}  // namespace
}  // namespace gpupipe::testing
