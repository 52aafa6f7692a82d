// A streamed upload's landing place: a bounded ring of chunk buffers. Chunk k of the job's
// layout lands in buffer k % buffers(), whole (a chunk's bytes are always contiguous, also where
// consecutive chunks overlap: the overlap is copied into the next buffer), and the producer
// writes into a buffer only once the pipeline has released the chunk that used it before. So a
// job's upload holds at most buffers() x buffer_bytes() of memory whatever its size, a fast
// client waits on the job, and a slow one holds only its ring.
//
// The producer (the Run RPC) never blocks: Write takes what fits and, when the ring is full,
// arranges a callback for when there is room, so the RPC reads the client's next message only
// then (and gRPC's flow control holds the client back meanwhile).
//
// Liveness: a consumer that waits for bytes while the producer has room but sends nothing for
// `idle_timeout` fails the ring with DEADLINE_EXCEEDED, so a stalled upload cannot hold its
// job's lane for ever. The idle clock restarts whenever the producer is given room again, so
// time the producer spent waiting on a full ring never counts against it.
//
// Thread safety: one producer and one consumer may use a ring concurrently; every method may
// be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "server/engine/pipeline/input_source.h"

namespace gpupipe::engine {

class InputRing final : public InputSource {
 public:
  // Chunk k's input bytes, for 0 <= k < chunk_count; non-decreasing in both ends, and each
  // chunk overlaps at most the one before it.
  using RangeOf = std::function<ByteRange(int64_t k)>;

  // A ring over `memory` (buffers x buffer_bytes bytes, page-locked when `pinned`), which
  // `release_memory` returns when the ring is destroyed. Every chunk must fit a buffer.
  // `idle_timeout` of zero: no limit.
  InputRing(int64_t size, int64_t chunk_count, RangeOf range_of, char* memory, int64_t buffers,
            int64_t buffer_bytes, bool pinned, std::function<void()> release_memory,
            std::chrono::milliseconds idle_timeout = std::chrono::milliseconds(0));
  ~InputRing() override;
  InputRing(const InputRing&) = delete;
  InputRing& operator=(const InputRing&) = delete;

  int64_t buffers() const { return buffers_; }
  int64_t buffer_bytes() const { return buffer_bytes_; }
  // The buffers are page-locked: the device copies chunks straight from them.
  bool pinned_memory() const { return pinned_; }

  // ---- consumer (InputSource) ----
  int64_t size() const override { return size_; }
  int64_t max_held_chunks() const override { return buffers_; }
  bool Ready(int64_t k, const ByteRange& range) const override;
  absl::StatusOr<InputChunk> Acquire(int64_t k, const ByteRange& range) override;
  void Release(int64_t k) override;
  void Fail(absl::Status status) override;

  // ---- producer ----
  // Copies up to `n` of the next input bytes and returns how many it took. Fewer than `n`
  // means the ring is full: `on_room` is then called once, from whichever thread frees a
  // buffer (or fails the ring), and the producer writes the rest from there. INVALID_ARGUMENT
  // (nothing taken) for bytes beyond size(); the ring's failure once it failed.
  absl::StatusOr<int64_t> Write(const char* data, int64_t n, std::function<void()> on_room);
  // The producer goes away: a pending `on_room` is dropped, one that is running has returned
  // when this does (unless called from inside it), and later Writes register none.
  void ForgetRoomCallback();
  int64_t received() const;
  bool complete() const { return received() == size_; }
  absl::Status failure() const;

 private:
  char* buffer(int64_t k) const { return memory_ + (k % buffers_) * buffer_bytes_; }
  // Whether chunk k's buffer no longer holds an unreleased chunk. Called with mu_ held.
  bool BufferFree(int64_t k) const { return k - buffers_ < released_; }
  // Moves the fill position to the next chunk once the current one is whole, keeping the
  // overlap with the next chunk in carry_. Called with mu_ held.
  void AdvanceFilled();
  // Calls and clears the room callback. Called with `lock` held; releases it.
  void NotifyRoom(std::unique_lock<std::mutex> lock);

  const int64_t size_;
  const int64_t chunk_count_;
  const RangeOf range_of_;
  char* const memory_;
  const int64_t buffers_;
  const int64_t buffer_bytes_;
  const bool pinned_;
  std::function<void()> release_memory_;
  const std::chrono::milliseconds idle_timeout_;

  mutable std::mutex mu_;
  std::condition_variable arrived_;
  std::condition_variable callback_done_;
  int64_t received_ = 0;    // input bytes taken from the producer
  // When the producer last wrote bytes or was given room again (the idle clock's start).
  std::chrono::steady_clock::time_point active_at_ = std::chrono::steady_clock::now();
  int64_t filling_ = 0;     // the chunk the producer writes into
  ByteRange fill_range_;    // its bytes
  int64_t fill_bytes_ = 0;  // of them, in its buffer so far
  std::string carry_;       // bytes the chunk being filled shares with the previous one
  int64_t complete_ = 0;    // chunks [0, complete_) are whole
  int64_t released_ = 0;    // chunks [0, released_) are released
  absl::Status failure_;
  std::function<void()> on_room_;
  bool producer_gone_ = false;  // ForgetRoomCallback was called
  bool calling_ = false;  // on_room_ runs now, on `caller_`
  std::thread::id caller_;
};

// For producers in the engine's own process (benchmarks, tests): writes all `n` bytes into
// `ring` from the calling thread, blocking while the ring is full. Returns the ring's failure,
// or INVALID_ARGUMENT for bytes beyond its size.
absl::Status WriteAll(InputRing& ring, const char* data, int64_t n);
inline absl::Status WriteAll(InputRing& ring, const std::string& bytes) {
  return WriteAll(ring, bytes.data(), static_cast<int64_t>(bytes.size()));
}

}  // namespace gpupipe::engine
