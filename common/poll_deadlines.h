// The deadline sweep of a poll loop whose connections each have a deadline: the daemon's small
// socket servers (the region socket, the metrics endpoint) run it before every poll, so that a
// connection past its time is closed and the poll wakes for the next deadline.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>

namespace gpupipe {

// Milliseconds from `now` until `until` for poll's timeout: rounded up, 0 once it has passed,
// INT_MAX at most.
inline int PollMillisUntil(std::chrono::steady_clock::time_point until,
                           std::chrono::steady_clock::time_point now) {
  if (until <= now) return 0;
  const int64_t ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count() + 1;
  return static_cast<int>(std::min<int64_t>(ms, INT_MAX));
}

// Closes and erases the entries of `connections` (each with an `int fd` and a steady_clock
// `deadline`) whose deadline is `now` or earlier, and returns poll's timeout until the earliest
// deadline left, `wait_ms` at most (-1: no bound of its own).
template <typename Connections>
int CloseExpired(Connections& connections, std::chrono::steady_clock::time_point now,
                 int wait_ms) {
  for (auto it = connections.begin(); it != connections.end();) {
    if (it->deadline <= now) {
      close(it->fd);
      it = connections.erase(it);
      continue;
    }
    const int left = PollMillisUntil(it->deadline, now);
    wait_ms = wait_ms < 0 ? left : std::min(wait_ms, left);
    ++it;
  }
  return wait_ms;
}

}  // namespace gpupipe
