// A job's input as the chunk pipeline consumes it: one chunk at a time, in order. Chunk k's
// bytes are a byte range of the input (chunk_plan.h: consecutive ranges may overlap, as a
// split convolve's pieces share their halo) that the pipeline holds from Acquire until
// Release, so a backend may copy from it (or DMA from it, when pinned) while the chunk is in
// flight.
//
// Two kinds: a complete input (the bytes of a Submit request, all present, any number of
// chunks held at once), and a streamed upload (input_ring.h), which lands in a bounded ring of
// chunk buffers and lets the producer write only into buffers the pipeline has released.
//
// Thread safety: implementations are safe for one consumer (the job's lane) beside one
// producer.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpupipe::engine {

// Bytes [begin, end) of a job's input.
struct ByteRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
  bool operator==(const ByteRange& o) const { return begin == o.begin && end == o.end; }
};

// One acquired chunk: `range.size()` bytes at `data`, valid until the chunk is released.
struct InputChunk {
  const char* data = nullptr;
  ByteRange range;
  // Page-locked host memory: a device may copy from it directly.
  bool pinned = false;
  // Memory on the backend's device (a CUDA IPC region): a lane copies it device to device,
  // and nothing on the host may read it.
  bool device = false;
};

class InputSource {
 public:
  virtual ~InputSource() = default;

  // A source whose bytes are all present: `bytes` is moved in. Read-only, so one source may
  // serve several jobs.
  static std::shared_ptr<InputSource> Complete(std::string bytes);

  virtual int64_t size() const = 0;
  // Chunks the consumer may hold at once (acquired, not released). Acquiring one more blocks
  // until the producer fails, so the pipeline keeps its window below this.
  virtual int64_t max_held_chunks() const { return std::numeric_limits<int64_t>::max(); }

  // Whether chunk `k` (bytes `range`) could be acquired now without blocking.
  virtual bool Ready(int64_t k, const ByteRange& range) const = 0;
  // Blocks until chunk `k`'s bytes are present and returns them; chunks are acquired in
  // increasing k. Returns the upload's failure instead if it failed first.
  virtual absl::StatusOr<InputChunk> Acquire(int64_t k, const ByteRange& range) = 0;
  // The consumer is done with chunk `k` and every chunk before it.
  virtual void Release(int64_t k) = 0;
  // The job ends: waiters and the producer learn `status` (not OK) from now on. Idempotent.
  virtual void Fail(absl::Status status) = 0;
};

}  // namespace gpupipe::engine
