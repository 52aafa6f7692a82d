#include "server/engine/regions/region_registry.h"

#include <unistd.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/random_id.h"

namespace gpupipe::engine {
namespace {

using Clock = std::chrono::steady_clock;

double Gib(int64_t bytes) { return static_cast<double>(bytes) / double(int64_t{1} << 30); }

// What a mapping of `bytes` takes: whole pages.
int64_t Pages(int64_t bytes) {
  constexpr int64_t kPage = 4096;
  return (bytes + kPage - 1) / kPage * kPage;
}

std::string NewRegionId() { return "r-" + RandomHex128(); }

}  // namespace

struct RegionRegistry::Accounts {
  std::mutex mu;
  int64_t total = 0;
  int regions = 0;
  std::map<std::string, int64_t> by_client;
  std::map<std::string, int> regions_by_client;

  // Gives back one region of `bytes` (whole pages) that `client` reserved.
  void Release(const std::string& client, int64_t bytes) {
    const int64_t size = Pages(bytes);
    std::lock_guard<std::mutex> lock(mu);
    total -= size;
    --regions;
    if ((by_client[client] -= size) == 0) by_client.erase(client);
    if (--regions_by_client[client] == 0) regions_by_client.erase(client);
  }
};

RegionRegistry::RegionRegistry(RegionLimits limits, RegionHooks hooks)
    : limits_(limits), hooks_(std::move(hooks)), accounts_(std::make_shared<Accounts>()) {}

RegionRegistry::~RegionRegistry() = default;

absl::StatusOr<RegionInfo> RegionRegistry::Register(const std::string& client,
                                                    const std::string& shm_name, int64_t bytes,
                                                    const std::string& lease) {
  return RegisterHost(client, lease, [&](const std::function<absl::Status(int64_t)>& reserve) {
    return Region::Open(shm_name, bytes, hooks_.pin, reserve, limits_.any_owner);
  });
}

absl::StatusOr<RegionInfo> RegionRegistry::RegisterFd(const std::string& client, int fd,
                                                      int64_t bytes, const std::string& lease) {
  bool taken = false;  // OpenFd closes the descriptor once it has it
  absl::StatusOr<RegionInfo> info =
      RegisterHost(client, lease, [&](const std::function<absl::Status(int64_t)>& reserve) {
        taken = true;
        return Region::OpenFd(fd, bytes, hooks_.pin, reserve);
      });
  if (!taken) close(fd);
  return info;
}

absl::StatusOr<RegionInfo> RegionRegistry::RegisterHost(
    const std::string& client, const std::string& lease,
    const std::function<absl::StatusOr<std::unique_ptr<Region>>(
        const std::function<absl::Status(int64_t)>& reserve)>& open) {
  if (limits_.max_bytes <= 0) {
    return absl::UnavailableError(
        "shared-memory regions are off on this server (gpupiped --max-region-gib 0)");
  }
  {
    std::vector<std::shared_ptr<Region>> dropped;  // unmapped once the lock is released
    std::lock_guard<std::mutex> lock(mu_);
    DropIdleLocked(Clock::now(), &dropped);
  }
  if (absl::Status s = CheckLease(client, lease); !s.ok()) return s;
  // The bytes are counted before anything is mapped or page-locked, so that no request can
  // make the daemon touch more memory than the limits allow, however many arrive at once.
  int64_t reserved = -1;
  absl::StatusOr<std::unique_ptr<Region>> opened = open([&](int64_t size) {
    absl::Status s = Reserve(client, size);
    if (s.ok()) reserved = size;
    return s;
  });
  if (!opened.ok()) {
    if (reserved >= 0) accounts_->Release(client, reserved);
    return opened.status();
  }
  return Add(client, *std::move(opened), lease);
}

absl::Status RegionRegistry::Reserve(const std::string& client, int64_t bytes) {
  const int64_t size = Pages(bytes);
  std::lock_guard<std::mutex> lock(accounts_->mu);
  auto mine = accounts_->by_client.find(client);
  const int64_t my_bytes = mine == accounts_->by_client.end() ? 0 : mine->second;
  auto count = accounts_->regions_by_client.find(client);
  const int my_regions = count == accounts_->regions_by_client.end() ? 0 : count->second;
  // Larger than a limit itself: no unregistering makes room.
  for (const auto& [limit, flag] : {std::pair{limits_.max_bytes, "--max-region-gib"},
                                    std::pair{limits_.max_client_bytes, "--max-client-region-gib"}}) {
    if (size > limit) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "region of %.2f GiB: over the %.2f GiB the server maps at most (gpupiped %s)",
          Gib(size), Gib(limit), flag));
    }
  }
  if (size > limits_.max_bytes - accounts_->total) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "region of %.2f GiB: the server has %.2f of its %.2f GiB for regions mapped "
        "(gpupiped --max-region-gib); retry once others are unregistered",
        Gib(size), Gib(accounts_->total), Gib(limits_.max_bytes)));
  }
  if (size > limits_.max_client_bytes - my_bytes) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "region of %.2f GiB: this client has %.2f of its %.2f GiB for regions mapped "
        "(gpupiped --max-client-region-gib); unregister one first",
        Gib(size), Gib(my_bytes), Gib(limits_.max_client_bytes)));
  }
  if (my_regions >= limits_.max_client_regions) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "this client has ", limits_.max_client_regions,
        " regions mapped, its limit (gpupiped --max-client-regions); unregister one first"));
  }
  if (accounts_->regions >= limits_.max_regions) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the server has ", limits_.max_regions,
        " regions mapped, its limit (gpupiped --max-regions); retry once others are unregistered"));
  }
  accounts_->by_client[client] += size;
  ++accounts_->regions_by_client[client];
  accounts_->total += size;
  ++accounts_->regions;
  return absl::OkStatus();
}


