// The region registry: opening objects, ownership, limits, unregistering while a job holds a
// region, and dropping idle regions.
#include "server/engine/regions/region_registry.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <thread>
#include <vector>

#include "client/shared_memory.h"

namespace gpupipe::engine {
namespace {

using client::SharedMemory;

std::unique_ptr<SharedMemory> Object(int64_t bytes) {
  absl::StatusOr<std::unique_ptr<SharedMemory>> shm = SharedMemory::Create(bytes, "gpupipe-test");
  EXPECT_TRUE(shm.ok()) << shm.status();
  return shm.ok() ? *std::move(shm) : nullptr;
}

TEST(RegionRegistry, RegistersAnObjectAndFindsItForItsClientOnly) {
  RegionRegistry registry({}, {});
  auto shm = Object(4096);
  std::memcpy(shm->data(), "hello", 5);
  absl::StatusOr<RegionInfo> info = registry.Register("alice", shm->name(), 0);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->size, 4096);
  EXPECT_FALSE(info->pinned);
  EXPECT_EQ(info->id.size(), 2u + 32u);
  EXPECT_EQ(registry.mapped_bytes(), 4096);

  absl::StatusOr<std::shared_ptr<Region>> mine = registry.Find("alice", info->id, "f");
  ASSERT_TRUE(mine.ok()) << mine.status();
  EXPECT_EQ(std::string((*mine)->data(), 5), "hello");  // the same pages

