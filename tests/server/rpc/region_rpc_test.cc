// Shared-memory regions through the RPC layer, in-process over a loopback port with the real
// client library: register, submit with regions, unregister; what a foreign client, a Run
// call and a bad request get; and what Describe and GetStats report.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "client/job_client.h"
#include "client/shared_memory.h"
#include "server/engine/backends/cpu/cpu_backend.h"
#include "server/rpc/job_service.h"
#include "tests/testing/random_tensor.h"

namespace gpupipe::rpc {
namespace {

using gpupipe::testing::AsBytes;
using gpupipe::testing::AsFloats;

class RegionRpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    engine::EngineOptions options;
    options.regions.max_client_regions = 3;
    engine_ = engine::Engine::Create(engine::CreateCpuBackend({}), options);
    service_ = std::make_unique<JobServiceImpl>(engine_.get(), JobServiceOptions{4, "test"});
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(port_, 0);
    client_ = Client("");
  }

  void TearDown() override {
    server_->Shutdown();
    engine_->Shutdown();
  }

  std::unique_ptr<client::JobClient> Client(const std::string& client_id) {
    client::ClientOptions options;
    options.client_id = client_id;
    auto c = client::JobClient::Create("127.0.0.1:" + std::to_string(port_), options);
    EXPECT_TRUE(c.ok());
    return c.ok() ? *std::move(c) : nullptr;
  }

  static std::unique_ptr<client::SharedMemory> Shm(int64_t bytes) {
    auto shm = client::SharedMemory::Create(bytes, "gpupipe-test");
    EXPECT_TRUE(shm.ok()) << shm.status();
    return shm.ok() ? *std::move(shm) : nullptr;
  }

  static v1::SubmitRequest Request(std::vector<int64_t> shape) {
    v1::SubmitRequest request;
    request.mutable_input()->set_dtype(v1::DTYPE_FLOAT32);
    for (int64_t d : shape) request.mutable_input()->add_shape(d);
    request.add_ops()->mutable_affine()->set_alpha(2);
    request.add_ops()->mutable_relu();
    return request;
  }

  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<JobServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<client::JobClient> client_;
  int port_ = 0;
};

TEST_F(RegionRpcTest, AJobReadsAndWritesRegionsAndTheStreamCarriesNoBytes) {
  const std::vector<float> x =
      gpupipe::testing::RandomFloats(3 << 18, gpupipe::testing::FreshSeed());  // 3 MiB
  auto in = Shm(static_cast<int64_t>(x.size() * 4));
  auto out = Shm(static_cast<int64_t>(x.size() * 4));
  std::memcpy(in->data(), x.data(), x.size() * 4);
  auto in_id = client_->RegisterRegion(in->name());
  auto out_id = client_->RegisterRegion(out->name());
  ASSERT_TRUE(in_id.ok() && out_id.ok()) << in_id.status() << out_id.status();
  EXPECT_EQ(in_id->size(), x.size() * 4);
  EXPECT_FALSE(in_id->pinned());  // the cpu backend page-locks nothing

  v1::SubmitRequest request = Request({3, 1 << 18});
  request.mutable_input_region()->set_region_id(in_id->region_id());
  request.mutable_output_region()->set_region_id(out_id->region_id());
  int chunks = 0;
  absl::StatusOr<client::JobResult> result =
      client_->Submit(request, [&](const v1::JobEvent& e) { chunks += e.has_chunk(); });
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(chunks, 0);
  EXPECT_TRUE(result->output_in_region);
  EXPECT_TRUE(result->output.data().empty());
  EXPECT_EQ(result->timing.bytes_in(), static_cast<int64_t>(x.size() * 4));
  std::vector<float> want = x;
  for (float& v : want) v = std::max(2 * v, 0.0f);
  EXPECT_EQ(std::string(out->data(), x.size() * 4), AsBytes(want));

  v1::StatsResponse stats = *client_->GetStats();
  EXPECT_EQ(stats.regions(), 2);
  bool pool = false;
  for (const v1::PoolStats& p : stats.pools()) {
    if (p.name() != "regions") continue;
    pool = true;
    EXPECT_EQ(p.used_bytes(), static_cast<int64_t>(2 * x.size() * 4));
  }
  EXPECT_TRUE(pool);
  EXPECT_TRUE(client_->UnregisterRegion(in_id->region_id()).ok());
  EXPECT_TRUE(client_->UnregisterRegion(out_id->region_id()).ok());
  EXPECT_EQ(client_->UnregisterRegion(out_id->region_id()).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->GetStats()->regions(), 0);
}

