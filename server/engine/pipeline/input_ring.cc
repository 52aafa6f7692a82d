#include "server/engine/pipeline/input_ring.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace gpupipe::engine {

InputRing::InputRing(int64_t size, int64_t chunk_count, RangeOf range_of, char* memory,
                     int64_t buffers, int64_t buffer_bytes, bool pinned,
                     std::function<void()> release_memory, std::chrono::milliseconds idle_timeout)
    : size_(size),
      chunk_count_(chunk_count),
      range_of_(std::move(range_of)),
      memory_(memory),
      buffers_(std::max<int64_t>(1, buffers)),
      buffer_bytes_(buffer_bytes),
      pinned_(pinned),
      release_memory_(std::move(release_memory)),
      idle_timeout_(idle_timeout) {
  if (chunk_count_ > 0) fill_range_ = range_of_(0);
  AdvanceFilled();  // chunks of no bytes are whole at once
}

InputRing::~InputRing() {
  if (release_memory_) release_memory_();
}

bool InputRing::Ready(int64_t k, const ByteRange&) const {
  std::lock_guard<std::mutex> lock(mu_);
  return k < complete_ || !failure_.ok();
}

absl::StatusOr<InputChunk> InputRing::Acquire(int64_t k, const ByteRange& range) {
  if (k < 0 || k >= chunk_count_) {
    return absl::InternalError(absl::StrCat("input chunk ", k, " of ", chunk_count_));
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (k - buffers_ >= released_) {
    return absl::InternalError(absl::StrCat("input chunk ", k, " acquired while chunk ",
                                            k - buffers_, " holds its buffer"));
  }
  const auto ready = [&] { return k < complete_ || !failure_.ok(); };
  while (!ready()) {
    if (idle_timeout_.count() <= 0) {
      arrived_.wait(lock, ready);
      break;
    }
    const auto deadline = active_at_ + idle_timeout_;
    if (arrived_.wait_until(lock, deadline, ready)) break;
    // The producer may have been given room meanwhile (which restarts the clock): only a
    // deadline that still stands is one.
    if (std::chrono::steady_clock::now() >= active_at_ + idle_timeout_) {
      failure_ = absl::DeadlineExceededError(absl::StrCat(
          "input: the upload sent no bytes for ", idle_timeout_.count() / 1000.0,
          " s after ", received_, " of ", size_,
          " bytes (gpupiped --upload-idle-timeout-seconds)"));
      arrived_.notify_all();
    }
  }
  if (!failure_.ok()) return failure_;
  const ByteRange own = range_of_(k);
  if (!(own == range)) {
    return absl::InternalError(absl::StrCat("input chunk ", k, ": asked for [", range.begin,
                                            ", ", range.end, "), the ring holds [", own.begin,
                                            ", ", own.end, ")"));
  }
  return InputChunk{buffer(k), own, pinned_};
}

void InputRing::Release(int64_t k) {
  std::unique_lock<std::mutex> lock(mu_);
  if (k + 1 <= released_) return;
  released_ = k + 1;
  NotifyRoom(std::move(lock));
}

void InputRing::Fail(absl::Status status) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!failure_.ok() || status.ok()) return;
  failure_ = std::move(status);
  arrived_.notify_all();
  NotifyRoom(std::move(lock));
}

void InputRing::AdvanceFilled() {
  while (filling_ < chunk_count_ && fill_bytes_ == fill_range_.size()) {
    ++complete_;
    arrived_.notify_all();
    const int64_t next = filling_ + 1;
    carry_.clear();
    if (next < chunk_count_) {
      const ByteRange r = range_of_(next);
      if (r.begin < fill_range_.end) {
        // The next chunk starts inside this one (a convolve piece's halo): it needs those
        // bytes in its own buffer, and this buffer may be reused before that one is free.
        const int64_t from = std::max(r.begin, fill_range_.begin);
        carry_.assign(buffer(filling_) + (from - fill_range_.begin),
                      static_cast<size_t>(std::min(r.end, fill_range_.end) - from));
      }
      fill_range_ = r;
    }
    filling_ = next;
    fill_bytes_ = 0;
    if (filling_ < chunk_count_ && !carry_.empty() && BufferFree(filling_)) {
      std::memcpy(buffer(filling_), carry_.data(), carry_.size());
      fill_bytes_ = static_cast<int64_t>(carry_.size());
      carry_.clear();
    }
  }
}

