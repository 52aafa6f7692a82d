// Direct runs: a small job that arrives while a lane of its level is idle, and nothing of its
// level waits, runs on the thread that submitted it, before Submit returns, instead of being
// handed to the lane's worker thread.
//
// Why: a small job's whole service time is tens of microseconds of host work around a few
// microseconds of device time, and each hand-off between threads costs a thread wake-up of
// about as much. A queued job pays two: to the lane's worker, and back from it to the RPC
// layer's thread that writes the result. A direct run pays neither, and its result is written
// by the thread that read its request.
//
// What may run directly (DirectRunEligible): a job whose caller lets Submit run it (the RPC
// layer's Submit; never an upload, which waits for its own bytes), whose input came whole in
// the request and whose result goes back as one message, of one chunk, within
// DirectRunPolicy::max_bytes of input and output and max_work of plan work, so that the
// caller's thread is held only briefly. Policy (the engine): the job's level has no queued
// job, no lane gathering a batch, and an idle lane, which the direct run takes as that lane's
// worker would; a job that could batch (batching.h) also needs its level to run nothing else,
// since under load batching saves more than the hand-offs cost, and no job of a higher level
// may be running, which the job would wait for at its chunk boundary (ChunkPolicy's priority
// hold) on the caller's thread. The job is scheduled, admitted, timed and reported as any
// other.
//
// The caller's side: a direct run's events all come before Submit returns, so a sink that
// waits for its reader before the call can be written to must hold them without waiting: the
// RPC layer's EventStream holds a one-message job's events (at most Accepted, Plan, one
// result chunk, Timing, Done) when it may queue at least kDirectRunEvents of them.
#pragma once

#include <cstdint>

#include "server/engine/planning/chunk_plan.h"
#include "server/engine/planning/plan.h"

namespace gpupipe::engine {

// Whether Submit may run the job on the calling thread before it returns. kMayRun suits a
// thread that may be held for a small job's run and calls nothing back into the engine's
// sink while it waits (the RPC layer's reactor); kQueue always hands the job to a lane.
enum class SubmitThread { kQueue, kMayRun };

// Events a sink must be able to queue, without waiting for its reader, before its events
// arrive on a thread that cannot let the reader run (see the header comment): a held Accepted
// and a Plan before the one result chunk.
inline constexpr int kDirectRunEvents = 3;

struct DirectRunPolicy {
  // Input plus output bytes of a job that may run directly; 0: no direct runs.
  int64_t max_bytes = int64_t{64} << 10;
  // Plan work (planning/step_work.h) of a job that may run directly: about a hundred
  // microseconds on one core for the host reference ops, a few on a GPU.
  int64_t max_work = int64_t{1} << 16;
  // The largest result that goes back as one message (the engine sets it from
  // Limits::max_chunk_bytes): one result chunk, so one OnChunk.
  int64_t max_output_message_bytes = (int64_t{1} << 20) - 4096;
  bool enabled() const { return max_bytes > 0; }
};

// Whether a job of `plan` and `layout`, with `input_bytes` of input, is small enough to run
// directly (see the header comment). `inline_input`: the input came whole in the request;
// `output_to_region`: the result goes to a region.
bool DirectRunEligible(const DirectRunPolicy& policy, const Plan& plan, const ChunkLayout& layout,
                       int64_t input_bytes, bool inline_input, bool output_to_region);

}  // namespace gpupipe::engine