TEST_F(RegionRpcTest, RegionsHeldByALeaseGoWhenItsCallEnds) {
  auto shm = Shm(4096);
  absl::StatusOr<std::unique_ptr<client::RegionLease>> lease = client_->HoldRegions();
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_FALSE((*lease)->id().empty());
  auto leased = client_->RegisterRegion(shm->name(), 0, (*lease)->id());
  auto kept = client_->RegisterRegion(shm->name());
  ASSERT_TRUE(leased.ok() && kept.ok()) << leased.status() << kept.status();
  EXPECT_EQ(client_->GetStats()->regions(), 2);
  lease->reset();  // cancels the call, as a client that dies would end it
  int regions = 2;
  for (int i = 0; i < 200 && regions != 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    regions = client_->GetStats()->regions();
  }
  EXPECT_EQ(regions, 1);
  EXPECT_EQ(client_->UnregisterRegion(leased->region_id()).code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(client_->UnregisterRegion(kept->region_id()).ok());
  // A shutdown ends open leases instead of waiting for them.
  absl::StatusOr<std::unique_ptr<client::RegionLease>> open = client_->HoldRegions();
  ASSERT_TRUE(open.ok());
  service_->CloseLeases();
  EXPECT_EQ(client_->HoldRegions().status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(RegionRpcTest, AnotherClientCannotUseOrUnregisterARegion) {
  auto shm = Shm(128);
  std::memset(shm->data(), 0, 128);
  auto alice = Client("alice");
  auto mallory = Client("mallory");
  auto id = alice->RegisterRegion(shm->name());
  ASSERT_TRUE(id.ok()) << id.status();
  v1::SubmitRequest request = Request({4, 8});
  request.mutable_input_region()->set_region_id(id->region_id());
  absl::StatusOr<client::JobResult> stolen = mallory->Submit(request);
  EXPECT_EQ(stolen.status().code(), absl::StatusCode::kPermissionDenied) << stolen.status();
  EXPECT_EQ(mallory->UnregisterRegion(id->region_id()).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(alice->Submit(request).ok());
  EXPECT_TRUE(alice->UnregisterRegion(id->region_id()).ok());
}

TEST_F(RegionRpcTest, BadRequestsGetClearStatusesAndTheDaemonServesOn) {
  auto shm = Shm(128);
  EXPECT_EQ(client_->RegisterRegion("/gpupipe-test-missing").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->RegisterRegion("/a/b").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->RegisterRegion(shm->name(), 129).status().code(),
            absl::StatusCode::kInvalidArgument);
  // At most three regions per client here.
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(client_->RegisterRegion(shm->name())->region_id());
  absl::StatusOr<v1::RegisterRegionResponse> fourth = client_->RegisterRegion(shm->name());
  EXPECT_EQ(fourth.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(fourth.status().message().find("--max-client-regions"), std::string::npos);

  v1::SubmitRequest request = Request({4, 8});
  request.mutable_input_region()->set_region_id("");
  EXPECT_EQ(client_->Submit(request).status().code(), absl::StatusCode::kInvalidArgument);
  request.mutable_input_region()->set_region_id(ids[0]);
  request.mutable_input_region()->set_offset(uint64_t{1} << 63);
  EXPECT_EQ(client_->Submit(request).status().code(), absl::StatusCode::kInvalidArgument);

  // Run streams its bytes; regions are for Submit.
  v1::SubmitRequest spec = Request({4, 8});
  spec.mutable_output_region()->set_region_id(ids[0]);
  absl::StatusOr<client::JobResult> run = client_->Run(spec, 128, [](char* b, int64_t n) {
    std::memset(b, 0, static_cast<size_t>(n));
    return absl::OkStatus();
  });
  EXPECT_EQ(run.status().code(), absl::StatusCode::kInvalidArgument) << run.status();

  // A device region needs the cuda backend; a request names exactly one kind.
  absl::StatusOr<v1::RegisterRegionResponse> ipc =
      client_->RegisterCudaRegion(std::string(64, '\1'));
  EXPECT_EQ(ipc.status().code(), absl::StatusCode::kFailedPrecondition) << ipc.status();
  EXPECT_EQ(client_->RegisterRegion("").status().code(), absl::StatusCode::kInvalidArgument);

  v1::DescribeResponse d = *client_->Describe();
  EXPECT_EQ(d.limits().max_client_regions(), 3);
  EXPECT_GT(d.limits().max_region_bytes(), 0);
  EXPECT_GT(d.limits().region_idle_timeout_ms(), 0);
  for (const std::string& id : ids) EXPECT_TRUE(client_->UnregisterRegion(id).ok());
}

}  // namespace
}  // namespace gpupipe::rpc
