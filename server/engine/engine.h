// The engine: accepts validated jobs, queues them by priority, runs each on a lane of its
// priority through a backend, and reports every accepted job's events to its sink. It knows
// nothing of gRPC.
//
// Scheduling: jobs queue per priority level, and within a level per client (JobSpec::client),
// served round-robin across clients (scheduling/client_queue.h); admission limits the jobs and
// memory each level and each client may hold (scheduling/admission.h). A job stops early, with
// its status, once its reader is gone, its deadline passes (JobSpec::deadline, queued or
// running) or the engine stops running jobs (job/interrupt.h).
//
// Thread safety: all public methods may be called from any thread.
// Guarantee: every job that Submit accepted ends with exactly one JobSink::OnDone, also when
// the engine shuts down (queued jobs then end with UNAVAILABLE), and no exception escapes the
// engine: an allocation that fails ends the job (or refuses the request) with
// RESOURCE_EXHAUSTED.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
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
#include "server/engine/regions/region_registry.h"
#include "server/engine/scheduling/admission.h"
#include "server/engine/scheduling/batching.h"
#include "server/engine/scheduling/direct_run.h"
#include "server/engine/stats/job_stats.h"

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
  AdmissionLimits admission;
  RegionLimits regions;
  BatchPolicy batching;
  // Small jobs that find an idle lane run on the submitting thread (scheduling/direct_run.h),
  // where the caller allows it.
  DirectRunPolicy direct_run;
  // Called once per finished job, from an engine thread.
  std::function<void(const JobRecord&)> on_job_done;
  // Called once, from an engine thread, when the backend can run no more jobs
  // (Backend::DeviceStatus: a sticky device error); the engine refuses new jobs from then on.
  std::function<void(const absl::Status&)> on_device_lost;
};

struct EngineDescription {
  std::string backend;
  std::optional<DeviceDescription> device;
  std::vector<PriorityLevel> levels;
  Limits limits;
  AdmissionLimits admission;
  RegionLimits regions;
  BatchPolicy batching;
  DirectRunPolicy direct_run;
  int64_t min_chunk_bytes = 0;
  std::vector<Staging> stagings;
  std::vector<LaunchMode> launch_modes;
  GraphCacheStats graph_cache;
};

// What the engine is doing and has done (GetStats, metrics).
struct EngineStats {
  std::string backend;
  struct Level {
    Priority priority = Priority::kNormal;
    int lanes = 0;
    int running = 0;
    int queued = 0;
    LevelJobStats done;  // jobs that ended
  };
  std::vector<Level> levels;
  struct Client {
    std::string client;
    int active_jobs = 0;  // queued or running
    int uploads = 0;
    int64_t queued_bytes = 0;
    JobCounts jobs;  // jobs that ended
  };
  std::vector<Client> clients;
  int64_t input_ring_used_bytes = 0;
  int64_t input_ring_capacity_bytes = 0;
  int64_t queued_bytes = 0;
  int64_t max_queued_bytes = 0;
  int uploads_in_progress = 0;
  int regions = 0;                    // registered
  int64_t region_mapped_bytes = 0;    // mapped, regions unregistered whose jobs still run included
  int64_t region_capacity_bytes = 0;  // RegionLimits::max_bytes
  GraphCacheStats graph_cache;
  std::map<std::string, int64_t> refused;  // JobStats::Refused
  BatchCounters::Snapshot batching;
  int64_t direct_runs = 0;  // jobs run on the thread that submitted them (direct_run.h)
  // One run on a lane (a job, or a batch of `jobs`), in microseconds since the engine started.
  struct LaneSpan {
    std::string lane;
    double start_us = 0;
    double end_us = 0;
    int jobs = 1;
    bool ok = true;
  };
  // With Stats(..., lane_activity): the latest runs, at most kLaneActivitySpans, oldest first.
  std::vector<LaneSpan> lane_activity;
};

// Lane runs the engine remembers for EngineStats::lane_activity.
inline constexpr size_t kLaneActivitySpans = 4096;

// Bytes [offset, offset + length) of a registered region (RegionRegistry) that a job reads
// its input from or writes its output into. length 0: for an input, the tensor's bytes; for an
// output, up to the region's end.
struct RegionSlice {
  std::string region_id;
  int64_t offset = 0;
  int64_t length = 0;
};
struct JobRegions {
  std::optional<RegionSlice> input;
  std::optional<RegionSlice> output;
};