  absl::StatusOr<std::shared_ptr<Region>> theirs = registry.Find("bob", info->id, "f");
  EXPECT_EQ(theirs.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(registry.Unregister("bob", info->id).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(registry.Find("alice", "r-nope", "input_region.region_id").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(RegionRegistry, BadNamesAndSizesAreRefusedClearly) {
  RegionRegistry registry({}, {});
  auto shm = Object(1000);
  EXPECT_EQ(registry.Register("c", "/gpupipe-test-no-such-object", 0).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(registry.Register("c", "", 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.Register("c", "/a/b", 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.Register("c", "/..", 0).status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<RegionInfo> too_big = registry.Register("c", shm->name(), 1001);
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(too_big.status().message().find("fewer than the 1001"), std::string::npos)
      << too_big.status();
  // Without the leading slash too, and a prefix of the object.
  absl::StatusOr<RegionInfo> part = registry.Register("c", shm->name().substr(1), 100);
  ASSERT_TRUE(part.ok()) << part.status();
  EXPECT_EQ(part->size, 100);
  EXPECT_EQ(registry.mapped_bytes(), 4096);  // what the mapping takes: whole pages
}

TEST(RegionRegistry, RangeChecksNameTheField) {
  RegionRegistry registry({}, {});
  auto shm = Object(100);
  absl::StatusOr<RegionInfo> info = registry.Register("c", shm->name(), 0);
  ASSERT_TRUE(info.ok());
  std::shared_ptr<Region> region = *registry.Find("c", info->id, "f");
  EXPECT_TRUE(region->CheckRange(0, 100, "input_region").ok());
  EXPECT_TRUE(region->CheckRange(100, 0, "input_region").ok());
  absl::Status past = region->CheckRange(60, 41, "input_region");
  EXPECT_EQ(past.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(past.message().find("input_region: 41 bytes at offset 60"), std::string::npos) << past;
  EXPECT_FALSE(region->CheckRange(std::numeric_limits<int64_t>::max(), 2, "x").ok());
  EXPECT_FALSE(region->CheckRange(-1, 2, "x").ok());
}

TEST(RegionRegistry, EveryLimitIsEnforcedAndNamesItsFlag) {
  constexpr int64_t kPage = 4096;
  RegionLimits limits;
  limits.max_bytes = 10 * kPage;
  limits.max_client_bytes = 7 * kPage;
  limits.max_client_regions = 2;
  RegionRegistry registry(limits, {});
  auto a = Object(5 * kPage), b = Object(3 * kPage), c = Object(100), d = Object(4 * kPage);
  ASSERT_TRUE(registry.Register("alice", a->name(), 0).ok());
  absl::StatusOr<RegionInfo> over_client = registry.Register("alice", b->name(), 0);
  EXPECT_EQ(over_client.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(over_client.status().message().find("--max-client-region-gib"), std::string::npos);
  ASSERT_TRUE(registry.Register("alice", c->name(), 0).ok());  // 100 bytes take a page
  absl::StatusOr<RegionInfo> over_count = registry.Register("alice", c->name(), 0);
  EXPECT_EQ(over_count.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(over_count.status().message().find("--max-client-regions"), std::string::npos);
  ASSERT_TRUE(registry.Register("bob", d->name(), 0).ok());
  absl::StatusOr<RegionInfo> over_total = registry.Register("carol", d->name(), 0);
  EXPECT_EQ(over_total.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(over_total.status().message().find("--max-region-gib"), std::string::npos);
  EXPECT_EQ(registry.mapped_bytes(), 10 * kPage);
  // A region larger than a limit itself is told so: no unregistering would make room.
  auto huge = Object(8 * kPage);
  absl::StatusOr<RegionInfo> never = registry.Register("dave", huge->name(), 0);
  EXPECT_EQ(never.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(never.status().message().find("over the"), std::string::npos) << never.status();
  EXPECT_NE(never.status().message().find("--max-client-region-gib"), std::string::npos)
      << never.status();
  EXPECT_EQ(never.status().message().find("unregister"), std::string::npos) << never.status();

  // However many client ids a caller takes, the server's count of regions bounds them.
  RegionLimits few;
  few.max_regions = 2;
  RegionRegistry small(few, {});
  ASSERT_TRUE(small.Register("id-1", c->name(), 0).ok());
  ASSERT_TRUE(small.Register("id-2", c->name(), 0).ok());
  absl::StatusOr<RegionInfo> third = small.Register("id-3", c->name(), 0);
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(third.status().message().find("--max-regions"), std::string::npos);

  RegionLimits off;
  off.max_bytes = 0;
  EXPECT_EQ(RegionRegistry(off, {}).Register("x", a->name(), 0).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST(RegionRegistry, ObjectsOfAnotherUserAreRefusedUnlessAnyOwnerIsAllowed) {
  auto shm = Object(4096);
  // The object changes hands, as another user's object would be.
  ASSERT_EQ(chown(("/dev/shm" + shm->name()).c_str(), 4242, 4242), 0);
  RegionRegistry strict({}, {});
  absl::StatusOr<RegionInfo> refused = strict.Register("c", shm->name(), 0);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(refused.status().message().find("uid 4242"), std::string::npos) << refused.status();
  EXPECT_EQ(strict.mapped_bytes(), 0);
  RegionLimits trusting;
  trusting.any_owner = true;
  RegionRegistry any(trusting, {});
  EXPECT_TRUE(any.Register("c", shm->name(), 0).ok());
}

TEST(RegionRegistry, AnUnregisteredRegionStaysMappedWhileAJobHoldsIt) {
  RegionRegistry registry({}, {});
  auto shm = Object(8192);
  absl::StatusOr<RegionInfo> info = registry.Register("c", shm->name(), 0);
  ASSERT_TRUE(info.ok());
  std::shared_ptr<Region> held = *registry.Find("c", info->id, "f");
  ASSERT_TRUE(registry.Unregister("c", info->id).ok());
  EXPECT_EQ(registry.registered(), 0);
  EXPECT_EQ(registry.Find("c", info->id, "f").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(registry.mapped_bytes(), 8192);  // still counted: the job's mapping
  held->data()[8191] = 1;                    // and still valid
  held.reset();
  EXPECT_EQ(registry.mapped_bytes(), 0);
  EXPECT_EQ(registry.Unregister("c", info->id).code(), absl::StatusCode::kNotFound);
}

TEST(RegionRegistry, IdleRegionsAreDroppedButNotWhileInUse) {
  RegionLimits limits;
  limits.idle_timeout = std::chrono::milliseconds(50);
  RegionRegistry registry(limits, {});
  auto a = Object(100), b = Object(100);
  absl::StatusOr<RegionInfo> idle = registry.Register("c", a->name(), 0);
  absl::StatusOr<RegionInfo> busy = registry.Register("c", b->name(), 0);
  ASSERT_TRUE(idle.ok() && busy.ok());
  std::shared_ptr<Region> held = *registry.Find("c", busy->id, "f");
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  EXPECT_EQ(registry.Find("c", idle->id, "f").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(registry.Find("c", busy->id, "f").ok());
  EXPECT_EQ(registry.registered(), 1);
}

TEST(RegionRegistry, PinsAtRegistrationAndUnpinsAtTheEnd) {
  int pinned = 0;
  int unpinned = 0;
  RegionHooks hooks;
  hooks.pin = [&](char*, int64_t bytes) -> absl::StatusOr<HostPin> {
    pinned += static_cast<int>(bytes);
    return HostPin{true, [&, bytes] { unpinned += static_cast<int>(bytes); }};
  };
  RegionRegistry registry({}, hooks);
  auto shm = Object(300);
  absl::StatusOr<RegionInfo> info = registry.Register("c", shm->name(), 0);
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->pinned);
  EXPECT_EQ(pinned, 300);
  ASSERT_TRUE(registry.Unregister("c", info->id).ok());
  EXPECT_EQ(unpinned, 300);

  RegionHooks failing_hooks;
  failing_hooks.pin = [](char*, int64_t) -> absl::StatusOr<HostPin> {
    return absl::ResourceExhaustedError("cannot page-lock");
  };
  RegionRegistry failing({}, failing_hooks);
  EXPECT_EQ(failing.Register("c", shm->name(), 0).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(failing.mapped_bytes(), 0);
}

TEST(RegionRegistry, ALeaseEndsItsRegionsAndOnlyItsOwnersCanUseIt) {
  RegionRegistry registry({}, {});
  auto a = Object(100), b = Object(100);
  absl::StatusOr<std::string> lease = registry.OpenLease("alice");
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(registry.Register("mallory", a->name(), 0, *lease).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(registry.Register("alice", a->name(), 0, "l-none").status().code(),
            absl::StatusCode::kNotFound);
  absl::StatusOr<RegionInfo> leased = registry.Register("alice", a->name(), 0, *lease);
  absl::StatusOr<RegionInfo> kept = registry.Register("alice", b->name(), 0);
  ASSERT_TRUE(leased.ok() && kept.ok());
  std::shared_ptr<Region> held = *registry.Find("alice", leased->id, "f");
  registry.EndLease(*lease);
  EXPECT_EQ(registry.Find("alice", leased->id, "f").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(registry.Find("alice", kept->id, "f").ok());
  EXPECT_EQ(registry.mapped_bytes(), 8192);  // the job's region stays mapped until it ends
  held.reset();
  EXPECT_EQ(registry.mapped_bytes(), 4096);
  EXPECT_EQ(registry.Register("alice", a->name(), 0, *lease).status().code(),
            absl::StatusCode::kNotFound);  // an ended lease takes no more regions
  registry.EndLease(*lease);               // ending it again does nothing
}

TEST(RegionRegistry, DeviceRegionsNeedADeviceAndCountAgainstTheLimits) {
  RegionRegistry cpu({}, {});
  absl::StatusOr<RegionInfo> refused = cpu.RegisterCudaIpc("c", std::string(64, '\0'), 0);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("cuda backend"), std::string::npos);

  // A device the test fakes: an "allocation" of host bytes, copied with memcpy.
  std::vector<char> allocation(1000, 7);
  int closed = 0;
  RegionHooks hooks;
  hooks.open_cuda_ipc = [&](const std::string& handle) -> absl::StatusOr<DeviceMapping> {
    if (handle != "h") return absl::InvalidArgumentError("cuda_ipc_handle: bad");
    return DeviceMapping{allocation.data(), 1000, [&] { ++closed; }};
  };
  hooks.device_copy = [](char* to, const char* from, int64_t n) {
    std::memcpy(to, from, static_cast<size_t>(n));
    return absl::OkStatus();
  };
  RegionLimits limits;
  limits.max_client_bytes = 6000;  // one allocation of 1000 bytes (a page), not two
  RegionRegistry registry(limits, hooks);
  EXPECT_EQ(registry.RegisterCudaIpc("c", "x", 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.RegisterCudaIpc("c", "h", 1001).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(closed, 1);  // the refused size closed what it opened
  absl::StatusOr<RegionInfo> info = registry.RegisterCudaIpc("c", "h", 0);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(info->device);
  EXPECT_FALSE(info->pinned);
  EXPECT_EQ(info->size, 1000);
  EXPECT_EQ(registry.RegisterCudaIpc("c", "h", 600).status().code(),
            absl::StatusCode::kResourceExhausted);
  std::shared_ptr<Region> region = *registry.Find("c", info->id, "f");
  char out[4] = {};
  ASSERT_TRUE(region->CopyOut(out, 10, 4, "input_region").ok());
  EXPECT_EQ(out[0], 7);
  ASSERT_TRUE(region->CopyIn(0, "abcd", 4, "output_region").ok());
  EXPECT_EQ(allocation[2], 'c');
  region.reset();
  ASSERT_TRUE(registry.Unregister("c", info->id).ok());
  EXPECT_EQ(closed, 3);
  EXPECT_EQ(registry.mapped_bytes(), 0);
}

}  // namespace
}  // namespace gpupipe::engine
