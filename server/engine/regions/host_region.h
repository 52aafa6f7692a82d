// A host region: a POSIX shared-memory object a client created, mapped into the daemon so that
// jobs read their input from it and write their results into it instead of carrying the
// bytes in messages. Where the backend page-locks host memory (CUDA), the mapping is
// page-locked once here, so every job's chunks DMA straight from and to it.
//
// The client keeps the object: it may unlink it (the mapping stays valid) or shrink it (the
// daemon's own accesses then fault, which GuardedCopy turns into the job's error; DMA goes to
// page-locked pages, which a shrink does not take away).
//
// Thread safety: immutable after Open; data() may be read and written by several jobs at once
// (what they write is the client's business).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

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

class HostRegion {
 public:
  // Maps the first `bytes` of the shared-memory object `shm_name` ("/name" as shm_open takes
  // it; a missing leading slash is added) read-write, or the whole object when `bytes` is 0,
  // and pins it with `pin`. INVALID_ARGUMENT for a malformed name or a size the object does not
  // have, NOT_FOUND when no such object exists, PERMISSION_DENIED when the daemon may not open
  // it, and pin's error.
  static absl::StatusOr<std::unique_ptr<HostRegion>> Open(std::string shm_name, int64_t bytes,
                                                          const PinHostMemoryFn& pin);
  ~HostRegion();  // unpins, then unmaps

  HostRegion(const HostRegion&) = delete;
  HostRegion& operator=(const HostRegion&) = delete;

  const std::string& shm_name() const { return shm_name_; }
  char* data() const { return data_; }
  int64_t size() const { return size_; }
  bool pinned() const { return pin_.pinned; }

  // OK when bytes [offset, offset + length) lie inside the region; INVALID_ARGUMENT naming
  // `field` otherwise.
  absl::Status CheckRange(int64_t offset, int64_t length, const std::string& field) const;

 private:
  HostRegion(std::string shm_name, char* data, int64_t size)
      : shm_name_(std::move(shm_name)), data_(data), size_(size) {}

  const std::string shm_name_;
  char* const data_;
  const int64_t size_;
  HostPin pin_;
};

}  // namespace gpupipe::engine
