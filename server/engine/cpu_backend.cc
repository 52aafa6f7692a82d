#include "server/engine/cpu_backend.h"

#include <chrono>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/reference_ops.h"
#include "server/engine/chunk_plan.h"
#include "server/engine/chunking.h"
#include "server/engine/cpu_row_ops.h"
#include "server/engine/split_row_merge.h"

namespace gpupipe::engine {
namespace {

using Clock = std::chrono::steady_clock;

double MicrosBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

// A tensor's bytes, aligned for any element type.
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes) { Resize(bytes); }
  void Resize(size_t bytes) { words_.resize((bytes + 7) / 8); }
  void* data() { return words_.data(); }
  const void* data() const { return words_.data(); }
  void swap(Buffer& other) { words_.swap(other.words_); }

 private:
  std::vector<uint64_t> words_;
};

// Runs one elementwise or prologue-taking row step from `in` into `out` (sized for the step's
// output). A row step applies its prologue in the compute type first, as the kernels do on load
// (RunWithPrologue). False where the reference lacks the step's dtype.
bool RunStep(const PlanStep& step, const void* in, void* out) {
  namespace cpu = kernels::cpu;
  const kernels::ElementType in_type = ToElementType(step.in_dtype);
  if (step.kind == StepKind::kElementwise) {
    return cpu::Elementwise(in, in_type, out, step.input_elements(), step.program);
  }
  return cpu::RunWithPrologue(
      in, in_type, step.input_elements(), step.program, out, ToElementType(step.out_dtype),
      step.output_elements(), [&](const void* x, kernels::ElementType type, void* y) {
        switch (step.kind) {
          case StepKind::kRowReduce:
            return cpu::RowReduce(x, type, y, step.rows, step.cols, step.reduce);
          case StepKind::kRowArgmax:
            return cpu::RowArgmax(x, type, static_cast<int64_t*>(y), step.rows, step.cols);
          case StepKind::kRowSoftmax:
            return cpu::RowSoftmax(x, type, y, step.rows, step.cols);
          case StepKind::kRowNormalize:
            return cpu::RowNormalize(x, type, y, step.rows, step.cols, step.normalize);
          default:
            break;
        }
        return false;
      });
}

// Runs `plan` on the input bytes at `input` (plan.input_elements of the first step's dtype)
// with the reference ops; the result, in the plan's output dtype, is in `*current`. Adds each
// step's host time to `step_us` (one entry per step).
absl::Status RunPlanOnHost(const Plan& plan, const char* input, Buffer* current,
                           std::vector<double>* step_us) {
  const int64_t in_bytes =
      plan.steps.empty() ? 0 : plan.input_elements * plan.steps.front().input_itemsize();
  current->Resize(static_cast<size_t>(in_bytes));
  std::memcpy(current->data(), input, static_cast<size_t>(in_bytes));
  Buffer next;
  auto step_start = Clock::now();
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& step = plan.steps[i];
    next.Resize(static_cast<size_t>(step.output_elements() * step.output_itemsize()));
    if (step.resizes()) {
      if (absl::Status s = RunRowResizeOnCpu(step, current->data(), next.data()); !s.ok()) {
        return s;
      }
    } else if (!RunStep(step, current->data(), next.data())) {
      return absl::InternalError(absl::StrCat("the CPU reference has no ", step.ops, " for ",
                                              DTypeName(step.in_dtype)));
    }
    current->swap(next);
    const auto now = Clock::now();
    (*step_us)[i] += MicrosBetween(step_start, now);
    step_start = now;
  }
  return absl::OkStatus();
}