absl::StatusOr<RegionInfo> RegionRegistry::RegisterCudaIpc(const std::string& client,
                                                           const std::string& handle, int64_t bytes,
                                                           const std::string& lease) {
  if (limits_.max_bytes <= 0) {
    return absl::UnavailableError("regions are off on this server (gpupiped --max-region-gib 0)");
  }
  if (!hooks_.open_cuda_ipc) {
    return absl::FailedPreconditionError(
        "cuda_ipc_handle: this server runs on the cpu backend; CUDA IPC needs the cuda backend");
  }
  if (absl::Status s = CheckLease(client, lease); !s.ok()) return s;
  absl::StatusOr<DeviceMapping> mapping = hooks_.open_cuda_ipc(handle);
  if (!mapping.ok()) return mapping.status();
  absl::StatusOr<std::unique_ptr<Region>> region =
      Region::FromDevice(*std::move(mapping), bytes, hooks_.device_copy);
  if (!region.ok()) return region.status();
  // The client's device memory, opened: counted like a host region's, though it costs the
  // daemon no memory, so that a client cannot hold the GPU's memory through it without bound.
  if (absl::Status s = Reserve(client, (*region)->size()); !s.ok()) return s;
  return Add(client, *std::move(region), lease);
}

absl::Status RegionRegistry::CheckLease(const std::string& client, const std::string& lease) const {
  if (lease.empty()) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = leases_.find(lease);
  if (it == leases_.end()) {
    return absl::NotFoundError(
        absl::StrCat("lease_id: no lease '", lease.substr(0, 64), "' is open (it ended)"));
  }
  if (it->second != client) {
    return absl::PermissionDeniedError("lease_id: the lease belongs to another client");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> RegionRegistry::OpenLease(const std::string& client) {
  std::lock_guard<std::mutex> lock(mu_);
  int open = 0;
  for (const auto& [id, owner] : leases_) open += owner == client;
  if (open >= limits_.max_client_regions) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "this client holds ", open, " region leases, its limit (gpupiped --max-client-regions)"));
  }
  std::string id = "l" + NewRegionId().substr(1);
  leases_.emplace(id, client);
  return id;
}

