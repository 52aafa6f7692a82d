// A job's input bytes, which may still be arriving while the job runs (the streaming upload
// RPC). The total size is known up front, from the spec's shape and dtype; the bytes fill one
// contiguous host buffer front to back, so a backend can start on the first chunks while later
// ones are on the wire.
//
// Thread safety: one producer (Append/Finish/Fail) and any number of consumers (WaitForBytes)
// may use a source concurrently.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpupipe::engine {

class InputSource {
 public:
  // A source whose bytes are all present: `bytes` is moved in.
  static std::shared_ptr<InputSource> Complete(std::string bytes);
  // A source of `size` bytes that Append fills; allocates the (uninitialized) buffer at once.
  static std::shared_ptr<InputSource> Streaming(int64_t size);
  // A source of `size` bytes that Append fills, in a buffer the caller lends: `data` holds
  // `size` bytes and stays valid until `release` runs (when the source is destroyed).
  // `pinned`: the buffer is page-locked host memory, which a device may copy from directly
  // (the CUDA backend then skips its staging copy).
  static std::shared_ptr<InputSource> Streaming(int64_t size, char* data, bool pinned,
                                                std::function<void()> release);
  ~InputSource();
  InputSource(const InputSource&) = delete;
  InputSource& operator=(const InputSource&) = delete;

  int64_t size() const { return size_; }
  bool pinned() const { return pinned_; }

  // Blocks until the first `bytes` bytes (0 <= bytes <= size()) are present, then returns the
  // start of the buffer: data()[0, bytes) never changes afterwards and stays valid for the
  // source's lifetime. Returns the failure instead if the upload failed first (Fail).
  absl::StatusOr<const char*> WaitForBytes(int64_t bytes);
  // Bytes present so far, without blocking.
  int64_t available() const;
  // True once every byte is present.
  bool complete() const { return available() == size_; }

  // Producer side. Append copies `n` bytes after the ones present; INVALID_ARGUMENT (and
  // nothing copied) if they would exceed size(). Fail wakes every waiter with `status` (not OK);
  // later Appends fail with it.
  absl::Status Append(const char* data, int64_t n);
  void Fail(absl::Status status);
  // The failure, if any (OK otherwise).
  absl::Status failure() const;

 private:
  InputSource(std::string buffer, int64_t available);
  InputSource(int64_t size, char* data, bool pinned, std::function<void()> release);

  const int64_t size_;
  std::string buffer_;  // owned bytes (Complete)
  char* const data_;    // buffer_.data(), or the lent buffer
  const bool pinned_;
  std::function<void()> release_;
  mutable std::mutex mu_;
  std::condition_variable arrived_;
  int64_t available_ = 0;
  absl::Status failure_;
};

}  // namespace gpupipe::engine
