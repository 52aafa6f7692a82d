#include "client/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gpupipe {
namespace client {

absl::StatusOr<std::unique_ptr<SharedMemory>> SharedMemory::Create(int64_t bytes,
                                                                   const std::string& prefix) {
  if (bytes < 1) {
    return absl::InvalidArgumentError(absl::StrCat("shared memory of ", bytes, " bytes"));
  }
  std::random_device rd;
  const std::string name =
      absl::StrFormat("/%s-%d-%08x%08x", prefix, static_cast<int>(getpid()), rd(), rd());
  // O_EXCL: the name is this object's alone; 0600: only this user may open it.
  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot create shared memory ", name, ": ", strerror(errno)));
  }
  // Reserved now rather than sized sparsely: a full /dev/shm then fails here, with a status,
  // instead of killing the process with SIGBUS at its first write past the room there was.
  if (const int err = posix_fallocate(fd, 0, static_cast<off_t>(bytes)); err != 0) {
    close(fd);
    shm_unlink(name.c_str());
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot reserve ", bytes, " bytes of shared memory ", name, ": ",
                     strerror(err), " (is /dev/shm large enough?)"));
  }
  void* data = mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  close(fd);
  if (data == MAP_FAILED) {
    shm_unlink(name.c_str());
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot map shared memory ", name, ": ", strerror(err)));
  }
  return std::unique_ptr<SharedMemory>(new SharedMemory(name, static_cast<char*>(data), bytes));
}

SharedMemory::~SharedMemory() {
  munmap(data_, static_cast<size_t>(size_));
  Unlink();
}

void SharedMemory::Unlink() {
  if (!linked_) return;
  shm_unlink(name_.c_str());
  linked_ = false;
}

}  // namespace client
}  // namespace gpupipe
