// Host memory copies split over a few threads. One thread's memcpy into pinned staging runs
// at a fraction of PCIe 5 bandwidth, so a chunk pipeline that stages its input with one memcpy
// is bound by the host copy rather than by the DMA; splitting the copy restores the overlap.
//
// Thread safety: Copy may be called from any number of threads at once.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace gpupipe::engine {

class CopyPool {
 public:
  // `threads` helpers (0: every copy runs on the caller). `streaming_stores`: write the
  // destination with non-temporal stores (see StreamingCopy).
  explicit CopyPool(int threads, bool streaming_stores = true);
  ~CopyPool();
  CopyPool(const CopyPool&) = delete;
  CopyPool& operator=(const CopyPool&) = delete;

  // memcpy(dst, src, n), in parts of at least kMinPartBytes on the helpers and the caller;
  // returns when every part is copied.
  void Copy(void* dst, const void* src, size_t n);

  static constexpr size_t kMinPartBytes = size_t{1} << 20;

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable work_;
  std::deque<std::function<void()>> tasks_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
  const bool streaming_stores_;
};

// memcpy with non-temporal stores where the CPU has them (x86-64), plain memcpy elsewhere. For
// a destination that a device reads next (pinned staging), not this CPU: writing around the
// cache saves the read of every destination line that a cached store makes first, a third of
// a copy's memory traffic. The stores are fenced before it returns.
void StreamingCopy(void* dst, const void* src, size_t n);

}  // namespace gpupipe::engine