absl::StatusOr<int64_t> InputRing::Write(const char* data, int64_t n,
                                         std::function<void()> on_room) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!failure_.ok()) return failure_;
  if (n < 0 || n > size_ - received_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input: ", received_ + n, " bytes sent, but the shape and dtype give ", size_));
  }
  int64_t taken = 0;
  while (taken < n && filling_ < chunk_count_) {
    if (!BufferFree(filling_)) break;
    if (!carry_.empty()) {
      std::memcpy(buffer(filling_), carry_.data(), carry_.size());
      fill_bytes_ = static_cast<int64_t>(carry_.size());
      carry_.clear();
    }
    const int64_t at = fill_range_.begin + fill_bytes_;  // the chunk's next byte
    if (received_ < at) {
      // Bytes no chunk reads (none in today's layouts): skip them.
      const int64_t skip = std::min(n - taken, at - received_);
      received_ += skip;
      taken += skip;
      continue;
    }
    const int64_t len = std::min(n - taken, fill_range_.end - received_);
    // Only the producer writes into a buffer that is not whole, and the consumer reads only
    // whole ones, so the copy can run unlocked.
    char* dst = buffer(filling_) + fill_bytes_;
    lock.unlock();
    std::memcpy(dst, data + taken, static_cast<size_t>(len));
    lock.lock();
    received_ += len;
    taken += len;
    fill_bytes_ += len;
    active_at_ = std::chrono::steady_clock::now();
    AdvanceFilled();
  }
  if (filling_ >= chunk_count_ && taken < n) {
    // Trailing bytes no chunk reads.
    received_ += n - taken;
    taken = n;
  }
  if (taken < n && !producer_gone_) on_room_ = std::move(on_room);
  return taken;
}

void InputRing::NotifyRoom(std::unique_lock<std::mutex> lock) {
  if (!on_room_ || (failure_.ok() && filling_ < chunk_count_ && !BufferFree(filling_))) return;
  active_at_ = std::chrono::steady_clock::now();  // the producer may write again
  std::function<void()> callback = std::move(on_room_);
  on_room_ = nullptr;
  calling_ = true;
  caller_ = std::this_thread::get_id();
  lock.unlock();
  callback();
  lock.lock();
  calling_ = false;
  callback_done_.notify_all();
}

void InputRing::ForgetRoomCallback() {
  std::unique_lock<std::mutex> lock(mu_);
  // A callback running now may call Write again: it must not leave a new one behind.
  producer_gone_ = true;
  on_room_ = nullptr;
  if (calling_ && caller_ != std::this_thread::get_id()) {
    callback_done_.wait(lock, [&] { return !calling_; });
  }
}

int64_t InputRing::received() const {
  std::lock_guard<std::mutex> lock(mu_);
  return received_;
}

absl::Status InputRing::failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

absl::Status WriteAll(InputRing& ring, const char* data, int64_t n) {
  std::mutex mu;
  std::condition_variable cv;
  bool room = false;
  while (n > 0) {
    {
      std::lock_guard<std::mutex> lock(mu);
      room = false;
    }
    // The callback runs only while this loop waits for it below.
    absl::StatusOr<int64_t> taken = ring.Write(data, n, [&] {
      std::lock_guard<std::mutex> lock(mu);
      room = true;
      cv.notify_all();
    });
    if (!taken.ok()) return taken.status();
    data += *taken;
    n -= *taken;
    if (n > 0) {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return room; });
    }
  }
  return absl::OkStatus();
}

}  // namespace gpupipe::engine
