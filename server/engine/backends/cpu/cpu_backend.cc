#include "server/engine/backends/cpu/cpu_backend.h"

#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/reference_ops.h"
#include "server/engine/planning/chunk_plan.h"
#include "server/engine/backends/cpu/cpu_row_ops.h"

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

// A CPU lane runs one chunk at a time: Enqueue computes it, so it is ready at once.
class CpuLane final : public LaneExecutor {
 public:
  explicit CpuLane(std::string name) : name_(std::move(name)) {}

  int window() const override { return 1; }

  absl::Status Begin(const JobSpec& spec, const Plan& plan, const ChunkLayout& layout,
                     JobTiming* timing) override {
    spec_ = &spec;
    plan_ = &plan;
    layout_ = &layout;
    timing_ = timing;
    start_ = Clock::now();
    step_us_.assign(plan.steps.size(), 0.0);
    split_state_ = CpuSplitRowState{};
    timing->stream = name_;
    timing->staging = "none";
    timing->launch = "none";
    timing->kernels = 0;
    return absl::OkStatus();
  }

  absl::Status Stage(const Chunk&, const InputChunk& input) override {
    input_ = input.data;
    return absl::OkStatus();
  }

  absl::Status Enqueue(const Chunk& chunk) override {
    const auto chunk_start = Clock::now();
    if (absl::Status s = layout_->mode == ChunkLayout::Mode::kSplitRowResize
                             ? RunPieceOnHost(chunk, input_, &split_state_, &values_, &step_us_)
                             : RunPlanOnHost(chunk.plan, input_, &values_, &step_us_);
        !s.ok()) {
      return s;
    }
    const auto chunk_end = Clock::now();
    timing_->compute_us += MicrosBetween(chunk_start, chunk_end);
    if (spec_->timeline) {
      timing_->timeline.push_back({"compute", "compute", static_cast<int>(chunk.index),
                                   MicrosBetween(start_, chunk_start),
                                   MicrosBetween(start_, chunk_end)});
    }
    return absl::OkStatus();
  }

  // Step times are summed in Enqueue and reported once, at End.
  absl::Status Profile(const Chunk&, JobTiming*) override { return absl::OkStatus(); }
  absl::StatusOr<bool> Ready(const Chunk&) override { return true; }
  absl::StatusOr<const char*> Finish(const Chunk&, JobTiming*) override {
    return static_cast<const char*>(values_.data());
  }

  void End(const absl::Status& status, JobTiming* timing) override {
    if (status.ok() && spec_->profile) {
      for (size_t i = 0; i < step_us_.size(); ++i) {
        timing->steps.push_back({static_cast<int>(i), plan_->steps[i].ops, 0, step_us_[i]});
      }
    }
    input_ = nullptr;
  }

 private:
  const std::string name_;
  const JobSpec* spec_ = nullptr;
  const Plan* plan_ = nullptr;
  const ChunkLayout* layout_ = nullptr;
  JobTiming* timing_ = nullptr;
  Clock::time_point start_;
  std::vector<double> step_us_;
  CpuSplitRowState split_state_;
  const char* input_ = nullptr;
  Buffer values_;
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const CpuBackendOptions& options) : options_(options) {
    for (int p = 0; p < kPriorityLevels; ++p) {
      for (int lane = 0; lane < options_.lanes_per_level; ++lane) {
        lanes_[p].push_back(
            std::make_unique<CpuLane>(LaneName(static_cast<Priority>(p), lane)));
      }
    }
  }

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

  int64_t default_chunk_bytes() const override { return options_.chunk_bytes; }
  int64_t chunk_capacity_bytes() const override { return options_.chunk_capacity_bytes; }

  LaneExecutor& lane(Priority priority, int lane) override {
    return *lanes_[static_cast<int>(priority)][static_cast<size_t>(lane)];
  }

 private:
  CpuBackendOptions options_;
  std::array<std::vector<std::unique_ptr<CpuLane>>, kPriorityLevels> lanes_;
};

}  // namespace

std::unique_ptr<Backend> CreateCpuBackend(const CpuBackendOptions& options) {
  return std::make_unique<CpuBackend>(options);
}

}  // namespace gpupipe::engine
