// The job service's calls in progress, so that a shutdown can wait for every accepted job's
// last events to reach its client before the server stops: gRPC's own Server::Shutdown also
// waits for clients to close their connections, which a client may take seconds to do.
//
// Thread safety: all methods may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace gpupipe::rpc {

class ActiveCalls {
 public:
  void Begin() {
    std::lock_guard<std::mutex> lock(mu_);
    ++calls_;
  }
  void End() {
    std::lock_guard<std::mutex> lock(mu_);
    if (--calls_ == 0) idle_.notify_all();
  }
  // Waits until no call is in progress or `deadline` passes; true when none is.
  bool WaitIdle(std::chrono::steady_clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    return idle_.wait_until(lock, deadline, [&] { return calls_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable idle_;
  int calls_ = 0;
};

}  // namespace gpupipe::rpc
