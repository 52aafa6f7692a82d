#include "server/engine/backends/cpu/cpu_backend.h"

#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/engine/backends/cpu/cpu_row_ops.h"
#include "server/engine/backends/cpu/host_steps.h"
#include "server/engine/planning/chunk_plan.h"

namespace gpupipe::engine {
namespace {

using Clock = std::chrono::steady_clock;

double MicrosBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

// A CPU lane runs one chunk at a time: Enqueue computes it, so it is ready at once.
class CpuLane final : public LaneExecutor {
 public:
  explicit CpuLane(std::string name) : name_(std::move(name)) {}

  int window() const override { return 1; }

  absl::Status Begin(const JobSpec& spec, const Plan& plan, const ChunkLayout& layout,
                     const JobInterrupt& interrupt, JobTiming* timing) override {
    spec_ = &spec;
    interrupt_ = &interrupt;
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

  absl::Status Stage(const Chunk& chunk, const InputChunk& input) override {
    inputs_[chunk.index % 2] = input.data;  // the chunk after may be staged before it runs
    return absl::OkStatus();
  }

  absl::Status Enqueue(const Chunk& chunk) override {
    const auto chunk_start = Clock::now();
    if (absl::Status s =
            layout_->mode == ChunkLayout::Mode::kSplitRowResize
                ? RunPieceOnHost(chunk, inputs_[chunk.index % 2], &split_state_, *interrupt_,
                                 &buffers_, &result_, &step_us_)
                : RunPlanOnHost(chunk.plan, inputs_[chunk.index % 2], *interrupt_, &buffers_,
                                &result_, &step_us_);
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
  absl::StatusOr<const char*> Finish(const Chunk&, JobTiming*) override { return result_; }

  void End(const absl::Status& status, JobTiming* timing) override {
    if (status.ok() && spec_->profile) {
      for (size_t i = 0; i < step_us_.size(); ++i) {
        timing->steps.push_back({static_cast<int>(i), plan_->steps[i].ops, 0, step_us_[i]});
      }
    }
    inputs_ = {};
    interrupt_ = nullptr;
  }

 private:
  const std::string name_;
  const JobSpec* spec_ = nullptr;
  const Plan* plan_ = nullptr;
  const ChunkLayout* layout_ = nullptr;
  const JobInterrupt* interrupt_ = nullptr;
  JobTiming* timing_ = nullptr;
  Clock::time_point start_;
  std::vector<double> step_us_;
  CpuSplitRowState split_state_;
  std::array<const char*, 2> inputs_{};  // staged chunks' inputs, by chunk index parity
  HostBuffers buffers_;
  const char* result_ = nullptr;
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
