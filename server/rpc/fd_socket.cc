#include "server/rpc/fd_socket.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/poll_deadlines.h"
#include "common/thread_name.h"
#include "server/engine/regions/region.h"

namespace gpupipe::rpc {
namespace {

using Clock = std::chrono::steady_clock;

struct Connection {
  int fd;
  Clock::time_point deadline;
};

absl::Status Errno(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", strerror(errno)));
}

void Reply(int fd, const std::string& line) {
  // A short line into an empty socket buffer: it fits; a peer gone meanwhile gets nothing.
  (void)!send(fd, line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

// Reads the one byte and its descriptor from a readable connection and answers. False while the
// connection has sent nothing yet (keep waiting), true once it is done with.
bool Exchange(int conn, FdTickets* tickets) {
  char byte = 0;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  const ssize_t n = recvmsg(conn, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
  std::vector<int> fds;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      fds.push_back(fd);
    }
  }
  if (n <= 0) {  // closed (or broken) without a word
    for (int fd : fds) close(fd);
    return true;
  }
  if (fds.size() != 1 || (msg.msg_flags & MSG_CTRUNC) != 0) {
    for (int fd : fds) close(fd);
    Reply(conn,
          absl::StrCat("error send exactly one descriptor with the byte (got ", fds.size(), ")\n"));
    return true;
  }
  if (!engine::IsMemoryFile(fds[0])) {
    close(fds[0]);
    Reply(conn,
          "error the descriptor is not a shared-memory object (a memfd, or a file of a tmpfs "
          "such as /dev/shm)\n");
    return true;
  }
  absl::StatusOr<std::string> ticket = tickets->Put(fds[0]);
  Reply(conn, ticket.ok() ? absl::StrCat("ticket ", *ticket, "\n")
                          : absl::StrCat("error ", ticket.status().message(), "\n"));
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<FdSocket>> FdSocket::Listen(const std::string& path,
                                                           FdTickets* tickets, Options options) {
  sockaddr_un address{};
  if (path.empty() || path.size() >= sizeof(address.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("--region-fd-socket: '", path,
                                                   "' is not a socket path (1 to ",
                                                   sizeof(address.sun_path) - 1, " bytes)"));
  }
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat("--region-fd-socket: '", path,
                       "' exists and is not a socket; remove it or pick another"));
    }
    unlink(path.c_str());  // a stale socket of an earlier daemon
  }
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Errno("region socket");
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.data(), path.size());
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      listen(fd, 64) != 0) {
    const absl::Status s = Errno(absl::StrCat("--region-fd-socket: cannot listen on '", path, "'"));
    close(fd);
    return s;
  }
  int wake[2];
  if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    close(fd);
    unlink(path.c_str());
    return Errno("region socket");
  }
  return std::unique_ptr<FdSocket>(new FdSocket(path, fd, wake[0], wake[1], tickets, options));
}

FdSocket::FdSocket(std::string path, int listen_fd, int wake_read, int wake_write,
                   FdTickets* tickets, Options options)
    : path_(std::move(path)),
      listen_fd_(listen_fd),
      wake_read_(wake_read),
      wake_write_(wake_write),
      tickets_(tickets),
      options_(options),
      thread_([this] { Serve(); }) {}

FdSocket::~FdSocket() {
  (void)!write(wake_write_, "x", 1);
  thread_.join();
  close(listen_fd_);
  close(wake_read_);
  close(wake_write_);
  unlink(path_.c_str());
}

void FdSocket::Serve() {
  NameThisThread("gp-region-sock");
  std::vector<Connection> connections;
  std::vector<pollfd> polled;
  while (true) {
    // Close the passed descriptors whose tickets expired, and the connections whose time is
    // up; wake for the next of either.
    const Clock::time_point next_expiry = tickets_->ExpireDue();
    const Clock::time_point now = Clock::now();
    const int wait_ms = CloseExpired(
        connections, now,
        next_expiry == Clock::time_point::max() ? -1 : PollMillisUntil(next_expiry, now));
    polled.assign({pollfd{wake_read_, POLLIN, 0}, pollfd{listen_fd_, POLLIN, 0}});
    for (const Connection& c : connections) polled.push_back(pollfd{c.fd, POLLIN, 0});
    if (poll(polled.data(), polled.size(), wait_ms) < 0 && errno != EINTR) return;
    if (polled[0].revents != 0) return;  // the destructor
    // Serve the connections that have spoken (or hung up).
    std::vector<Connection> open;
    for (size_t i = 0; i < connections.size(); ++i) {
      const Connection& c = connections[i];
      if (polled[i + 2].revents != 0 && Exchange(c.fd, tickets_)) {
        close(c.fd);
      } else {
        open.push_back(c);
      }
    }
    connections.swap(open);
    if ((polled[1].revents & POLLIN) != 0) {
      while (true) {
        const int conn = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (conn < 0) {
          // Out of descriptors: the pending connection stays queued, so pause rather than spin.
          if (errno == EMFILE || errno == ENFILE) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
          }
          break;
        }
        if (static_cast<int>(connections.size()) >= options_.max_connections) {
          close(conn);  // too many at once: this one retries later
          continue;
        }
        connections.push_back(Connection{conn, Clock::now() + options_.timeout});
      }
    }
  }
}

}  // namespace gpupipe::rpc