// Runs kSplitRowResize piece `chunk` on the input bytes at `input` (chunk.in_elements): its
// elementwise step if it has one, then the resize step with the row's state; the piece's
// result (chunk.out_elements) is in `*current`.
absl::Status RunPieceOnHost(const Chunk& chunk, const char* input, CpuSplitRowState* state,
                            Buffer* current, std::vector<double>* step_us) {
  const Plan& plan = chunk.plan;
  const size_t bytes = static_cast<size_t>(plan.max_bytes);
  current->Resize(bytes);
  std::memcpy(current->data(), input,
              static_cast<size_t>(chunk.in_elements * plan.steps.front().input_itemsize()));
  auto start = Clock::now();
  if (plan.steps.size() == 2) {
    const PlanStep& ew = plan.steps.front();
    if (!kernels::cpu::Elementwise(current->data(), ToElementType(ew.in_dtype), current->data(),
                                   chunk.in_elements, ew.program)) {
      return absl::InternalError(absl::StrCat("no CPU reference for ", ew.ops, " on ",
                                              DTypeName(ew.in_dtype)));
    }
    const auto now = Clock::now();
    (*step_us)[0] += MicrosBetween(start, now);
    start = now;
  }
  Buffer next(bytes);
  if (absl::Status s = RunRowResizePieceOnCpu(chunk, current->data(), next.data(), state);
      !s.ok()) {
    return s;
  }
  current->swap(next);
  step_us->back() += MicrosBetween(start, Clock::now());
  return absl::OkStatus();
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const CpuBackendOptions& options) : options_(options) {}

  std::string name() const override { return "cpu"; }
  std::optional<DeviceDescription> device() const override { return std::nullopt; }

  std::vector<PriorityLevel> levels() const override {
    return {{Priority::kLow, 0, options_.lanes_per_level},
            {Priority::kNormal, 0, options_.lanes_per_level},
            {Priority::kHigh, 0, options_.lanes_per_level}};
  }

  std::string LaneName(Priority priority, int lane) const override {
    return absl::StrCat(PriorityName(priority), "/", lane, " (cpu)");
  }

  std::vector<Staging> stagings() const override { return {Staging::kAuto}; }
  std::vector<LaunchMode> launch_modes() const override { return {LaunchMode::kAuto}; }

  PlanDescription Describe(const JobSpec& spec, const Plan& plan) const override {
    PlanDescription d;
    d.launch = "none";
    d.staging = "none";
    for (size_t i = 0; i < plan.steps.size(); ++i) {
      const PlanStep& step = plan.steps[i];
      d.kernels.push_back({absl::StrCat(StepKindName(step.kind), ".cpu"), static_cast<int>(i),
                           step.ops, step.rows, step.cols, 0, 0});
      if (i > 0) {
        d.edges.push_back({static_cast<int>(i) - 1, static_cast<int>(i), "stream",
                           StepDependencyReason(step.kind)});
      }
    }
    (void)spec;
    return d;
  }

  // Chunk by chunk, as the CUDA backend's pipeline (without the overlap): each chunk waits only
  // for its own input bytes, and its result is emitted before the next chunk runs.
  absl::Status Run(const JobSpec& spec, const Plan& plan, InputSource& input,
                   Priority priority, int lane, const ChunkEmitter& emit,
                   JobTiming* timing) override {
    const auto start = Clock::now();
    absl::StatusOr<ChunkLayout> layout =
        MakeChunkLayout(spec, plan, spec.chunk_bytes > 0 ? spec.chunk_bytes : options_.chunk_bytes,
                        options_.chunk_capacity_bytes);
    if (!layout.ok()) return layout.status();
    timing->stream = LaneName(priority, lane);
    timing->staging = "none";
    timing->launch = "none";
    timing->kernels = 0;
    timing->chunks = static_cast<int>(layout->chunk_count);
    std::vector<double> step_us(plan.steps.size(), 0.0);
    SplitRowCombiner combiner(plan, *layout);
    SplitRowResizeMerger merger(plan, *layout);
    CpuSplitRowState split_state;
    Buffer values;
    for (int64_t k = 0; k < layout->chunk_count; ++k) {
      const Chunk chunk = ChunkAt(plan, *layout, k);
      absl::StatusOr<const char*> bytes =
          input.WaitForBytes((chunk.in_offset + chunk.in_elements) * layout->in_itemsize);
      if (!bytes.ok()) return bytes.status();
      const char* all = *bytes;
      const auto chunk_start = Clock::now();
      const char* chunk_input = all + chunk.in_offset * layout->in_itemsize;
      if (absl::Status s =
              layout->mode == ChunkLayout::Mode::kSplitRowResize
                  ? RunPieceOnHost(chunk, chunk_input, &split_state, &values, &step_us)
                  : RunPlanOnHost(chunk.plan, chunk_input, &values, &step_us);
          !s.ok()) {
        return s;
      }
      const auto chunk_end = Clock::now();
      timing->compute_us += MicrosBetween(chunk_start, chunk_end);
      if (spec.timeline) {
        timing->timeline.push_back({"compute", "compute", static_cast<int>(k),
                                    MicrosBetween(start, chunk_start),
                                    MicrosBetween(start, chunk_end)});
      }
      const char* result = static_cast<const char*>(values.data());
      if (k == layout->chunk_count - 1) timing->output_ready = Clock::now();
      bool delivered = true;
      if (layout->mode == ChunkLayout::Mode::kSplitRow) {
        combiner.Add(chunk, result, all);
        if (chunk.last_piece) {
          const std::string row = combiner.Finish(chunk);
          delivered = emit(chunk.out_offset * layout->out_itemsize, row.data(),
                           static_cast<int64_t>(row.size()));
        }
      } else if (layout->mode == ChunkLayout::Mode::kSplitRowResize) {
        absl::StatusOr<SplitRowEmission> out = merger.Add(chunk, result);
        if (!out.ok()) return out.status();
        delivered = EmitInChunks(out->data, out->size, options_.max_chunk_bytes, emit,
                                 out->offset);
      } else {
        delivered = EmitInChunks(result, chunk.out_elements * layout->out_itemsize,
                                 options_.max_chunk_bytes, emit,
                                 chunk.out_offset * layout->out_itemsize);
      }
      if (!delivered) {
        return absl::CancelledError("the client went away while the result was streamed");
      }
    }
    if (spec.profile) {
      for (size_t i = 0; i < plan.steps.size(); ++i) {
        timing->steps.push_back({static_cast<int>(i), plan.steps[i].ops, 0, step_us[i]});
      }
    }
    return absl::OkStatus();
  }

 private:
  CpuBackendOptions options_;
};

}  // namespace

std::unique_ptr<Backend> CreateCpuBackend(const CpuBackendOptions& options) {
  return std::make_unique<CpuBackend>(options);
}

}  // namespace gpupipe::engine
