#include "client/fd_passing.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace gpupipe {
namespace client {

absl::StatusOr<std::string> PassDescriptor(const std::string& socket_path, int fd,
                                           double timeout_seconds) {
  sockaddr_un address{};
  if (socket_path.empty() || socket_path.size() >= sizeof(address.sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("region socket: '", socket_path, "' is not a socket path"));
  }
  const int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (sock < 0) return absl::UnavailableError(absl::StrCat("socket: ", strerror(errno)));
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout_seconds);
  tv.tv_usec = static_cast<suseconds_t>((timeout_seconds - tv.tv_sec) * 1e6);
  setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, socket_path.data(), socket_path.size());
  if (connect(sock, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    const int err = errno;
    close(sock);
    return absl::UnavailableError(
        absl::StrCat("region socket '", socket_path, "': cannot connect: ", strerror(err)));
  }
  char byte = 'f';
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  if (sendmsg(sock, &msg, MSG_NOSIGNAL) != 1) {
    const int err = errno;
    close(sock);
    return absl::UnavailableError(
        absl::StrCat("region socket '", socket_path, "': cannot send: ", strerror(err)));
  }
  std::string reply;
  char buffer[256];
  while (reply.find('\n') == std::string::npos && reply.size() < 4096) {
    const ssize_t n = read(sock, buffer, sizeof(buffer));
    if (n <= 0) break;
    reply.append(buffer, static_cast<size_t>(n));
  }
  close(sock);
  const size_t end = reply.find('\n');
  if (end == std::string::npos) {
    return absl::UnavailableError(absl::StrCat("region socket '", socket_path,
                                               "': no answer within ", timeout_seconds, " s"));
  }
  absl::string_view line(reply.data(), end);
  if (absl::ConsumePrefix(&line, "ticket ")) return std::string(line);
  absl::ConsumePrefix(&line, "error ");
  return absl::FailedPreconditionError(absl::StrCat("region socket: ", line));
}

}  // namespace client
}  // namespace gpupipe
