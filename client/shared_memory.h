// A POSIX shared-memory object that this process creates, maps and, on destruction, unmaps
// and unlinks: the client side of a gpupipe region (RegisterRegion). The daemon maps the same
// object, so jobs read their input from it and write their result into it.
//
// Thread safety: none beyond the bytes themselves, which any thread may read and write.
#ifndef GPUPIPE_CLIENT_SHARED_MEMORY_H_
#define GPUPIPE_CLIENT_SHARED_MEMORY_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace gpupipe {
namespace client {

class SharedMemory {
 public:
  // A new object of `bytes` (at least 1) named "/<prefix>-<pid>-<random>", readable and
  // writable by this user only, its pages reserved in /dev/shm (RESOURCE_EXHAUSTED when there
  // is no room; UNAVAILABLE when no object can be created).
  static absl::StatusOr<std::unique_ptr<SharedMemory>> Create(
      int64_t bytes, const std::string& prefix = "gpupipe");
  ~SharedMemory();

  SharedMemory(const SharedMemory&) = delete;
  SharedMemory& operator=(const SharedMemory&) = delete;

  const std::string& name() const { return name_; }  // as shm_open takes it
  char* data() const { return data_; }
  int64_t size() const { return size_; }

  // Removes the name now (the mapping stays valid; the destructor then only unmaps).
  void Unlink();

 private:
  SharedMemory(std::string name, char* data, int64_t size)
      : name_(std::move(name)), data_(data), size_(size) {}

  std::string name_;
  char* data_;
  int64_t size_;
  bool linked_ = true;
};

}  // namespace client
}  // namespace gpupipe

#endif  // GPUPIPE_CLIENT_SHARED_MEMORY_H_
