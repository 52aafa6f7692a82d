#include "server/engine/backends/cuda/copy_pool.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "common/thread_name.h"

namespace gpupipe::engine {

void StreamingCopy(void* dst, const void* src, size_t n) {
#if defined(__SSE2__)
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  // Up to the destination's next 16-byte boundary with memcpy, then 64 bytes (a cache line) a
  // step with aligned streaming stores, then the tail.
  const size_t head = std::min(n, (16 - reinterpret_cast<uintptr_t>(d) % 16) % 16);
  std::memcpy(d, s, head);
  d += head;
  s += head;
  n -= head;
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
  }
  // Streaming stores are weakly ordered: visible to the device (and to the thread that
  // starts its copy) only after the fence.
  _mm_sfence();
  std::memcpy(d + i, s + i, n - i);
#else
  std::memcpy(dst, src, n);
#endif
}

CopyPool::CopyPool(int threads, bool streaming_stores) : streaming_stores_(streaming_stores) {
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
  NameThisThread("gp-copy");
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

void CopyPool::Pending::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [&] { return left_ == 0; });
}

void CopyPool::Pending::PartDone() {
  std::lock_guard<std::mutex> lock(mu_);
  if (--left_ == 0) {
    finished_ = std::chrono::steady_clock::now();
    done_.notify_all();
  }
}

void CopyPool::CopyPart(void* dst, const void* src, size_t n) const {
  if (streaming_stores_) {
    StreamingCopy(dst, src, n);
  } else {
    std::memcpy(dst, src, n);
  }
}

void CopyPool::Queue(char* dst, const char* src, size_t n, size_t parts, size_t first,
                     Pending* pending) {
  // Parts end on 64-byte boundaries so no two threads write one cache line.
  const size_t part = (n / parts + 63) / 64 * 64;
  {
    std::lock_guard<std::mutex> pending_lock(pending->mu_);
    for (size_t begin = first * part; begin < n; begin += part) ++pending->left_;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t begin = first * part; begin < n; begin += part) {
      const size_t len = std::min(part, n - begin);
      tasks_.push_back([this, dst, src, begin, len, pending] {
        CopyPart(dst + begin, src + begin, len);
        pending->PartDone();
      });
    }
  }
  work_.notify_all();
}

void CopyPool::Copy(void* dst, const void* src, size_t n) {
  const size_t parts =
      std::min<size_t>(threads_.size() + 1, std::max<size_t>(1, n / kMinPartBytes));
  if (parts <= 1) {
    CopyPart(dst, src, n);
    return;
  }
  // The caller copies the first part itself.
  Pending pending;
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  Queue(d, s, n, parts, /*first=*/1, &pending);
  CopyPart(d, s, std::min((n / parts + 63) / 64 * 64, n));
  pending.Wait();
}

void CopyPool::CopyAsync(void* dst, const void* src, size_t n, Pending* pending) {
  const size_t parts =
      std::min<size_t>(threads_.size(), std::max<size_t>(1, n / kMinPartBytes));
  if (threads_.empty() || n == 0) {
    CopyPart(dst, src, n);
    std::lock_guard<std::mutex> lock(pending->mu_);
    pending->finished_ = std::chrono::steady_clock::now();
    return;
  }
  Queue(static_cast<char*>(dst), static_cast<const char*>(src), n, parts, /*first=*/0, pending);
}

}  // namespace gpupipe::engine
