#include "server/engine/cpu_backend.h"

#include <chrono>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/reference_ops.h"
#include "server/engine/chunk_plan.h"
#include "server/engine/chunking.h"

namespace gpupipe::engine {
namespace {

using Clock = std::chrono::steady_clock;

double MicrosBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

// Runs `plan` on `n` floats at `input` with the reference ops; the result is in `*values` or,
// for argmax, in `*indices`. Adds each step's host time to `step_us` (one entry per step).
void RunPlanOnHost(const Plan& plan, const float* input, std::vector<float>* values,
                   std::vector<int64_t>* indices, std::vector<double>* step_us) {
  std::vector<float>& current = *values;
  current.assign(input, input + plan.input_elements);
  std::vector<float> next;
  auto step_start = Clock::now();
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& step = plan.steps[i];
    // Row ops apply their prologue program first, as the kernels do on load.
    if (step.kind != StepKind::kElementwise) {
      kernels::cpu::Elementwise(current.data(), current.data(), step.input_elements(),
                                step.program);
    }
    next.resize(step.output_elements());
    switch (step.kind) {
      case StepKind::kElementwise:
        kernels::cpu::Elementwise(current.data(), next.data(), step.input_elements(),
                                  step.program);
        break;
      case StepKind::kRowReduce:
        kernels::cpu::RowReduce(current.data(), next.data(), step.rows, step.cols, step.reduce);
        break;
      case StepKind::kRowArgmax:
        // argmax yields int64 indices; validation guarantees nothing runs after it.
        indices->resize(step.rows);
        kernels::cpu::RowArgmax(current.data(), indices->data(), step.rows, step.cols);
        break;
      case StepKind::kRowSoftmax:
        kernels::cpu::RowSoftmax(current.data(), next.data(), step.rows, step.cols);
        break;
      case StepKind::kRowNormalize:
        kernels::cpu::RowNormalize(current.data(), next.data(), step.rows, step.cols,
                                   step.normalize);
        break;
    }
    current.swap(next);
    const auto now = Clock::now();
    (*step_us)[i] += MicrosBetween(step_start, now);
    step_start = now;
  }
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
    std::vector<float> values;
    std::vector<int64_t> indices;
    for (int64_t k = 0; k < layout->chunk_count; ++k) {
      const Chunk chunk = ChunkAt(plan, *layout, k);
      absl::StatusOr<const char*> bytes =
          input.WaitForBytes((chunk.in_offset + chunk.in_elements) * layout->in_itemsize);
      if (!bytes.ok()) return bytes.status();
      const auto* all = reinterpret_cast<const float*>(*bytes);
      const auto chunk_start = Clock::now();
      RunPlanOnHost(chunk.plan, all + chunk.in_offset, &values, &indices, &step_us);
      const auto chunk_end = Clock::now();
      timing->compute_us += MicrosBetween(chunk_start, chunk_end);
      if (spec.timeline) {
        timing->timeline.push_back({"compute", "compute", static_cast<int>(k),
                                    MicrosBetween(start, chunk_start),
                                    MicrosBetween(start, chunk_end)});
      }
      const char* result = plan.output_dtype == DType::kInt64
                               ? reinterpret_cast<const char*>(indices.data())
                               : reinterpret_cast<const char*>(values.data());
      if (k == layout->chunk_count - 1) timing->output_ready = Clock::now();
      bool delivered = true;
      if (layout->mode == ChunkLayout::Mode::kSplitRow) {
        combiner.Add(chunk, result, all);
        if (chunk.last_piece) {
          const std::string row = combiner.Finish(chunk);
          delivered = emit(chunk.out_offset * layout->out_itemsize, row.data(),
                           static_cast<int64_t>(row.size()));
        }
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
