// The backend seam: what runs a planned job on some hardware. The engine owns scheduling and
// the job's lifecycle; a backend owns its lanes (streams and buffers) and runs one job per lane
// at a time. Engine tests run against the CPU backend, so they need no GPU.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/engine/input_source.h"
#include "server/engine/plan.h"
#include "server/engine/job_sink.h"
#include "server/engine/types.h"

namespace gpupipe::engine {

struct PriorityLevel {
  Priority priority;
  int device_priority;  // as given to cudaStreamCreateWithPriority; 0 on the CPU
  int lanes;
};

struct DeviceDescription {
  std::string name;
  int ordinal = 0;
  int multiprocessors = 0;
  int64_t memory_bytes = 0;
  std::string compute_capability;
  int least_stream_priority = 0;
  int greatest_stream_priority = 0;
  std::string driver_version;
  std::string runtime_version;
};

struct GraphCacheStats {
  int64_t hits = 0;
  int64_t updates = 0;
  int64_t misses = 0;
  int64_t evictions = 0;
  int entries = 0;
  int capacity = 0;
};

// Hands result bytes to the sink in chunks of at most `max_chunk_bytes`; returns false as soon
// as the sink reports the reader gone.
using ChunkEmitter = std::function<bool(int64_t offset, const char* data, int64_t size)>;

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;  // "cuda" or "cpu"
  virtual std::optional<DeviceDescription> device() const = 0;
  // Lanes per API priority level; lane indices are 0..lanes-1 within a level.
  virtual std::vector<PriorityLevel> levels() const = 0;
  // Human-readable name of a lane, e.g. "high/0 (device priority -5)".
  virtual std::string LaneName(Priority priority, int lane) const = 0;
  virtual std::vector<Staging> stagings() const = 0;
  virtual std::vector<LaunchMode> launch_modes() const = 0;

  // INVALID_ARGUMENT when this backend cannot run the job's launch options as asked.
  absl::Status CheckOptions(const JobSpec& spec) const;

  // The kernels `plan` becomes on this backend with the job's options, and their edges.
  virtual PlanDescription Describe(const JobSpec& spec, const Plan& plan) const = 0;

  virtual GraphCacheStats graph_cache_stats() const { return {}; }

  // One line saying what the backend allocated at start (device arena, pinned staging), for
  // the daemon's start-up log; empty where nothing was.
  virtual std::string MemorySummary() const { return {}; }

  // Runs `plan` on `input` (validated size; its bytes may still be arriving: wait for them
  // with InputSource::WaitForBytes, and return its failure if the upload fails) on the given
  // lane in chunks (chunk_plan.h), and emits the output through `emit` chunk by chunk, in
  // increasing offset, as each chunk's result reaches the host. Fills the device phases of
  // `timing` and the fields it knows; sets timing->output_ready when the last result byte is on
  // the host. Only one call per lane at a time; calls on different lanes may run concurrently.
  // Returns CANCELLED if `emit` returned false, RESOURCE_EXHAUSTED if a row does not fit in
  // the lane's chunk buffers and cannot be split.
  // A streaming input of `size` bytes for a job this backend will run: in memory the device
  // can copy from directly where the backend keeps such memory and has room (the CUDA
  // backend's pinned input pool), else pageable (InputSource::Streaming(size)).
  virtual std::shared_ptr<InputSource> NewInput(int64_t size);

  virtual absl::Status Run(const JobSpec& spec, const Plan& plan, InputSource& input,
                           Priority priority, int lane, const ChunkEmitter& emit,
                           JobTiming* timing) = 0;
};

}  // namespace gpupipe::engine
