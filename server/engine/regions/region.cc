#include "server/engine/regions/region.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "server/engine/regions/guarded_copy.h"

namespace gpupipe::engine {
namespace {

// shm_open's rule: one leading slash, then a file name of its own (no other slash, not "." or
// ".."), at most NAME_MAX bytes.
absl::StatusOr<std::string> NormalizeName(std::string name) {
  if (name.empty() || name == "/") {
    return absl::InvalidArgumentError("shm_name: empty; give the name passed to shm_open");
  }
  if (name.front() != '/') name.insert(name.begin(), '/');
  const std::string base = name.substr(1);
  if (base.find('/') != std::string::npos || base == "." || base == ".." ||
      base.size() > NAME_MAX || base.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("shm_name: '", name,
                     "' is not a shared-memory object name (\"/name\", no other slash, "
                     "at most ",
                     NAME_MAX, " bytes)"));
  }
  return name;
}

}  // namespace

bool IsMemoryFile(int fd) {
  // F_GET_SEALS answers for shmem and hugetlbfs files only, without calling into the file's
  // file system (which, for a FUSE file, its sender could serve and stall); only then is
  // fstatfs safe, to tell tmpfs from hugetlbfs, whose huge pages the region code does not
  // round to.
  if (fcntl(fd, F_GET_SEALS) < 0) return false;
  struct statfs fs {};
  return fstatfs(fd, &fs) == 0 && fs.f_type == TMPFS_MAGIC;
}

absl::StatusOr<std::unique_ptr<Region>> Region::Open(
    std::string shm_name, int64_t bytes, const PinHostMemoryFn& pin,
    const std::function<absl::Status(int64_t)>& reserve, bool any_owner) {
  absl::StatusOr<std::string> name = NormalizeName(std::move(shm_name));
  if (!name.ok()) return name.status();
  if (bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat("size: ", bytes, " is negative"));
  }
  const int fd = shm_open(name->c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) {
    const int err = errno;
    const std::string why = absl::StrCat("shm_name: cannot open '", *name, "': ", strerror(err));
    if (err == ENOENT) {
      return absl::NotFoundError(
          absl::StrCat(why,
                       " (create and size it with shm_open and ftruncate first; a "
                       "container needs the host's IPC namespace or a shared /dev/shm)"));
    }
    if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(why);
    return absl::InvalidArgumentError(why);
  }
  return Map(fd, "shm_name", absl::StrCat("'", *name, "'"), *name, bytes, pin, reserve, any_owner);
}

absl::StatusOr<std::unique_ptr<Region>> Region::OpenFd(
    int fd, int64_t bytes, const PinHostMemoryFn& pin,
    const std::function<absl::Status(int64_t)>& reserve) {
  if (bytes < 0) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat("size: ", bytes, " is negative"));
  }
  if (!IsMemoryFile(fd)) {
    close(fd);
    return absl::InvalidArgumentError(
        "fd_ticket: the passed descriptor is not a shared-memory object (a memfd, or a file of "
        "a tmpfs such as /dev/shm)");
  }
  // The caller proved its access by holding the descriptor: no owner check (that guards the
  // names the daemon would open with its own rights).
  return Map(fd, "fd_ticket", "the passed descriptor", "fd", bytes, pin, reserve,
             /*any_owner=*/true);
}

absl::StatusOr<std::unique_ptr<Region>> Region::Map(
    int fd, const char* field, const std::string& what, const std::string& label, int64_t bytes,
    const PinHostMemoryFn& pin, const std::function<absl::Status(int64_t)>& reserve,
    bool any_owner) {
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", what, " is not a shared-memory object"));
  }
  const int64_t object_bytes = static_cast<int64_t>(st.st_size);
  const int64_t size = bytes == 0 ? object_bytes : bytes;
  if (size == 0 || size > object_bytes) {
    close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat("size: ", what, " holds ", object_bytes, " bytes",
                     size == 0 ? "; size it with ftruncate before registering"
                               : absl::StrCat(", fewer than the ", size, " to register")));
  }
  if (!any_owner && st.st_uid != geteuid()) {
    close(fd);
    return absl::PermissionDeniedError(
        absl::StrCat(field, ": ", what, " belongs to uid ", st.st_uid,
                     ", not to the daemon's user (uid ", geteuid(),
                     "); create it as that user, or start gpupiped with --region-any-owner where "
                     "every caller that can reach it is trusted with what it can open"));
  }
  if (reserve) {
    if (absl::Status s = reserve(size); !s.ok()) {
      close(fd);
      return s;
    }
  }
  void* data = mmap(nullptr, static_cast<size_t>(size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int map_err = errno;
  close(fd);  // the mapping keeps the object
  if (data == MAP_FAILED) {
    if (map_err == EACCES || map_err == EPERM) {
      // Opened read-only, or sealed against writes: jobs could not write their results.
      return absl::PermissionDeniedError(absl::StrCat(field, ": ", what,
                                                      " cannot be mapped for reading and "
                                                      "writing: ",
                                                      strerror(map_err)));
    }
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot map ", size, " bytes of ", what, ": ", strerror(map_err)));
  }
  std::unique_ptr<Region> region(new Region(label, static_cast<char*>(data), size));
  region->object_ = {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
  if (pin) {
    absl::StatusOr<HostPin> pinned = pin(region->data_, size);
    if (!pinned.ok()) return pinned.status();  // the destructor unmaps
    region->pin_ = *std::move(pinned);
  }
  return region;
}

absl::StatusOr<std::unique_ptr<Region>> Region::FromDevice(DeviceMapping mapping, int64_t bytes,
                                                           DeviceCopyFn copy) {
  const int64_t size = bytes == 0 ? mapping.bytes : bytes;
  if (bytes < 0 || size == 0 || size > mapping.bytes) {
    if (mapping.close) mapping.close();
    return absl::InvalidArgumentError(absl::StrCat("size: the exported allocation holds ",
                                                   mapping.bytes,
                                                   " bytes from its handle's "
                                                   "address; ",
                                                   bytes, " cannot be registered"));
  }
  std::unique_ptr<Region> region(new Region("cuda-ipc", mapping.data, size));
  region->device_ = std::move(mapping);
  region->copy_ = std::move(copy);
  return region;
}

Region::~Region() {
  if (copy_ != nullptr) {
    if (device_.close) device_.close();
    return;
  }
  if (pin_.unpin) pin_.unpin();
  munmap(data_, static_cast<size_t>(size_));
}

absl::Status Region::CopyOut(char* to, int64_t offset, int64_t bytes, const char* field) const {
  if (copy_ != nullptr) return copy_(to, data_ + offset, bytes);
  return GuardedCopy(to, data_ + offset, static_cast<size_t>(bytes), field);
}

absl::Status Region::CopyIn(int64_t offset, const char* from, int64_t bytes,
                            const char* field) const {
  if (copy_ != nullptr) return copy_(data_ + offset, from, bytes);
  return GuardedCopy(data_ + offset, from, static_cast<size_t>(bytes), field);
}

absl::Status Region::CheckRange(int64_t offset, int64_t length, const std::string& field) const {
  if (offset < 0 || length < 0 || offset > size_ || length > size_ - offset) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", length, " bytes at offset ", offset,
                                                   " are outside region ", shm_name_, " of ", size_,
                                                   " bytes"));
  }
  return absl::OkStatus();
}

}  // namespace gpupipe::engine
