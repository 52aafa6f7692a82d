// The region socket: a Unix-domain stream socket where a process of this host passes the daemon
// a descriptor of a shared-memory object it made (a memfd, which has no name to shm_open), and
// gets back the ticket under which a RegisterRegion call (fd_ticket) takes it (fd_tickets.h).
//
// One exchange per connection: the client sends one byte with the descriptor attached
// (SCM_RIGHTS); the daemon answers one line, "ticket <32 hex digits>\n" or "error <why>\n", and
// closes. The socket file's permissions are the access control (it is made with the daemon's
// umask; put it where only trusted users reach it, as the gRPC Unix socket). Liveness against
// hostile local clients: one thread serves every connection without blocking, a connection that
// has not sent its descriptor within `timeout` is dropped, and at most `max_connections` are
// open at once (more are closed as they are accepted).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "server/rpc/fd_tickets.h"

namespace gpupipe::rpc {

class FdSocket {
 public:
  struct Options {
    std::chrono::milliseconds timeout{2000};
    int max_connections = 16;
  };
  // Listens on `path` (a stale socket file there is replaced; any other file is an error) and
  // puts every descriptor passed into `tickets`, which must outlive this.
  static absl::StatusOr<std::unique_ptr<FdSocket>> Listen(const std::string& path,
                                                          FdTickets* tickets, Options options);
  ~FdSocket();  // stops serving, closes the socket and removes its file
  FdSocket(const FdSocket&) = delete;
  FdSocket& operator=(const FdSocket&) = delete;

  const std::string& path() const { return path_; }

 private:
  FdSocket(std::string path, int listen_fd, int wake_read, int wake_write, FdTickets* tickets,
           Options options);
  void Serve();

  const std::string path_;
  const int listen_fd_;
  const int wake_read_;
  const int wake_write_;
  FdTickets* const tickets_;
  const Options options_;
  std::thread thread_;
};

}  // namespace gpupipe::rpc
