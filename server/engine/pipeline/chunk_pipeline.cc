#include "server/engine/pipeline/chunk_pipeline.h"

#include <algorithm>
#include <deque>
#include <optional>
#include <string>
#include <thread>

#include "server/engine/planning/split_row_merge.h"

namespace gpupipe::engine {
namespace {

using Clock = std::chrono::steady_clock;

// How often a held job checks the gate again and hands over finished chunks: short against a
// held chunk's worth of work, long enough not to busy a core.
constexpr auto kHoldPoll = std::chrono::microseconds(20);

struct InFlight {
  Chunk chunk;
  InputChunk input;
};

// One job's state while it runs.
class PipelineRun {
 public:
  PipelineRun(const ChunkJob& job, LaneExecutor& lane, PriorityGate& gate,
              const ChunkPolicy& policy)
      : job_(job),
        lane_(lane),
        gate_(gate),
        policy_(policy),
        level_(static_cast<int>(job.spec.priority)),
        window_(static_cast<size_t>(std::max<int64_t>(
            1, std::min<int64_t>(lane.window(), job.input.max_held_chunks() - 1)))),
        held_limit_(static_cast<size_t>(job.input.max_held_chunks())),
        combiner_(job.plan, job.layout),
        merger_(job.plan, job.layout) {}

