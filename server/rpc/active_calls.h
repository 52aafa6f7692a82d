// The job service's calls in progress, so that a shutdown can wait for every accepted job's
// last events to reach its client before the server stops: gRPC's own Server::Shutdown also
// waits for clients to close their connections, which a client may take seconds to do.
//
// Thread safety: all methods may be called from any thread.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>

namespace gpupipe::rpc {

class ActiveCalls {
 public:
  void Begin() {
    std::lock_guard<std::mutex> lock(mu_);
    ++calls_;
    last_begin_ = std::chrono::steady_clock::now();
  }
  void End() {
    std::lock_guard<std::mutex> lock(mu_);
    if (--calls_ == 0) idle_.notify_all();
  }
  // Waits until no call is in progress and none began for `quiet`, or `deadline` passes; true
  // when none is in progress.
  bool WaitIdle(std::chrono::steady_clock::time_point deadline,
                std::chrono::steady_clock::duration quiet = {}) {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      const auto now = std::chrono::steady_clock::now();
      const auto quiet_at = last_begin_ + quiet;
      if (calls_ == 0 && now >= quiet_at) return true;
      if (now >= deadline) return calls_ == 0;
      idle_.wait_until(lock, calls_ == 0 ? std::min(quiet_at, deadline) : deadline);
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable idle_;
  int calls_ = 0;
  std::chrono::steady_clock::time_point last_begin_;
};

}  // namespace gpupipe::rpc
