// Request limits the engine enforces. Defaults suit one GPU node; the daemon's flags override.
#pragma once

#include <cstdint>

namespace gpupipe::engine {

// How a job's input reaches the engine, which selects the input size limit that applies.
enum class InputPath {
  kInline,    // in the request message (Submit): Limits::max_input_bytes
  kStreamed,  // uploaded in chunks (Run): Limits::max_stream_input_bytes
  kRegion,    // read from a registered region: Limits::max_region_input_bytes
};

struct Limits {
  // Largest input of a job whose bytes arrive in one message (Submit).
  int64_t max_input_bytes = int64_t{64} << 20;
  // Largest input of a job whose bytes are streamed in chunks (Run): larger, since no single
  // message holds it.
  int64_t max_stream_input_bytes = int64_t{4} << 30;
  // Largest input read from a registered region, and largest result of such a job: what one
  // region may hold (the daemon sets it from its region limits).
  int64_t max_region_input_bytes = int64_t{16} << 30;
  int max_ops = 64;
  int max_rank = 8;
  // Largest result chunk in one event: 1 MiB less room for the event's other fields, so every
  // message stays under 1 MiB.
  int64_t max_chunk_bytes = (int64_t{1} << 20) - 4096;
  int max_client_tag_bytes = 128;
  // A streamed upload lands in a ring of chunk buffers of at most this many bytes (at least one
  // chunk: a job whose chunk is larger is RESOURCE_EXHAUSTED), taken from a pool of
  // input_ring_total_bytes shared by every upload in progress (page-locked on the CUDA backend,
  // allocated at start). An upload that finds no room in the pool is RESOURCE_EXHAUSTED.
  int64_t input_ring_bytes = int64_t{64} << 20;
  int64_t input_ring_total_bytes = int64_t{512} << 20;
  // A running job whose upload has room in its ring but sends nothing for this long ends with
  // DEADLINE_EXCEEDED and frees its lane (0: no limit).
  int64_t upload_idle_timeout_ms = 30000;
  // A job's estimated work (planning/step_work.h, in element operations) may be at most this
  // many per byte of its input and output, beyond an allowance every job has
  // (kWorkAllowance): a request that is cheap to send and costly to run, such as a chain of
  // long convolutions over a few bytes, is refused with RESOURCE_EXHAUSTED instead of holding
  // a lane for minutes. 0: no limit.
  int64_t max_work_per_byte = 4096;
};

}  // namespace gpupipe::engine
