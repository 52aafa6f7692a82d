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
#include "server/engine/backend.h"
#include "server/engine/input_source.h"
#include "server/engine/job_sink.h"
#include "server/engine/limits.h"
#include "server/engine/types.h"

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

  // Validates, plans and queues a job. On error nothing was accepted and `sink` is not called.
  // On OK the sink has received OnAccepted and will receive the rest of the job's events.
  // `input` is moved from only on success.
  absl::Status Submit(JobSpec spec, std::string& input, std::shared_ptr<JobSink> sink);
  // As above, for an input that may still be arriving: its size() must match the spec, and the
  // job may start before the last byte is there. A failed upload (InputSource::Fail) ends the
  // job with that status. The streamed-input limit (Limits::max_stream_input_bytes) applies.
  absl::Status Submit(JobSpec spec, std::shared_ptr<InputSource> input,
                      std::shared_ptr<JobSink> sink);

  // A streaming input of `size` bytes for Submit, in the memory the backend copies from
  // fastest (Backend::NewInput): callers that fill an input themselves (the Run RPC) use it.
  std::shared_ptr<InputSource> NewInput(int64_t size);

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
