#include "server/engine/regions/region_registry.h"

#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gpupipe::engine {
namespace {

using Clock = std::chrono::steady_clock;

double Gib(int64_t bytes) { return static_cast<double>(bytes) / double(int64_t{1} << 30); }

std::string NewRegionId() {
  std::random_device rd;
  std::string id = "r-";
  for (int i = 0; i < 4; ++i) absl::StrAppend(&id, absl::Hex(rd(), absl::kZeroPad8));
  return id;
}

}  // namespace

struct RegionRegistry::Accounts {
  std::mutex mu;
  int64_t total = 0;
  std::map<std::string, int64_t> by_client;
  std::map<std::string, int> regions_by_client;
};

RegionRegistry::RegionRegistry(RegionLimits limits, RegionHooks hooks)
    : limits_(limits), hooks_(std::move(hooks)), accounts_(std::make_shared<Accounts>()) {}

RegionRegistry::~RegionRegistry() = default;

absl::StatusOr<RegionInfo> RegionRegistry::Register(const std::string& client,
                                                    const std::string& shm_name, int64_t bytes) {
  if (limits_.max_bytes <= 0) {
    return absl::UnavailableError(
        "shared-memory regions are off on this server (gpupiped --max-region-gib 0)");
  }
  std::vector<std::shared_ptr<Region>> dropped;  // unmapped once no lock is held
  {
    std::lock_guard<std::mutex> lock(mu_);
    DropIdleLocked(Clock::now(), &dropped);
    std::lock_guard<std::mutex> accounts(accounts_->mu);
    if (accounts_->regions_by_client[client] >= limits_.max_client_regions) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "this client has ", limits_.max_client_regions,
          " regions mapped, its limit (gpupiped --max-client-regions); unregister one first"));
    }
  }
  // Mapping and page-locking take a while for large objects; no lock is held meanwhile, so
  // the limits are checked again once the size is known.
  absl::StatusOr<std::unique_ptr<Region>> opened = Region::Open(shm_name, bytes, hooks_.pin);
  if (!opened.ok()) return opened.status();
  return Add(client, *std::move(opened));
}

absl::StatusOr<RegionInfo> RegionRegistry::RegisterCudaIpc(const std::string& client,
                                                           const std::string& handle,
                                                           int64_t bytes) {
  if (limits_.max_bytes <= 0) {
    return absl::UnavailableError("regions are off on this server (gpupiped --max-region-gib 0)");
  }
  if (!hooks_.open_cuda_ipc) {
    return absl::FailedPreconditionError(
        "cuda_ipc_handle: this server runs on the cpu backend; CUDA IPC needs the cuda backend");
  }
  absl::StatusOr<DeviceMapping> mapping = hooks_.open_cuda_ipc(handle);
  if (!mapping.ok()) return mapping.status();
  absl::StatusOr<std::unique_ptr<Region>> region =
      Region::FromDevice(*std::move(mapping), bytes, hooks_.device_copy);
  if (!region.ok()) return region.status();
  return Add(client, *std::move(region));
}

absl::StatusOr<RegionInfo> RegionRegistry::Add(const std::string& client,
                                               std::unique_ptr<Region> opened) {
  const int64_t size = opened->size();
  RegionInfo info{NewRegionId(), opened->shm_name(), size, opened->pinned(), opened->device()};
  {
    std::lock_guard<std::mutex> accounts(accounts_->mu);
    int64_t& mine = accounts_->by_client[client];
    if (size > limits_.max_bytes - accounts_->total) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "region of %.2f GiB: the server has %.2f of its %.2f GiB for regions mapped "
          "(gpupiped --max-region-gib); retry once others are unregistered",
          Gib(size), Gib(accounts_->total), Gib(limits_.max_bytes)));
    }
    if (size > limits_.max_client_bytes - mine) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "region of %.2f GiB: this client has %.2f of its %.2f GiB for regions mapped "
          "(gpupiped --max-client-region-gib); unregister one first",
          Gib(size), Gib(mine), Gib(limits_.max_client_bytes)));
    }
    if (accounts_->regions_by_client[client] >= limits_.max_client_regions) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "this client has ", limits_.max_client_regions,
          " regions mapped, its limit (gpupiped --max-client-regions); unregister one first"));
    }
    mine += size;
    accounts_->total += size;
    ++accounts_->regions_by_client[client];
  }
  // The bytes count until the mapping goes, which is when the last job holding it ends.
  std::shared_ptr<Region> region(opened.release(), [accounts = accounts_, client, size](Region* r) {
    delete r;
    std::lock_guard<std::mutex> lock(accounts->mu);
    accounts->total -= size;
    if ((accounts->by_client[client] -= size) == 0) accounts->by_client.erase(client);
    if (--accounts->regions_by_client[client] == 0) {
      accounts->regions_by_client.erase(client);
    }
  });
  std::lock_guard<std::mutex> lock(mu_);
  entries_.emplace(info.id, Entry{client, std::move(region), Clock::now()});
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

int64_t RegionRegistry::mapped_bytes() const {
  std::lock_guard<std::mutex> lock(accounts_->mu);
  return accounts_->total;
}

int RegionRegistry::registered() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(entries_.size());
}

}  // namespace gpupipe::engine
