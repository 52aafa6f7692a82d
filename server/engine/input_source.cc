#include "server/engine/input_source.h"

#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"

namespace gpupipe::engine {

std::shared_ptr<InputSource> InputSource::Complete(std::string bytes) {
  const auto n = static_cast<int64_t>(bytes.size());
  return std::shared_ptr<InputSource>(new InputSource(std::move(bytes), n));
}

std::shared_ptr<InputSource> InputSource::Streaming(int64_t size) {
  // Left uninitialized: Append writes every byte before a reader may see it, and zero-filling
  // gigabytes would hold up the RPC reaction that accepts the spec.
  char* data = new char[static_cast<size_t>(size > 0 ? size : 1)];
  return Streaming(size, data, /*pinned=*/false, [data] { delete[] data; });
}

std::shared_ptr<InputSource> InputSource::Streaming(int64_t size, char* data, bool pinned,
                                                    std::function<void()> release) {
  return std::shared_ptr<InputSource>(new InputSource(size, data, pinned, std::move(release)));
}

InputSource::InputSource(std::string buffer, int64_t available)
    : size_(static_cast<int64_t>(buffer.size())), buffer_(std::move(buffer)),
      data_(buffer_.data()), pinned_(false), available_(available) {}

InputSource::InputSource(int64_t size, char* data, bool pinned, std::function<void()> release)
    : size_(size), data_(data), pinned_(pinned), release_(std::move(release)) {}

InputSource::~InputSource() {
  if (release_) release_();
}

absl::StatusOr<const char*> InputSource::WaitForBytes(int64_t bytes) {
  if (bytes < 0 || bytes > size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("asked for ", bytes, " input bytes of ", size_));
  }
  std::unique_lock<std::mutex> lock(mu_);
  arrived_.wait(lock, [&] { return available_ >= bytes || !failure_.ok(); });
  if (available_ >= bytes) return static_cast<const char*>(data_);
  return failure_;
}

int64_t InputSource::available() const {
  std::lock_guard<std::mutex> lock(mu_);
  return available_;
}

absl::Status InputSource::Append(const char* data, int64_t n) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!failure_.ok()) return failure_;
  if (n < 0 || n > size_ - available_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input: ", available_ + n, " bytes sent, but the shape and dtype give ", size_));
  }
  // Only the producer writes past available_, and readers never look there, so the copy can
  // run unlocked.
  char* dst = data_ + available_;
  lock.unlock();
  if (n > 0) std::memcpy(dst, data, static_cast<size_t>(n));
  lock.lock();
  available_ += n;
  lock.unlock();
  arrived_.notify_all();
  return absl::OkStatus();
}

void InputSource::Fail(absl::Status status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_.ok() || status.ok()) return;
    failure_ = std::move(status);
  }
  arrived_.notify_all();
}

absl::Status InputSource::failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

}  // namespace gpupipe::engine
