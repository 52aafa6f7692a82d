// Results the service holds for clients that have not read them yet: the result bytes of the
// calls whose jobs are done, from the job's end until the client has them (their write
// completed) or the call is over. A job stops counting against the engine's admission limits
// once it is done, but its result stays in server memory until its client reads it, and a
// client that opens calls and never reads (a zero flow-control window) could otherwise pile up
// finished results until each call's reader idle timeout. (A running job's results are bounded
// by its call's event queue and by --max-client-jobs.) So a client that holds
// `max_client_bytes` or more unread may not start another job, nor may a client that holds any
// while all clients together hold `max_bytes` or more: RESOURCE_EXHAUSTED naming the flag,
// before the job is accepted. A client that holds nothing unread is not refused for others'
// results. Jobs already accepted still deliver, so the bound is the limit plus what the
// client's jobs in flight (gpupiped --max-client-jobs) produce.
//
// Thread safety: every method may be called from any thread (one mutex; it calls nothing).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"

namespace gpupipe::rpc {

struct UnreadLimits {
  int64_t max_bytes = int64_t{1} << 30;          // gpupiped --max-unread-mib
  int64_t max_client_bytes = int64_t{256} << 20;  // gpupiped --max-client-unread-mib
};

class UnreadResults {
 public:
  explicit UnreadResults(UnreadLimits limits = {}) : limits_(limits) {}
  UnreadResults(const UnreadResults&) = delete;
  UnreadResults& operator=(const UnreadResults&) = delete;

  const UnreadLimits& limits() const { return limits_; }

  // OK when `client` may start a job now; RESOURCE_EXHAUSTED naming the limit otherwise.
  absl::Status Check(const std::string& client) const;
  // `bytes` of `client`'s results are now held, or no longer held.
  void Hold(const std::string& client, int64_t bytes);
  void Release(const std::string& client, int64_t bytes);

  int64_t total_bytes() const;
  // Clients holding unread results, with their bytes.
  std::vector<std::pair<std::string, int64_t>> clients() const;

 private:
  const UnreadLimits limits_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, int64_t> clients_;  // only clients holding bytes
  int64_t total_ = 0;
};

}  // namespace gpupipe::rpc
