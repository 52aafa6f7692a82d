// Dynamic batching: concurrent small jobs that would run the same kernels on rows of the same
// length run as one job with their rows stacked, so a burst of N small jobs costs one launch
// (copies, kernels, events) instead of N.
//
// What may batch (BatchKey): jobs of one priority whose inputs came whole in their requests,
// whose results go back as messages (no regions) and fit one message, which ask for no
// per-job plan, profile or timeline, which fit one chunk, whose inputs have rank >= 1, and
// whose pipelines have no row op after a reduction; they batch with jobs that have the same
// ops and parameters, dtype, row length (last dimension) and launch options. Each op of such
// a pipeline works on each row alone (elementwise ops on each element, the others along the
// input's last axis), so stacking rows changes no row's result.
//
// Policy (the engine's worker): a lane that takes a batchable job also takes the matching jobs
// queued behind it (ClientQueue::TakeFronts: clients keep their order and their turns), up to
// BatchPolicy::max_jobs and max_bytes; while fewer came and other jobs are in flight, it waits
// up to window_us for more. A job that is alone in the daemon never waits.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/engine/job/job_sink.h"
#include "server/engine/job/types.h"
#include "server/engine/planning/chunk_plan.h"
#include "server/engine/planning/plan.h"

namespace gpupipe::engine {

struct BatchPolicy {
  // How long a lane holds a batchable job for others to join, while other jobs are in flight.
  // 0: batching is off (the engine's default; the daemon's is its --batch-window-us).
  int64_t window_us = 0;
  int max_jobs = 64;                     // jobs in one batch at most
  int64_t max_bytes = int64_t{4} << 20;  // input bytes of one batch at most
  // A member's result fits one result message, so handing it over never waits for its reader:
  // a client that stops reading cannot hold up the other jobs of its batch. (The engine sets
  // it from Limits::max_chunk_bytes.)
  int64_t max_member_output_bytes = (int64_t{1} << 20) - 4096;
  bool enabled() const { return window_us > 0 && max_jobs > 1; }
};

// The key under which `spec` batches with others (see the header comment), or "" when it
// runs alone. `inline_input`: the input bytes came in the request; `output_to_region`: the
// result goes to a region.
std::string BatchKey(const JobSpec& spec, const Plan& plan, const ChunkLayout& layout,
                     int64_t input_bytes, bool inline_input, bool output_to_region,
                     const BatchPolicy& policy);

// The job a batch runs as: `first`'s spec with the stacked rows of `rows_per_member` jobs (all
// of row length `cols`, the last dimension). The deadline is the latest of `deadlines`.
JobSpec BatchSpec(const JobSpec& first, int64_t total_rows,
                  std::chrono::steady_clock::time_point deadline);

// One job of a batch, as the batch's sink sees it.
struct BatchMember {
  std::shared_ptr<JobSink> sink;
  int64_t out_offset = 0;  // its result's first byte in the batch's result
  int64_t out_bytes = 0;
};

// The sink of a batch: hands each member the bytes of its own rows, at its own offsets. A
// member whose reader is gone gets nothing more, and the batch goes on for the others; the
// batch stops only once every member's reader is gone. Events other than chunks are the
// engine's to send per member (OnAccepted, OnPlan, OnTiming and OnDone are not forwarded).
// Called from the batch's lane thread only, like any sink.
class BatchSink : public JobSink {
 public:
  explicit BatchSink(std::vector<BatchMember> members);

  void OnAccepted(const AcceptedInfo&) override {}
  void OnPlan(const PlanDescription&) override {}
  absl::Status OnChunk(int64_t offset, const char* data, int64_t size) override;
  void OnTiming(const JobTiming&) override {}
  void OnDone(const absl::Status&) override {}
  absl::Status ReaderStatus() const override;

  // Why member i stopped receiving (its reader's status), OK while it receives.
  absl::Status member_status(size_t i) const;

 private:
  std::vector<BatchMember> members_;
  std::vector<absl::Status> gone_;  // per member: OK while its reader is there
  mutable std::mutex mu_;
};

// Member i's share of a batch's timing: the batch's stage times scaled by its share of the
// batch's input bytes, its own bytes, and the batch's kernels, chunks, stream and modes.
JobTiming MemberTiming(const JobTiming& batch, int64_t member_bytes_in, int64_t member_bytes_out,
                       int64_t batch_bytes_in, int jobs);

// Counts of batched runs, for Stats.
class BatchCounters {
 public:
  // Bounds of the size histogram (jobs per batch).
  static const std::vector<int>& SizeBounds();
  void Count(int jobs);  // one batch of `jobs` > 1 jobs ran
  struct Snapshot {
    int64_t batches = 0;
    int64_t batched_jobs = 0;
    std::vector<int64_t> size_counts;  // SizeBounds().size() + 1
    int largest = 0;
  };
  Snapshot snapshot() const;

 private:
  mutable std::mutex mu_;
  Snapshot counts_;
};

}  // namespace gpupipe::engine
