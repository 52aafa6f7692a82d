// How the engine hands a job's events to whoever submitted it (the RPC layer, a test).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/engine/planning/plan.h"
#include "server/engine/job/types.h"

namespace gpupipe::engine {

struct AcceptedInfo {
  std::string job_id;
  DType output_dtype = DType::kFloat32;
  std::vector<int64_t> output_shape;
  std::string backend;
  Priority priority = Priority::kNormal;  // the job's, whose lanes it runs on
};

// Where the time of one job went. Device phases come from CUDA events on the job's stream.
struct JobTiming {
  // The request received until the job was accepted: decoding, validation, planning and
  // admission (0 where the submitter did not say when it received the request).
  double accept_us = 0;
  double queue_us = 0;
  double h2d_us = 0;
  double compute_us = 0;
  double d2h_us = 0;
  // Host time spent copying pageable input into pinned staging (a pipeline stage of its own
  // on the CUDA backend; 0 where the input was page-locked already).
  double host_staging_us = 0;
  double total_us = 0;        // accepted until the whole output was on the host
  double result_stream_us = 0;  // output on the host until the last chunk was handed over
  // Set by the backend when the output is complete on the host, before it is streamed.
  std::chrono::steady_clock::time_point output_ready;
  int64_t bytes_in = 0;
  int64_t bytes_out = 0;
  int kernels = 0;
  std::string stream;
  std::string staging;
  std::string launch;
  std::string graph;  // graph modes: "hit", "update" or "miss"

  struct Step {
    int step = 0;
    std::string ops;
    int kernels = 0;
    double device_us = 0;
  };
  std::vector<Step> steps;  // with JobSpec::profile

  struct Kernel {
    int index = 0;
    std::string name;
    int step = 0;
    double device_us = 0;
  };
  std::vector<Kernel> kernel_times;  // with JobSpec::profile, where kernels run on a device

  int chunks = 0;     // chunks the job ran in
  // Jobs that ran as one with this one (scheduling/batching.h); 1: alone. In a batch, the
  // stage times above are the job's share of the batch's.
  int batch_jobs = 1;
  // The run on a lane the job was part of: runs are numbered 1, 2, ... in the order they took
  // their lanes, per engine (a batch is one run); 0 where the job never ran.
  int64_t lane_run = 0;
  double gbps = 0;    // (bytes_in + bytes_out) / total_us, 1e9 bytes per second
  // One stage of one chunk; microseconds from the start of the job's first copy.
  struct TimelineEntry {
    std::string stream;  // "h2d", "compute", "d2h"
    std::string stage;   // "h2d", "compute", "d2h"
    int chunk = 0;
    double start_us = 0;
    double end_us = 0;
  };
  std::vector<TimelineEntry> timeline;  // with JobSpec::timeline
};

// Receives the events of one accepted job, in this order: OnAccepted, OnPlan (when the job asked
// for its plan), OnChunk (zero or more,
// in increasing offset, covering the output once), OnTiming (on success), OnDone (exactly once,
// always last). Calls come from engine threads, never concurrently for one job.
//
// A call that throws (a failed allocation) does not stop the engine. OnAccepted that throws
// refuses the request: Submit returns the error and nothing more reaches the sink. Once
// OnAccepted has returned the job is accepted, and OnPlan, OnChunk or OnTiming that throws
// ends it with the error as its Done; OnDone that throws is taken as made.
//
// OnChunk may block to apply backpressure (the job's lane waits for the reader instead of
// buffering); it must copy `data` before returning. It returns why the reader is gone once it
// is (CANCELLED: the client cancelled or disconnected; DEADLINE_EXCEEDED: it stopped reading for
// longer than the server allows), and the engine then stops the job and ends it with that status.
class JobSink {
 public:
  virtual ~JobSink() = default;
  virtual void OnAccepted(const AcceptedInfo& info) = 0;
  virtual void OnPlan(const PlanDescription& plan) = 0;
  virtual absl::Status OnChunk(int64_t offset, const char* data, int64_t size) = 0;
  virtual void OnTiming(const JobTiming& timing) = 0;
  virtual void OnDone(const absl::Status& status) = 0;
  // OK while the reader is there; otherwise why it is gone, as OnChunk says. Lets the engine
  // skip or stop a job nobody waits for. Never blocks.
  virtual absl::Status ReaderStatus() const = 0;
  // Page-locked host memory that holds the whole output at its byte offsets (a registered
  // region), which a lane may write results into directly; null where there is none. Where a
  // lane did, OnChunk receives pointers into it.
  virtual char* DirectOutput() const { return nullptr; }
};

}  // namespace gpupipe::engine