class Engine {
 public:
  // Starts two worker threads per lane of `backend`: a lane runs one job at a time, and while
  // one worker hands over a job's results another may run the next job on its lane.
  static std::unique_ptr<Engine> Create(std::unique_ptr<Backend> backend, EngineOptions options);
  ~Engine();  // Shutdown(), then joins the workers.

  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Validates, plans and queues a job whose input bytes are all present (`input`, moved from
  // only on success; the limit is Limits::max_input_bytes). On error nothing was accepted and
  // `sink` is not called. On OK the sink has received OnAccepted and will receive the rest of
  // the job's events. With SubmitThread::kMayRun a small job may run on this thread before
  // Submit returns (scheduling/direct_run.h); its events then all come before the return.
  absl::Status Submit(JobSpec spec, std::string& input, std::shared_ptr<JobSink> sink,
                      SubmitThread thread = SubmitThread::kQueue);
  // As above for a complete input that may be shared with other jobs (it is read-only).
  absl::Status Submit(JobSpec spec, std::shared_ptr<InputSource> input,
                      std::shared_ptr<JobSink> sink);
  // As above for an input the caller streams in (the Run RPC; the limit is
  // Limits::max_stream_input_bytes): returns the ring the caller writes the input's bytes into,
  // in order (InputRing::Write). The job may start before the last byte is there. A failed
  // upload (InputRing::Fail) ends the job with that status; a job that ends first fails the
  // ring with its own status. RESOURCE_EXHAUSTED when the input ring pool has no room. A dry
  // run (spec.dry_run) reads no input: it is answered before the return (the sink has all its
  // events, Done included) and the ring is null.
  absl::StatusOr<std::shared_ptr<InputRing>> SubmitStreamed(JobSpec spec,
                                                            std::shared_ptr<JobSink> sink);

  // As Submit above, with the input read from a region (`regions.input`, and `input` then
  // empty; the limit is Limits::max_region_input_bytes) and/or the output written into one
  // (`regions.output`, which must hold it; the sink then receives no OnChunk). Regions belong
  // to spec.client (RegionRegistry::Find's errors); an input and an output may not overlap.
  absl::Status Submit(JobSpec spec, std::string& input, const JobRegions& regions,
                      std::shared_ptr<JobSink> sink, SubmitThread thread = SubmitThread::kQueue);

  // Maps a client's shared-memory object as a region its jobs may use
  // (RegionRegistry::Register), and unmaps it once no job uses it any more. With a `lease`
  // (OpenRegionLease), the region goes when the lease ends.
  absl::StatusOr<RegionInfo> RegisterRegion(const std::string& client, const std::string& shm_name,
                                            int64_t bytes, const std::string& lease = "");
  // As RegisterRegion, for a descriptor a local process passed the daemon (a memfd), which
  // this takes (RegionRegistry::RegisterFd).
  absl::StatusOr<RegionInfo> RegisterFdRegion(const std::string& client, int fd, int64_t bytes,
                                              const std::string& lease = "");
  // Opens device memory a client process exported (CUDA IPC) as a region of `client`
  // (RegionRegistry::RegisterCudaIpc).
  absl::StatusOr<RegionInfo> RegisterCudaIpcRegion(const std::string& client,
                                                   const std::string& handle, int64_t bytes,
                                                   const std::string& lease = "");
  // Leases tie regions to something that ends (RegionRegistry::OpenLease, EndLease).
  absl::StatusOr<std::string> OpenRegionLease(const std::string& client);
  void EndRegionLease(const std::string& lease);
  absl::Status UnregisterRegion(const std::string& client, const std::string& region_id);

  EngineDescription Describe() const;
  // With `with_clients` false, EngineStats::clients stays empty (the per-client figures are
  // the costly part; Prometheus metrics do without them).
  // With `lane_activity`, EngineStats::lane_activity too.
  EngineStats Stats(bool with_clients = true, bool lane_activity = false) const;
  // Counts a call refused before it reached Submit (a request that does not decode, an upload
  // out of order) under RefusalReason, beside the refusals Submit counts itself.
  void CountRefusal(const absl::Status& status);

  // Stops accepting jobs (Submit answers UNAVAILABLE) and waits up to `timeout` for the jobs
  // already accepted to finish. Returns true when none is left.
  bool Drain(std::chrono::milliseconds timeout);

  // Stops every running job at its next check (UNAVAILABLE: the server is shutting down), an
  // upload's job waiting for bytes included; jobs that start later stop at once. Does not
  // wait. Meant for the end of a shutdown's grace period.
  void StopRunningJobs();

  // Stops accepting jobs, ends queued ones with UNAVAILABLE, stops running ones
  // (StopRunningJobs) and joins the workers. A job stopped while its reader does not read ends
  // once its sink lets it (the RPC layer cancels such calls). Idempotent.
  void Shutdown();

  // Jobs accepted and not yet done.
  int64_t jobs_in_flight() const;
  // The priorities whose jobs wait for a lane while every lane of that priority runs a job
  // (jobs that merely pass through the queue to an idle lane do not count): bit p for
  // priority p (static_cast<int>(Priority)).
  uint32_t levels_waiting_for_lanes() const;
  // False once Drain or Shutdown began: Submit answers UNAVAILABLE.
  bool accepting() const;

 private:
  class Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpupipe::engine
