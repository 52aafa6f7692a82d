// The engine: accepts validated jobs, queues them by priority, runs each on a lane of its
// priority through a backend, and reports every accepted job's events to its sink. It knows
// nothing of gRPC.
//
// Thread safety: all public methods may be called from any thread.
// Guarantee: every job that Submit accepted ends with exactly one JobSink::OnDone, also when
// the engine shuts down (queued jobs then end with UNAVAILABLE).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/engine/backends/backend.h"
#include "server/engine/pipeline/chunk_pipeline.h"
#include "server/engine/pipeline/input_ring.h"
#include "server/engine/pipeline/input_source.h"
#include "server/engine/job/job_sink.h"
#include "server/engine/job/limits.h"
#include "server/engine/job/types.h"

namespace gpupipe::engine {

// One finished job, for the daemon's log line.
struct JobRecord {
  std::string job_id;
  JobSpec spec;  // without the input bytes
  std::string backend;
  absl::Status status;
  JobTiming timing;
};

struct EngineOptions {
  Limits limits;
  ChunkPolicy chunk_policy;
  // Queued (accepted, not yet running) jobs beyond which Submit answers RESOURCE_EXHAUSTED.
  int max_queued_jobs = 1024;
  int64_t max_queued_bytes = int64_t{2} << 30;
  // Called once per finished job, from an engine thread.
  std::function<void(const JobRecord&)> on_job_done;
};

struct EngineDescription {
  std::string backend;
  std::optional<DeviceDescription> device;
  std::vector<PriorityLevel> levels;
  Limits limits;
  std::vector<Staging> stagings;
  std::vector<LaunchMode> launch_modes;
  GraphCacheStats graph_cache;
};

class Engine {
 public:
  // Starts one worker thread per lane of `backend`.
  static std::unique_ptr<Engine> Create(std::unique_ptr<Backend> backend, EngineOptions options);
  ~Engine();  // Shutdown(), then joins the workers.

  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Validates, plans and queues a job whose input bytes are all present (`input`, moved from
  // only on success; the limit is Limits::max_input_bytes). On error nothing was accepted and
  // `sink` is not called. On OK the sink has received OnAccepted and will receive the rest of
  // the job's events.
  absl::Status Submit(JobSpec spec, std::string& input, std::shared_ptr<JobSink> sink);
  // As above for a complete input that may be shared with other jobs (it is read-only).
  absl::Status Submit(JobSpec spec, std::shared_ptr<InputSource> input,
                      std::shared_ptr<JobSink> sink);
  // As above for an input the caller streams in (the Run RPC; the limit is
  // Limits::max_stream_input_bytes): returns the ring the caller writes the input's bytes into,
  // in order (InputRing::Write). The job may start before the last byte is there. A failed
  // upload (InputRing::Fail) ends the job with that status; a job that ends first fails the
  // ring with its own status. RESOURCE_EXHAUSTED when the input ring pool has no room.
  absl::StatusOr<std::shared_ptr<InputRing>> SubmitStreamed(JobSpec spec,
                                                            std::shared_ptr<JobSink> sink);

  EngineDescription Describe() const;

  // Stops accepting jobs (Submit answers UNAVAILABLE) and waits up to `timeout` for the jobs
  // already accepted to finish. Returns true when none is left.
  bool Drain(std::chrono::milliseconds timeout);

  // Stops accepting jobs, lets running jobs finish, ends queued ones with UNAVAILABLE and joins
  // the workers. Idempotent.
  void Shutdown();

  // Jobs accepted and not yet done.
  int64_t jobs_in_flight() const;

 private:
  class Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpupipe::engine
