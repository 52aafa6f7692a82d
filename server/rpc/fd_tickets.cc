#include "server/rpc/fd_tickets.h"

#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/random_id.h"

namespace gpupipe::rpc {

FdTickets::~FdTickets() {
  for (const auto& [ticket, pending] : pending_) close(pending.fd);
}

absl::StatusOr<std::string> FdTickets::Put(int fd) {
  std::string ticket = RandomHex128();
  std::lock_guard<std::mutex> lock(mu_);
  const Clock::time_point now = Clock::now();
  ExpireLocked(now);
  if (pending_.size() >= max_pending_) {
    close(fd);
    return absl::ResourceExhaustedError(
        absl::StrCat(max_pending_,
                     " passed descriptors wait for their RegisterRegion already; register or "
                     "wait for them to expire (",
                     ttl_.count() / 1000.0, " s)"));
  }
  pending_[ticket] = Pending{fd, now + ttl_};
  return ticket;
}

absl::StatusOr<int> FdTickets::Take(const std::string& ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  ExpireLocked(Clock::now());
  auto it = pending_.find(ticket);
  if (it == pending_.end()) {
    return absl::NotFoundError(
        absl::StrCat("fd_ticket: no descriptor waits under this ticket (each is good once, for ",
                     ttl_.count() / 1000.0, " s after the descriptor was passed)"));
  }
  const int fd = it->second.fd;
  pending_.erase(it);
  return fd;
}

size_t FdTickets::pending() {
  std::lock_guard<std::mutex> lock(mu_);
  ExpireLocked(Clock::now());
  return pending_.size();
}

FdTickets::Clock::time_point FdTickets::ExpireDue() {
  std::lock_guard<std::mutex> lock(mu_);
  ExpireLocked(Clock::now());
  Clock::time_point next = Clock::time_point::max();
  for (const auto& [ticket, pending] : pending_) next = std::min(next, pending.expires);
  return next;
}

void FdTickets::ExpireLocked(Clock::time_point now) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->second.expires <= now) {
      close(it->second.fd);
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace gpupipe::rpc
