#include "server/engine/cpu_backend.h"

#include <chrono>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/reference_ops.h"
#include "server/engine/chunking.h"
#include "server/engine/cpu_row_ops.h"

namespace gpupipe::engine {
namespace {

// A tensor's bytes, aligned for any element type.
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes) { Resize(bytes); }
  void Resize(size_t bytes) { words_.resize((bytes + 7) / 8); }
  void* data() { return words_.data(); }
  const void* data() const { return words_.data(); }
  float* f32() { return reinterpret_cast<float*>(words_.data()); }
  void swap(Buffer& other) { words_.swap(other.words_); }

 private:
  std::vector<uint64_t> words_;
};

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
    // Byte buffers (8-byte aligned): steps read and write the dtypes of their plan step.
    Buffer current(static_cast<size_t>(input.size()));
    std::memcpy(current.data(), *input_bytes, static_cast<size_t>(input.size()));
    Buffer next;
    for (const PlanStep& step : plan.steps) {
      // Row ops apply their prologue program first, as the kernels do on load.
      if (step.kind != StepKind::kElementwise && !step.resizes()) {
        kernels::cpu::Elementwise(current.f32(), current.f32(), step.input_elements(),
                                  step.program);
      }
      next.Resize(static_cast<size_t>(step.output_elements() * step.output_itemsize()));
      switch (step.kind) {
        case StepKind::kElementwise:
          kernels::cpu::Elementwise(current.f32(), next.f32(), step.input_elements(),
                                    step.program);
          break;
        case StepKind::kRowReduce:
          kernels::cpu::RowReduce(current.f32(), next.f32(), step.rows, step.cols, step.reduce);
          break;
        case StepKind::kRowArgmax:
          kernels::cpu::RowArgmax(current.f32(), static_cast<int64_t*>(next.data()), step.rows,
                                  step.cols);
          break;
        case StepKind::kRowSoftmax:
          kernels::cpu::RowSoftmax(current.f32(), next.f32(), step.rows, step.cols);
          break;
        case StepKind::kRowNormalize:
          kernels::cpu::RowNormalize(current.f32(), next.f32(), step.rows, step.cols,
                                     step.normalize);
          break;
        case StepKind::kRowCumsum:
        case StepKind::kRowHistogram:
        case StepKind::kRowConvolve:
        case StepKind::kRowTopk:
          if (absl::Status s = RunRowResizeOnCpu(step, current.data(), next.data()); !s.ok()) {
            return s;
          }
          break;
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
    const char* output = static_cast<const char*>(current.data());
    if (!EmitInChunks(output, bytes,
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
