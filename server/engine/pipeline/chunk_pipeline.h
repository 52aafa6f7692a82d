// The chunk pipeline: how every job runs on a lane, whatever the backend. It owns the policy,
// the backend only the per-chunk verbs (LaneExecutor):
//  - the layout: chunks of the job's request or the backend's default, capped for low-priority
//    jobs (ChooseLayout);
//  - waiting for input bytes: chunk k is acquired from the InputSource only once the lane has
//    room for it, and while an upload is behind every finished chunk is handed over first, so
//    results keep streaming while the input arrives;
//  - the in-flight window: at most min(lane window, input ring) chunks enqueued at once, and
//    one chunk staged ahead: chunk k is staged (its host copy starts) before chunk k-1 is
//    enqueued, so a lane's host work on one chunk overlaps the enqueueing and handing over of
//    the others;
//  - ordered emission per layout mode (kRows as they are, kSplitRow through SplitRowCombiner,
//    kSplitRowResize through SplitRowResizeMerger), in result chunks of bounded size, each
//    chunk's input released once its result is out;
//  - the priority hold (PriorityGate): while a job of a higher priority runs, a job holds its
//    next chunk back for at most `priority_hold_us`, handing over finished chunks meanwhile;
//  - stopping early: the job's interrupt (job/interrupt.h: its reader gone, its deadline passed,
//    the server stopping) is asked before each chunk and while a chunk is held back, and the
//    lane is given it to ask inside long host work; the job then ends with the interrupt's
//    status, and so does a job whose reader's OnChunk says it is gone.
//  - chunk size floor: a job's chunk_bytes below ChunkPolicy::min_chunk_bytes is raised to it,
//    so a request cannot make a job pay per-chunk costs millions of times over.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/engine/backends/backend.h"
#include "server/engine/planning/chunk_plan.h"
#include "server/engine/pipeline/input_source.h"
#include "server/engine/job/interrupt.h"
#include "server/engine/job/job_sink.h"
#include "server/engine/scheduling/priority_gate.h"

namespace gpupipe::engine {

struct ChunkPolicy {
  // Largest chunk of a low-priority job (0: no cap), so that a high-priority job waits behind
  // at most one short copy and one small grid per busy lane; not applied where it would split
  // rows that the job's own chunking keeps whole. The value is chosen by bench/engine
  // (bench/results/engine-h200.md, target c).
  int64_t low_priority_chunk_bytes = int64_t{512} << 10;
  // See the header comment; 0: no holding.
  int64_t priority_hold_us = 20000;
  // The smallest chunk a job may ask for (JobSpec::chunk_bytes; rows larger than it still
  // make whole-row chunks). Every chunk costs a few copies, launches and events, and a piece
  // of a split histogram row a pass over its bins, so without a floor a tiny request could
  // cost millions of those. 0: no floor (tests of the chunking itself).
  int64_t min_chunk_bytes = int64_t{64} << 10;
};

// The job's chunks on `backend`: of spec.chunk_bytes (raised to the policy's floor, capped at
// the backend's default) or the backend's default, within its chunk capacity, and capped for
// low-priority jobs (ChunkPolicy).
// RESOURCE_EXHAUSTED when a row does not fit and cannot be split.
absl::StatusOr<ChunkLayout> ChooseLayout(const JobSpec& spec, const Plan& plan,
                                         const Backend& backend, const ChunkPolicy& policy);

// Input bytes of `chunk`, and of chunk `k` of `layout`.
ByteRange ChunkInputRange(const Chunk& chunk, const ChunkLayout& layout);
ByteRange ChunkInputRange(const Plan& plan, const ChunkLayout& layout, int64_t k);

// One job's pass through a lane.
struct ChunkJob {
  const JobSpec& spec;
  const Plan& plan;
  const ChunkLayout& layout;
  InputSource& input;
  JobSink& sink;
  const JobInterrupt& interrupt;
  JobTiming* timing;
  int64_t max_result_chunk_bytes;  // largest result chunk handed to the sink (Limits)
};

// Runs `job` on `lane`, emitting its result through job.sink in increasing offset. Sets
// timing->output_ready when the last result byte is on the host. Returns the interrupt's status
// or the reader's (OnChunk) when the job stopped early, the input's failure when the upload
// failed, or the lane's error.
absl::Status RunChunkPipeline(const ChunkJob& job, LaneExecutor& lane, PriorityGate& gate,
                              const ChunkPolicy& policy);

}  // namespace gpupipe::engine
