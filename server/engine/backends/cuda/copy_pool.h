// Host memory copies split over a few threads. One thread's memcpy into pinned staging runs
// at a fraction of PCIe 5 bandwidth, so a chunk pipeline that stages its input with one memcpy
// is bound by the host copy rather than by the DMA; splitting the copy restores the overlap.
//
// Thread safety: Copy and CopyAsync may be called from any number of threads at once.
#pragma once

#include <chrono>
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

  // A copy started by CopyAsync.
  class Pending {
   public:
    Pending() = default;
    Pending(const Pending&) = delete;
    Pending& operator=(const Pending&) = delete;
    // Returns once every part is copied (at once for a copy never started).
    void Wait();
    // When the last part was copied; valid after Wait.
    std::chrono::steady_clock::time_point finished() const { return finished_; }

   private:
    friend class CopyPool;
    void PartDone();
    std::mutex mu_;
    std::condition_variable done_;
    size_t left_ = 0;
    std::chrono::steady_clock::time_point finished_;
  };

  // memcpy(dst, src, n), in parts of at least kMinPartBytes on the helpers and the caller;
  // returns when every part is copied.
  void Copy(void* dst, const void* src, size_t n);
  // The same on the helpers only, returning at once (with no helpers it copies first);
  // `pending` says when it is done and must be waited for before it, `dst` or `src` go.
  void CopyAsync(void* dst, const void* src, size_t n, Pending* pending);

  static constexpr size_t kMinPartBytes = size_t{1} << 20;

 private:
  void Loop();
  // Queues the parts of a copy of `n` bytes in `parts` parts from the `first`th on.
  void Queue(char* dst, const char* src, size_t n, size_t parts, size_t first, Pending* pending);
  void CopyPart(void* dst, const void* src, size_t n) const;

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
