#include "server/engine/planning/step_work.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_format.h"

namespace gpupipe::engine {
namespace {

constexpr double kMaxWork = static_cast<double>(std::numeric_limits<int64_t>::max());

int64_t Saturate(double work) {
  return work >= kMaxWork ? std::numeric_limits<int64_t>::max()
                          : std::max<int64_t>(1, static_cast<int64_t>(work));
}

}  // namespace

int64_t RowWork(const PlanStep& step) {
  const double cols = static_cast<double>(step.cols);
  // Elementwise ops run on load: one operation each per element, at least one for the load.
  const double prologue = std::max<int32_t>(1, step.program.count);
  switch (step.kind) {
    case StepKind::kElementwise:
      return Saturate(prologue);
    case StepKind::kRowReduce:
    case StepKind::kRowArgmax:
      return Saturate(cols * prologue);
    case StepKind::kRowSoftmax:
    case StepKind::kRowNormalize:
      // A statistics pass and a normalizing pass over the row.
      return Saturate(cols * (prologue + 2));
    case StepKind::kRowCumsum:
      return Saturate(cols);
    case StepKind::kRowHistogram:
      return Saturate(cols + static_cast<double>(step.op.bins));
    case StepKind::kRowConvolve:
      return Saturate(static_cast<double>(step.out_cols) *
                      static_cast<double>(std::max<size_t>(1, step.op.taps.size())));
    case StepKind::kRowTopk:
      return Saturate(cols + static_cast<double>(step.op.k) * 2);
  }
  return Saturate(cols);
}

int64_t StepWork(const PlanStep& step) {
  const double rows = step.kind == StepKind::kElementwise
                          ? static_cast<double>(step.input_elements())
                          : static_cast<double>(step.rows);
  return Saturate(rows * static_cast<double>(RowWork(step)));
}

int64_t PlanWork(const Plan& plan) {
  double total = 0;
  for (const PlanStep& step : plan.steps) total += static_cast<double>(StepWork(step));
  return Saturate(total);
}

absl::Status CheckWork(const Plan& plan, int64_t max_work_per_byte) {
  if (max_work_per_byte <= 0 || plan.steps.empty()) return absl::OkStatus();
  const double bytes =
      static_cast<double>(plan.input_elements) *
          static_cast<double>(plan.steps.front().input_itemsize()) +
      static_cast<double>(plan.output_elements) * static_cast<double>(DTypeSize(plan.output_dtype));
  const double work = static_cast<double>(PlanWork(plan));
  const double allowed =
      static_cast<double>(max_work_per_byte) * bytes + static_cast<double>(kWorkAllowance);
  if (work <= allowed) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrFormat(
      "ops: this job would take about %.3g element operations for %.0f bytes of input and "
      "output, over the %d per byte (plus %.3g) a job may take (gpupiped --max-work-per-byte); "
      "use fewer or shorter ops, or larger inputs per job",
      work, bytes, max_work_per_byte, static_cast<double>(kWorkAllowance)));
}

}  // namespace gpupipe::engine
