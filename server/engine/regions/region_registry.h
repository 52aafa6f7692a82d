// The daemon's registered host regions (region.h), by id, each owned by the client that
// registered it (JobSpec::client's naming): only that client may use or unregister it, and the
// ids are random 128-bit names, so a region is reachable only by who was told its id.
//
// Bounded: registered bytes in total and per client, and regions per client (RegionLimits);
// a region unregistered while a job uses it stays mapped until that job ends and counts
// against the limits until then. A region no job has used for `idle_timeout` is dropped, so a
// client that crashed leaves nothing pinned for ever; a region registered under a lease goes
// as soon as the lease ends (the RPC layer ends a lease when its call does: the client closed
// it, cancelled it or went away).
//
// Thread safety: all methods may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/engine/regions/region.h"

namespace gpupipe::engine {

struct RegionLimits {
  // Bytes mapped for regions (page-locked on the CUDA backend) over all clients, and per
  // client; 0 turns regions off.
  int64_t max_bytes = int64_t{32} << 30;
  int64_t max_client_bytes = int64_t{16} << 30;
  int max_client_regions = 64;
  // Regions over all clients (each holds a mapping; clients that change their client-id get
  // their own per-client budgets, so this bounds them all).
  int max_regions = 1024;
  // Map objects whatever user owns them (else only the daemon's user's): for hosts where every
  // caller that can reach the daemon is trusted with what the daemon can open.
  bool any_owner = false;
  // A region no job has used for this long is unregistered (0: never).
  std::chrono::milliseconds idle_timeout{std::chrono::minutes(10)};
};

struct RegionInfo {
  std::string id;
  std::string shm_name;  // "cuda-ipc" for a device region
  int64_t size = 0;
  bool pinned = false;
  bool device = false;
};

// What regions need from the backend; an empty function: not offered (the CPU backend
// page-locks nothing and opens no device memory).
using OpenCudaIpcFn = std::function<absl::StatusOr<DeviceMapping>(const std::string& handle)>;
struct RegionHooks {
  PinHostMemoryFn pin;
  OpenCudaIpcFn open_cuda_ipc;
  DeviceCopyFn device_copy;
};

class RegionRegistry {
 public:
  RegionRegistry(RegionLimits limits, RegionHooks hooks);
  ~RegionRegistry();

  // Maps `shm_name` for `client` (Region::Open). RESOURCE_EXHAUSTED naming the limit when
  // the region would exceed one; UNAVAILABLE with regions off.
  // With a `lease` (OpenLease; empty for none) the region is unregistered when it ends.
  absl::StatusOr<RegionInfo> Register(const std::string& client, const std::string& shm_name,
                                      int64_t bytes, const std::string& lease = "");
  // As Register, for an open descriptor of a shared-memory object (Region::OpenFd), which
  // this takes and closes whatever happens.
  absl::StatusOr<RegionInfo> RegisterFd(const std::string& client, int fd, int64_t bytes,
                                        const std::string& lease = "");
  // Opens device memory a process of this host exported (`handle`: a cudaIpcMemHandle_t's
  // bytes) for `client`: `bytes` of it (0: the whole allocation). FAILED_PRECONDITION where the
  // backend has no device; the backend's error for a handle it cannot open; the limits as
  // Register's (a device region's bytes count like a host region's).
  absl::StatusOr<RegionInfo> RegisterCudaIpc(const std::string& client, const std::string& handle,
                                             int64_t bytes, const std::string& lease = "");

  // A lease for `client`'s regions: a random id, at most max_client_regions open per client
  // (RESOURCE_EXHAUSTED beyond). EndLease unregisters every region registered under it (jobs
  // using one keep it until they end); ending an unknown lease does nothing.
  absl::StatusOr<std::string> OpenLease(const std::string& client);
  void EndLease(const std::string& lease);
  // NOT_FOUND for an unknown id, PERMISSION_DENIED for another client's region.
  absl::Status Unregister(const std::string& client, const std::string& id);
  // The region for a job of `client` (errors as Unregister's, naming `field`). The job holds
  // it until it ends, unregistered or not.
  absl::StatusOr<std::shared_ptr<Region>> Find(const std::string& client, const std::string& id,
                                               const std::string& field);

  const RegionLimits& limits() const { return limits_; }
  // Bytes mapped (in whole pages), regions unregistered whose jobs still run included;
  // registered regions. Both first drop idle regions, so a scrape of the stats is enough to
  // sweep them when nobody registers or submits.
  int64_t mapped_bytes();
  int registered();

 private:
  // Register and RegisterFd: the limits, the lease, then `open` given the reservation to make
  // before it maps anything.
  absl::StatusOr<RegionInfo> RegisterHost(
      const std::string& client, const std::string& lease,
      const std::function<absl::StatusOr<std::unique_ptr<Region>>(
          const std::function<absl::Status(int64_t)>& reserve)>& open);
  struct Entry {
    std::string client;
    std::shared_ptr<Region> region;
    std::chrono::steady_clock::time_point last_used;
    std::string lease;  // empty: none
  };
  // Bytes each client has mapped, shared with the regions' deleters, which outlive the
  // registry's entries while jobs run.
  struct Accounts;

  // Moves regions idle for longer than the timeout that no job holds to `dropped`.
  void DropIdleLocked(std::chrono::steady_clock::time_point now,
                      std::vector<std::shared_ptr<Region>>* dropped);
  absl::StatusOr<Entry*> FindLocked(const std::string& client, const std::string& id,
                                    const std::string& field);

  const RegionLimits limits_;
  // NOT_FOUND or PERMISSION_DENIED unless `lease` is empty or an open lease of `client`.
  absl::Status CheckLease(const std::string& client, const std::string& lease) const;
  // Counts `bytes` (whole pages) and one region against `client`'s limits and the server's,
  // or says which limit they would pass; Accounts::Release gives them back.
  absl::Status Reserve(const std::string& client, int64_t bytes);
  // Names an opened region of `client` whose bytes were reserved.
  absl::StatusOr<RegionInfo> Add(const std::string& client, std::unique_ptr<Region> region,
                                 const std::string& lease);

  const RegionHooks hooks_;
  std::shared_ptr<Accounts> accounts_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> entries_;
  std::map<std::string, std::string> leases_;  // open lease -> its client
};

}  // namespace gpupipe::engine
