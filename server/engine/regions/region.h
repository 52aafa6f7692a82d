// A region: memory a client shares with the daemon, which jobs read their input from and write
// their results into instead of carrying the bytes in messages. Two kinds:
//  - host: a POSIX shared-memory object the client created, mapped here. Where the backend
//    page-locks host memory (CUDA), the mapping is page-locked once, so every job's chunks DMA
//    straight from and to it. The client keeps the object: it may unlink it (the mapping stays
//    valid) or shrink it (the daemon's own accesses then fault, which GuardedCopy turns into
//    the job's error; DMA goes to page-locked pages, which a shrink does not take away);
//  - device: an allocation on the daemon's GPU that a client process exported (CUDA IPC),
//    opened once here: jobs copy device to device, with no host copy at all.
// Nothing on the host may dereference a device region: CopyOut and CopyIn go through the
// backend's copies.
//
// Thread safety: immutable after creation; the bytes may be read and written by several jobs
// at once (what they write is the client's business).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpupipe::engine {

// What page-locking a range of host memory left behind: `pinned` false where the backend does
// not page-lock (CPU); `unpin` undoes it (may be empty).
struct HostPin {
  bool pinned = false;
  std::function<void()> unpin;
};
using PinHostMemoryFn = std::function<absl::StatusOr<HostPin>(char* data, int64_t bytes)>;

// Device memory another process exported (CUDA IPC), as the backend opened it: `bytes` of
// the allocation from `data` (a device pointer); `close` undoes the opening.
struct DeviceMapping {
  char* data = nullptr;
  int64_t bytes = 0;
  std::function<void()> close;
};
// Copies `bytes` between host and device memory, either way, and waits for the copy.
using DeviceCopyFn = std::function<absl::Status(char* to, const char* from, int64_t bytes)>;

// Whether `fd` is a file of tmpfs, which holds POSIX shared memory and memfds. A passed
// descriptor must be: a file of another file system (a FUSE mount its sender serves, a network
// file) could stall the daemon's threads at every page fault.
bool IsMemoryFile(int fd);

class Region {
 public:
  // Maps the first `bytes` of the shared-memory object `shm_name` ("/name" as shm_open takes
  // it; a missing leading slash is added) read-write, or the whole object when `bytes` is 0,
  // and pins it with `pin`. INVALID_ARGUMENT for a malformed name or a size the object does not
  // have, NOT_FOUND when no such object exists, PERMISSION_DENIED when the daemon may not open
  // it, and pin's error.
  //
  // Before anything is mapped, `reserve` is given the size to map (it checks and counts the
  // limits; its error is returned). Unless `any_owner`, an object that another user owns is
  // PERMISSION_DENIED: the daemon opens it with its own rights, which must not lend a caller
  // access it lacks.
  static absl::StatusOr<std::unique_ptr<Region>> Open(
      std::string shm_name, int64_t bytes, const PinHostMemoryFn& pin,
      const std::function<absl::Status(int64_t)>& reserve, bool any_owner);
  // As Open, for an open descriptor of a shared-memory object (a memfd a local process passed
  // the daemon), which this takes and closes whatever happens; messages name `fd_ticket`. The
  // object must live in tmpfs (IsMemoryFile; INVALID_ARGUMENT otherwise); whoever owns
  // it, as its holder proved access by passing the descriptor.
  static absl::StatusOr<std::unique_ptr<Region>> OpenFd(
      int fd, int64_t bytes, const PinHostMemoryFn& pin,
      const std::function<absl::Status(int64_t)>& reserve);
  // A device region over `mapping` (its first `bytes`; 0: all of it), copied to and from the
  // host with `copy`. INVALID_ARGUMENT when the allocation holds fewer bytes.
  static absl::StatusOr<std::unique_ptr<Region>> FromDevice(DeviceMapping mapping, int64_t bytes,
                                                            DeviceCopyFn copy);
  ~Region();  // host: unpins, then unmaps; device: closes the mapping

  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  // The object's name ("fd" for a passed descriptor, "cuda-ipc" for device memory).
  const std::string& shm_name() const { return shm_name_; }
  char* data() const { return data_; }
  int64_t size() const { return size_; }
  bool pinned() const { return pin_.pinned; }
  bool device() const { return device_.close != nullptr || copy_ != nullptr; }
  // Whether two regions are views of the same memory (one object registered twice).
  bool SameMemoryAs(const Region& other) const {
    return device() == other.device() &&
           (device() ? data_ == other.data_ : object_ == other.object_);
  }

  // Copies `bytes` from the region's byte `offset` to host memory `to`, and from host memory
  // `from` into the region; FAILED_PRECONDITION naming `field` when the region's memory is
  // gone (a host object shrunk under the mapping), or the backend's copy error.
  absl::Status CopyOut(char* to, int64_t offset, int64_t bytes, const char* field) const;
  absl::Status CopyIn(int64_t offset, const char* from, int64_t bytes, const char* field) const;

  // OK when bytes [offset, offset + length) lie inside the region; INVALID_ARGUMENT naming
  // `field` otherwise.
  absl::Status CheckRange(int64_t offset, int64_t length, const std::string& field) const;

 private:
  // Open and OpenFd once the object is open: checks, reserves, maps and pins `fd`'s object,
  // closing `fd`. Messages name `field` and call the object `what`.
  static absl::StatusOr<std::unique_ptr<Region>> Map(
      int fd, const char* field, const std::string& what, const std::string& label, int64_t bytes,
      const PinHostMemoryFn& pin, const std::function<absl::Status(int64_t)>& reserve,
      bool any_owner);
  Region(std::string shm_name, char* data, int64_t size)
      : shm_name_(std::move(shm_name)), data_(data), size_(size) {}

  const std::string shm_name_;
  char* const data_;
  const int64_t size_;
  HostPin pin_;
  std::pair<uint64_t, uint64_t> object_{};  // host regions: the object's device and inode
  DeviceMapping device_;  // device regions
  DeviceCopyFn copy_;     // device regions
};

}  // namespace gpupipe::engine
