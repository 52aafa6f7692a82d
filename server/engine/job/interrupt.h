// Why a job must stop before its end: its reader is gone, its deadline passed, or the engine
// stops running jobs (the end of a shutdown's grace period). The chunk pipeline asks between
// chunks and a lane that computes on the host asks between slices of its work
// (backends/cpu/host_steps.h), so a job stops within a few milliseconds of work of any of
// these, however costly the job is.
//
// Thread safety: Check() may be called from any thread. The sink and the flag must outlive
// the interrupt.
#pragma once

#include <atomic>
#include <chrono>

#include "absl/status/status.h"
#include "server/engine/job/job_sink.h"

namespace gpupipe::engine {

class JobInterrupt {
 public:
  using Clock = std::chrono::steady_clock;

  // `stopping` (may be null): set once the engine stops every running job.
  JobInterrupt(const JobSink& sink, Clock::time_point deadline,
               const std::atomic<bool>* stopping = nullptr)
      : sink_(sink), deadline_(deadline), stopping_(stopping) {}

  // OK while the job may go on; otherwise the status it ends with, the first that applies:
  // UNAVAILABLE when the server stops running jobs, DEADLINE_EXCEEDED once the deadline has
  // passed (also when the reader left because of it), else the sink's reason its reader left.
  absl::Status Check() const;

  // The status of a job the engine stopped (the UNAVAILABLE of Check).
  static absl::Status Stopped();

 private:
  const JobSink& sink_;
  const Clock::time_point deadline_;
  const std::atomic<bool>* const stopping_;
};

}  // namespace gpupipe::engine
