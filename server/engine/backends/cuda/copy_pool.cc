#include "server/engine/backends/cuda/copy_pool.h"

#include <algorithm>
#include <cstring>

namespace gpupipe::engine {

CopyPool::CopyPool(int threads) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
}

CopyPool::~CopyPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void CopyPool::Loop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

void CopyPool::Copy(void* dst, const void* src, size_t n) {
  const size_t parts =
      std::min<size_t>(threads_.size() + 1, std::max<size_t>(1, n / kMinPartBytes));
  if (parts <= 1) {
    std::memcpy(dst, src, n);
    return;
  }
  // Parts end on 64-byte boundaries so no two threads write one cache line.
  const size_t part = (n / parts + 63) / 64 * 64;
  std::mutex done_mu;
  std::condition_variable done;
  size_t left = 0;
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t begin = part; begin < n; begin += part) {
      const size_t len = std::min(part, n - begin);
      ++left;
      tasks_.push_back([=, &done_mu, &done, &left] {
        std::memcpy(d + begin, s + begin, len);
        std::lock_guard<std::mutex> l(done_mu);
        if (--left == 0) done.notify_one();
      });
    }
  }
  work_.notify_all();
  std::memcpy(d, s, std::min(part, n));
  std::unique_lock<std::mutex> lock(done_mu);
  done.wait(lock, [&] { return left == 0; });
}

}  // namespace gpupipe::engine
