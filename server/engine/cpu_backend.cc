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

  absl::Status Run(const JobSpec& spec, const Plan& plan, const std::string& input,
                   Priority priority, int lane, const ChunkEmitter& emit,
                   JobTiming* timing) override {
    const auto start = std::chrono::steady_clock::now();
    std::vector<float> current(plan.input_elements);
    std::memcpy(current.data(), input.data(), input.size());
    std::vector<float> next;
    for (const PlanStep& step : plan.steps) {
      next.resize(step.output_elements());
      switch (step.kind) {
        case StepKind::kElementwise:
          kernels::cpu::Elementwise(current.data(), next.data(), step.input_elements(),
                                    step.program);
          break;
        case StepKind::kRowSum:
          kernels::cpu::Elementwise(current.data(), current.data(), step.input_elements(),
                                    step.program);
          kernels::cpu::RowSum(current.data(), next.data(), step.rows, step.cols);
          break;
        case StepKind::kRowSoftmax:
          kernels::cpu::Elementwise(current.data(), current.data(), step.input_elements(),
                                    step.program);
          kernels::cpu::RowSoftmax(current.data(), next.data(), step.rows, step.cols);
          break;
      }
      current.swap(next);
    }
    timing->compute_us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    timing->stream = LaneName(priority, lane);
    timing->staging = "none";
    timing->launch = "none";
    timing->kernels = 0;
    const int64_t bytes = plan.output_elements * DTypeSize(spec.dtype);
    timing->output_ready = std::chrono::steady_clock::now();
    if (!EmitInChunks(reinterpret_cast<const char*>(current.data()), bytes,
                      options_.max_chunk_bytes, emit)) {
      return absl::CancelledError("the client went away while the result was streamed");
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
