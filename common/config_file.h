// The contents of a small regular file (TLS certificates and keys, token files: the daemon's
// and the CLI's), or why not, naming it. Anything but a regular file is refused without
// reading it: a FIFO would block the reader (the daemon's signal thread, on SIGHUP's reload of
// the token file; the CLI before its call). So is a file of more than `max_bytes`.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace gpupipe {

inline absl::StatusOr<std::string> ReadConfigFile(const std::string& path,
                                                  int64_t max_bytes = int64_t{16} << 20) {
  // Non-blocking, so that opening a FIFO returns at once; a regular file reads as ever.
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  }
  struct stat st {};
  absl::Status status;
  std::string contents;
  if (fstat(fd, &st) != 0) {
    status = absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  } else if (!S_ISREG(st.st_mode)) {
    status = absl::InvalidArgumentError(
        absl::StrCat(path, ": not a regular file (", S_ISDIR(st.st_mode) ? "a directory" : "a "
                     "device, FIFO or socket", ")"));
  } else if (st.st_size > max_bytes) {
    status = absl::InvalidArgumentError(absl::StrCat(path, ": ", st.st_size,
                                                     " bytes, over the ", max_bytes,
                                                     " such a file may have"));
  } else {
    char buffer[1 << 16];
    for (;;) {
      const ssize_t n = read(fd, buffer, sizeof(buffer));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        status =
            absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
        break;
      }
      if (n == 0) break;
      contents.append(buffer, static_cast<size_t>(n));
      if (static_cast<int64_t>(contents.size()) > max_bytes) {  // grew while being read
        status = absl::InvalidArgumentError(
            absl::StrCat(path, ": over the ", max_bytes, " bytes such a file may have"));
        break;
      }
    }
  }
  close(fd);
  if (!status.ok()) return status;
  return contents;
}

}  // namespace gpupipe
