#include "server/engine/cpu_backend.h"

#include <chrono>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/reference_ops.h"
#include "server/engine/chunking.h"

namespace gpupipe::engine {
namespace {

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

  absl::Status Run(const JobSpec& spec, const Plan& plan, InputSource& input,
                   Priority priority, int lane, const ChunkEmitter& emit,
                   JobTiming* timing) override {
    const auto start = std::chrono::steady_clock::now();
    auto step_start = start;
    int step_index = 0;
    absl::StatusOr<const char*> input_bytes = input.WaitForBytes(input.size());
    if (!input_bytes.ok()) return input_bytes.status();
    std::vector<char> current(static_cast<size_t>(input.size()));
    std::memcpy(current.data(), *input_bytes, static_cast<size_t>(input.size()));
    std::vector<char> next;
    for (const PlanStep& step : plan.steps) {
      if (!RunStep(step, current, next)) {
        return absl::InternalError(absl::StrCat("the CPU reference has no ", step.ops, " for ",
                                                kernels::ElementTypeName(step.in_type)));
      }
      current.swap(next);
      if (spec.profile) {
        const auto now = std::chrono::steady_clock::now();
        timing->steps.push_back(
            {step_index, step.ops, 0,
             std::chrono::duration<double, std::micro>(now - step_start).count()});
        step_start = now;
      }
      ++step_index;
    }
    timing->compute_us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    timing->stream = LaneName(priority, lane);
    timing->staging = "none";
    timing->launch = "none";
    timing->kernels = 0;
    const int64_t bytes = plan.output_elements * DTypeSize(plan.output_dtype);
    timing->output_ready = std::chrono::steady_clock::now();
    if (!EmitInChunks(current.data(), bytes,
                      options_.max_chunk_bytes, emit)) {
      return absl::CancelledError("the client went away while the result was streamed");
    }
    return absl::OkStatus();
  }

 private:
  // Runs one step from `in` into `out` (resized to the step's output). A row step applies its
  // prologue in the compute type first, as the kernels do on load (RunWithPrologue).
  static bool RunStep(const PlanStep& step, const std::vector<char>& in, std::vector<char>& out) {
    namespace cpu = kernels::cpu;
    out.resize(static_cast<size_t>(step.output_elements() * step.output_itemsize()));
    if (step.kind == StepKind::kElementwise) {
      return cpu::Elementwise(in.data(), step.in_type, out.data(), step.input_elements(),
                              step.program);
    }
    return cpu::RunWithPrologue(
        in.data(), step.in_type, step.input_elements(), step.program, out.data(), step.out_type,
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
            case StepKind::kElementwise:
              break;
          }
          return false;
        });
  }

  CpuBackendOptions options_;
};

}  // namespace

std::unique_ptr<Backend> CreateCpuBackend(const CpuBackendOptions& options) {
  return std::make_unique<CpuBackend>(options);
}

}  // namespace gpupipe::engine