void RegionRegistry::EndLease(const std::string& lease) {
  std::vector<std::shared_ptr<Region>> dropped;  // unmapped once no lock is held
  std::lock_guard<std::mutex> lock(mu_);
  if (leases_.erase(lease) == 0) return;
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->second.lease == lease) {
      dropped.push_back(std::move(it->second.region));
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

absl::StatusOr<RegionInfo> RegionRegistry::Add(const std::string& client,
                                               std::unique_ptr<Region> opened,
                                               const std::string& lease) {
  const int64_t size = opened->size();
  RegionInfo info{NewRegionId(), opened->shm_name(), size, opened->pinned(), opened->device()};
  // The reserved bytes count until the mapping goes, which is when the last job holding it
  // ends. The deleter outlives the registry while jobs run, so it holds the accounts.
  std::shared_ptr<Region> region(opened.release(), [accounts = accounts_, client, size](Region* r) {
    delete r;
    accounts->Release(client, size);
  });
  std::lock_guard<std::mutex> lock(mu_);
  // The lease may have ended while the region was being mapped: then it goes at once.
  if (!lease.empty() && leases_.count(lease) == 0) {
    return absl::NotFoundError("lease_id: the lease ended while the region was registered");
  }
  entries_.emplace(info.id, Entry{client, std::move(region), Clock::now(), lease});
  return info;
}

absl::StatusOr<RegionRegistry::Entry*> RegionRegistry::FindLocked(const std::string& client,
                                                                  const std::string& id,
                                                                  const std::string& field) {
  auto it = entries_.find(id);
  if (it == entries_.end()) {
    return absl::NotFoundError(
        absl::StrCat(field, ": no region '", id.substr(0, 64),
                     "' is registered (unregistered, never registered, or dropped after ",
                     std::chrono::duration_cast<std::chrono::seconds>(limits_.idle_timeout).count(),
                     " s unused)"));
  }
  if (it->second.client != client) {
    return absl::PermissionDeniedError(
        absl::StrCat(field, ": region '", id, "' belongs to another client"));
  }
  return &it->second;
}

absl::Status RegionRegistry::Unregister(const std::string& client, const std::string& id) {
  std::shared_ptr<Region> dropped;  // unmapped after the lock, unless a job holds it
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<Entry*> entry = FindLocked(client, id, "region_id");
  if (!entry.ok()) return entry.status();
  dropped = std::move((*entry)->region);
  entries_.erase(id);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Region>> RegionRegistry::Find(const std::string& client,
                                                             const std::string& id,
                                                             const std::string& field) {
  std::vector<std::shared_ptr<Region>> dropped;  // unmapped once no lock is held
  std::lock_guard<std::mutex> lock(mu_);
  const Clock::time_point now = Clock::now();
  DropIdleLocked(now, &dropped);
  absl::StatusOr<Entry*> entry = FindLocked(client, id, field);
  if (!entry.ok()) return entry.status();
  (*entry)->last_used = now;
  return (*entry)->region;
}

void RegionRegistry::DropIdleLocked(Clock::time_point now,
                                    std::vector<std::shared_ptr<Region>>* dropped) {
  if (limits_.idle_timeout.count() <= 0) return;
  for (auto it = entries_.begin(); it != entries_.end();) {
    // A region a job holds is in use, however long ago it was found.
    if (it->second.region.use_count() == 1 && now - it->second.last_used > limits_.idle_timeout) {
      dropped->push_back(std::move(it->second.region));
      it = entries_.erase(it);
    } else {
      if (it->second.region.use_count() > 1) it->second.last_used = now;
      ++it;
    }
  }
}

int64_t RegionRegistry::mapped_bytes() {
  {
    std::vector<std::shared_ptr<Region>> dropped;
    std::lock_guard<std::mutex> lock(mu_);
    DropIdleLocked(Clock::now(), &dropped);
  }
  std::lock_guard<std::mutex> lock(accounts_->mu);
  return accounts_->total;
}

int RegionRegistry::registered() {
  std::vector<std::shared_ptr<Region>> dropped;  // unmapped once the lock is released
  std::lock_guard<std::mutex> lock(mu_);
  DropIdleLocked(Clock::now(), &dropped);
  return static_cast<int>(entries_.size());
}

}  // namespace gpupipe::engine