  absl::Status Run() {
    const ChunkLayout& layout = job_.layout;
    for (int64_t k = 0; k < layout.chunk_count; ++k) {
      if (absl::Status s = job_.interrupt.Check(); !s.ok()) return s;
      Chunk chunk = ChunkAt(job_.plan, layout, k);
      const ByteRange range = ChunkInputRange(chunk, layout);
      // The input holds a bounded number of chunks, and an upload that is behind should not
      // keep work back: while chunk k's input has no room or has not arrived, enqueue the
      // staged chunk and hand over finished ones.
      for (;;) {
        if (held() + 1 <= held_limit_ && job_.input.Ready(k, range)) break;
        if (staged_ && in_flight_.size() < window_) {
          if (absl::Status s = EnqueueStaged(); !s.ok()) return s;
        } else if (!in_flight_.empty()) {
          if (absl::Status s = FinishOldest(); !s.ok()) return s;
        } else {
          break;  // nothing to do but wait for the input (Acquire blocks)
        }
      }
      absl::StatusOr<InputChunk> input = job_.input.Acquire(k, range);
      if (!input.ok()) return input.status();
      // Chunk k's host work (a staging copy) starts, then chunk k-1 is enqueued while it runs.
      if (absl::Status s = lane_.Stage(chunk, *input); !s.ok()) return s;
      if (staged_) {
        if (absl::Status s = EnqueueStaged(); !s.ok()) return s;
      }
      staged_ = InFlight{std::move(chunk), *input};
    }
    if (staged_) {
      if (absl::Status s = EnqueueStaged(); !s.ok()) return s;
    }
    while (!in_flight_.empty()) {
      if (absl::Status s = FinishOldest(); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

 private:
  // Input chunks the pipeline holds: in flight and staged.
  size_t held() const { return in_flight_.size() + (staged_ ? 1 : 0); }

  // Enqueues the staged chunk once the window has room (and no higher priority holds it).
  absl::Status EnqueueStaged() {
    while (in_flight_.size() >= window_) {
      if (absl::Status s = FinishOldest(); !s.ok()) return s;
    }
    if (absl::Status s = HoldForHigherPriority(); !s.ok()) return s;
    if (absl::Status s = lane_.Enqueue(staged_->chunk); !s.ok()) return s;
    if (job_.spec.profile) {
      if (absl::Status s = lane_.Profile(staged_->chunk, job_.timing); !s.ok()) return s;
    }
    in_flight_.push_back(*std::move(staged_));
    staged_.reset();
    return EmitFinished();
  }

  // Hands over every chunk whose result is already on the host, oldest first, without waiting.
  absl::Status EmitFinished() {
    while (!in_flight_.empty()) {
      absl::StatusOr<bool> ready = lane_.Ready(in_flight_.front().chunk);
      if (!ready.ok()) return ready.status();
      if (!*ready) break;
      if (absl::Status s = FinishOldest(); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  // Strict priority at chunk boundaries: what this job already enqueued keeps running.
  absl::Status HoldForHigherPriority() {
    if (policy_.priority_hold_us <= 0 || !gate_.HigherRunning(level_)) return absl::OkStatus();
    const auto until = Clock::now() + std::chrono::microseconds(policy_.priority_hold_us);
    while (gate_.HigherRunning(level_) && Clock::now() < until) {
      if (absl::Status s = job_.interrupt.Check(); !s.ok()) return s;
      if (absl::Status s = EmitFinished(); !s.ok()) return s;
      std::this_thread::sleep_for(kHoldPoll);
    }
    return absl::OkStatus();
  }

  // Waits for the oldest chunk's result, emits it (or adds it to its row), and releases its
  // input.
  absl::Status FinishOldest() {
    InFlight& oldest = in_flight_.front();
    const Chunk& chunk = oldest.chunk;
    const ChunkLayout& layout = job_.layout;
    absl::StatusOr<const char*> result = lane_.Finish(chunk, job_.timing);
    if (!result.ok()) return result.status();
    if (chunk.index == layout.chunk_count - 1) job_.timing->output_ready = Clock::now();
    absl::Status delivered;
    switch (layout.mode) {
      case ChunkLayout::Mode::kSplitRow:
        combiner_.Add(chunk, *result, oldest.input.data);
        if (chunk.last_piece) {
          const std::string row = combiner_.Finish(chunk);
          delivered = Emit(chunk.out_offset * layout.out_itemsize, row.data(),
                           static_cast<int64_t>(row.size()));
        }
        break;
      case ChunkLayout::Mode::kSplitRowResize: {
        absl::StatusOr<SplitRowEmission> out = merger_.Add(chunk, *result);
        if (!out.ok()) return out.status();
        delivered = Emit(out->offset, out->data, out->size);
        break;
      }
      case ChunkLayout::Mode::kRows:
        delivered = Emit(chunk.out_offset * layout.out_itemsize, *result,
                         chunk.out_elements * layout.out_itemsize);
        break;
    }
    job_.input.Release(chunk.index);
    in_flight_.pop_front();
    return delivered;
  }

  // `size` bytes at `data`, which belong at output byte `base`, in result chunks of bounded
  // size; the sink's status once its reader is gone.
  absl::Status Emit(int64_t base, const char* data, int64_t size) {
    const int64_t step = job_.max_result_chunk_bytes;
    for (int64_t offset = 0; offset < size; offset += step) {
      if (absl::Status s =
              job_.sink.OnChunk(base + offset, data + offset, std::min(step, size - offset));
          !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }

  const ChunkJob& job_;
  LaneExecutor& lane_;
  PriorityGate& gate_;
  const ChunkPolicy& policy_;
  const int level_;
  // At most this many chunks enqueued: the lane's window, and one fewer than the input holds
  // so that the next chunk's input can arrive while they run.
  const size_t window_;
  const size_t held_limit_;  // chunks the input lets the pipeline hold
  SplitRowCombiner combiner_;
  SplitRowResizeMerger merger_;
  std::deque<InFlight> in_flight_;  // enqueued, result not yet emitted; oldest first
  std::optional<InFlight> staged_;  // staged, not yet enqueued: the newest chunk
};

}  // namespace

absl::StatusOr<ChunkLayout> ChooseLayout(const JobSpec& spec, const Plan& plan,
                                         const Backend& backend, const ChunkPolicy& policy) {
  const int64_t capacity = backend.chunk_capacity_bytes();
  const int64_t requested = spec.chunk_bytes > 0
                                ? std::min(std::max(spec.chunk_bytes, policy.min_chunk_bytes),
                                           backend.default_chunk_bytes())
                                : backend.default_chunk_bytes();
  absl::StatusOr<ChunkLayout> layout = MakeChunkLayout(spec, plan, requested, capacity);
  const int64_t cap = policy.low_priority_chunk_bytes;
  if (!layout.ok() || spec.priority != Priority::kLow || cap <= 0 || requested <= cap) {
    return layout;
  }
  // Low-priority jobs run in short chunks (copy engines ignore stream priorities, and a
  // kernel's resident blocks keep their SMs until they finish), unless the cap would split rows
  // the requested chunking keeps whole, which would change the job's rounding.
  absl::StatusOr<ChunkLayout> capped = MakeChunkLayout(spec, plan, cap, capacity);
  if (capped.ok() && (capped->mode == ChunkLayout::Mode::kRows ||
                      layout->mode != ChunkLayout::Mode::kRows)) {
    return capped;
  }
  return layout;
}

ByteRange ChunkInputRange(const Chunk& chunk, const ChunkLayout& layout) {
  return {chunk.in_offset * layout.in_itemsize,
          (chunk.in_offset + chunk.in_elements) * layout.in_itemsize};
}

ByteRange ChunkInputRange(const Plan& plan, const ChunkLayout& layout, int64_t k) {
  return ChunkInputRange(ChunkSpan(plan, layout, k), layout);
}

absl::Status RunChunkPipeline(const ChunkJob& job, LaneExecutor& lane, PriorityGate& gate,
                              const ChunkPolicy& policy) {
  const PriorityGate::Running running = gate.Enter(static_cast<int>(job.spec.priority));
  job.timing->chunks = static_cast<int>(job.layout.chunk_count);
  absl::Status status = lane.Begin(job.spec, job.plan, job.layout, job.interrupt, job.timing);
  if (status.ok()) {
    lane.SetDirectOutput(job.sink.DirectOutput());
    try {
      status = PipelineRun(job, lane, gate, policy).Run();
    } catch (...) {
      // Whatever escaped, no work may be left behind on the lane (End waits for it).
      lane.End(absl::AbortedError("the job ended by an exception"), job.timing);
      throw;
    }
  }
  lane.End(status, job.timing);
  return status;
}

}  // namespace gpupipe::engine
