// The backend seam: what runs planned chunks on some hardware. The engine owns scheduling, the
// job's lifecycle and the chunk pipeline (chunk_pipeline.h); a backend owns its lanes (streams
// and buffers) and offers per-chunk verbs on each (LaneExecutor). Engine tests run against the
// CPU backend, so they need no GPU.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/engine/planning/chunk_plan.h"
#include "server/engine/pipeline/input_source.h"
#include "server/engine/job/interrupt.h"
#include "server/engine/job/job_sink.h"
#include "server/engine/planning/plan.h"
#include "server/engine/job/types.h"
#include "server/engine/regions/region.h"

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
  std::string kernel_code;            // Device.kernel_code
  std::vector<std::string> features;  // Device.features
  std::string wait;                   // Device.wait
};

struct GraphCacheStats {
  int64_t hits = 0;
  int64_t updates = 0;
  int64_t misses = 0;
  int64_t evictions = 0;
  int entries = 0;
  int capacity = 0;
};

// A host block for the engine's input rings: `bytes` at `data`, page-locked when `pinned`,
// handed back through `free` once nothing uses it.
struct HostBlock {
  char* data = nullptr;
  bool pinned = false;
  std::function<void(char*)> free;
};

// One lane's per-chunk verbs, called by the chunk pipeline for one job at a time, from that
// job's worker thread, in this order per job: Begin; per chunk k (in order) Stage, Enqueue,
// (Profile), then Ready any number of times and Finish once, oldest first, with at most
// window() chunks enqueued and not finished; End. Chunk k+1 may be staged before chunk k is
// enqueued (never two ahead), so that the lane's host work on one overlaps the other. A
// result returned by Finish stays valid until the next Enqueue.
class LaneExecutor {
 public:
  virtual ~LaneExecutor() = default;

  // Chunks the lane can have enqueued and not finished at once.
  virtual int window() const = 0;
  // For the job begun last (until its End): page-locked host memory holding the whole output
  // at its byte offsets (JobSink::DirectOutput), which the lane may copy results into instead
  // of its own buffers; Finish then returns pointers into it. Lanes without a device copy
  // ignore it.
  virtual void SetDirectOutput(char* /*output*/) {}
  // A job starts on the lane. Fills the lane's fields of `timing` (stream, staging). A lane
  // that computes on the host asks `interrupt` (valid until End) between slices of a chunk's
  // work and returns its status, so a costly chunk stops within milliseconds; a device lane
  // need not (the pipeline asks between chunks, and a chunk's kernels are short).
  virtual absl::Status Begin(const JobSpec& spec, const Plan& plan, const ChunkLayout& layout,
                             const JobInterrupt& interrupt, JobTiming* timing) = 0;
  // Host-side work on chunk's input before it may take a slot (the CUDA lane starts copying
  // pageable bytes into pinned staging here, on helper threads, while earlier chunks are in
  // flight and enqueued; Enqueue waits for it). `input` stays acquired until the chunk is
  // finished.
  virtual absl::Status Stage(const Chunk& chunk, const InputChunk& input) = 0;
  // Starts the chunk's work: copy in, the plan's kernels, copy out (the CPU lane runs it).
  virtual absl::Status Enqueue(const Chunk& chunk) = 0;
  // With JobSpec::profile, after Enqueue: adds each kernel's and step's time to `timing`.
  virtual absl::Status Profile(const Chunk& chunk, JobTiming* timing) = 0;
  // Whether the chunk's result is on the host; never blocks.
  virtual absl::StatusOr<bool> Ready(const Chunk& chunk) = 0;
  // Waits for the chunk's result and returns it (chunk.out_elements of the output dtype);
  // adds the chunk's stage times to `timing`.
  virtual absl::StatusOr<const char*> Finish(const Chunk& chunk, JobTiming* timing) = 0;
  // The job ends with `status`: on OK fills the rest of `timing` (kernels, launch, graph);
  // otherwise leaves no work behind that could touch the lane's buffers under the next job.
  virtual void End(const absl::Status& status, JobTiming* timing) = 0;
};

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

  // OK while the backend can run jobs; otherwise why it cannot any more (a sticky device
  // error: only a new process can use the device again). Cheap; never blocks.
  virtual absl::Status DeviceStatus() const { return absl::OkStatus(); }

  // One line saying what the backend allocated at start (device arena, pinned staging), for
  // the daemon's start-up log; empty where nothing was.
  virtual std::string MemorySummary() const { return {}; }

  // Input bytes per chunk when a job does not ask, and the most a chunk's largest tensor
  // (input, intermediate or output) may take on a lane.
  virtual int64_t default_chunk_bytes() const = 0;
  virtual int64_t chunk_capacity_bytes() const = 0;

  // `bytes` of host memory for input rings, in the memory the lanes copy from fastest (the
  // CUDA backend's is page-locked); RESOURCE_EXHAUSTED when it cannot be had.
  virtual absl::StatusOr<HostBlock> AllocateInputMemory(int64_t bytes);

  // Page-locks `bytes` of host memory at `data` (a registered region), so that lanes copy from
  // and to it directly; until HostPin::unpin. The default page-locks nothing.
  virtual absl::StatusOr<HostPin> PinHostMemory(char* data, int64_t bytes);
  // Opens device memory another process of this host exported with cudaIpcGetMemHandle
  // (`handle`: the handle's bytes), for device regions; the default (no device)
  // FAILED_PRECONDITION. `copy_device` copies between host and device memory, either way, and
  // waits; the default fails the same way.
  virtual absl::StatusOr<DeviceMapping> OpenCudaIpc(const std::string& handle);
  virtual absl::Status CopyDeviceMemory(char* to, const char* from, int64_t bytes);

  // The lane's verbs. Only one job uses a lane at a time; lanes may run concurrently.
  virtual LaneExecutor& lane(Priority priority, int lane) = 0;
};

}  // namespace gpupipe::engine
