// Descriptors that local processes passed the daemon over its region socket (fd_socket.h),
// each waiting under a random ticket until a RegisterRegion call with that ticket takes it.
// The ticket is the capability: 128 random bits, good once and for `ttl`. At most
// `max_pending` descriptors wait at once, so a client that passes descriptors and never
// registers them holds a bounded number of the daemon's files, each for a bounded time
// (ExpireDue closes them on time).
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"

namespace gpupipe::rpc {

class FdTickets {
 public:
  using Clock = std::chrono::steady_clock;
  FdTickets(size_t max_pending, std::chrono::milliseconds ttl)
      : max_pending_(max_pending), ttl_(ttl) {}
  ~FdTickets();  // closes the descriptors still waiting
  FdTickets(const FdTickets&) = delete;
  FdTickets& operator=(const FdTickets&) = delete;

  // Takes `fd` and answers its ticket (32 hex digits); RESOURCE_EXHAUSTED (and `fd` closed)
  // when max_pending descriptors wait already.
  absl::StatusOr<std::string> Put(int fd);
  // The descriptor of `ticket`, now the caller's; NOT_FOUND for a ticket unknown, taken
  // already or expired.
  absl::StatusOr<int> Take(const std::string& ticket);
  size_t pending();
  // Closes the descriptors whose time is up, and answers when the next one's is
  // (Clock::time_point::max() for none). The region socket calls it as it serves, so that a
  // descriptor nobody asks for is closed when its ticket expires, not at the next Put or Take.
  Clock::time_point ExpireDue();

 private:
  struct Pending {
    int fd;
    Clock::time_point expires;
  };
  // Closes the descriptors whose time is up. Called with mu_ held.
  void ExpireLocked(Clock::time_point now);

  const size_t max_pending_;
  const std::chrono::milliseconds ttl_;
  std::mutex mu_;
  std::map<std::string, Pending> pending_;
};

}  // namespace gpupipe::rpc
