#include "server/engine/backends/cpu/cpu_row_ops.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/common/convolve_geometry.h"
#include "kernels/cpu/convolve_reference.h"
#include "kernels/cpu/cumsum_reference.h"
#include "kernels/cpu/histogram_reference.h"
#include "kernels/cpu/topk_reference.h"
#include "server/engine/planning/kernel_types.h"

namespace gpupipe::engine {
namespace {

absl::Status Rejected(const PlanStep& step) {
  return absl::InternalError(absl::StrCat("step ", step.ops, " (", StepKindName(step.kind),
                                          ") was rejected by the CPU reference for ",
                                          DTypeName(step.in_dtype), " ", step.rows, "x",
                                          step.cols));
}

}  // namespace

absl::Status RunRowResizeOnCpu(const PlanStep& step, const void* in, void* out) {
  const kernels::ElementType type = ToElementType(step.in_dtype);
  const OpSpec& op = step.op;
  bool ok = false;
  switch (step.kind) {
    case StepKind::kRowCumsum:
      ok = kernels::cpu::RowCumsum(in, type, out, step.rows, step.cols);
      break;
    case StepKind::kRowHistogram:
      ok = kernels::cpu::RowHistogram(in, type, static_cast<int64_t*>(out), step.rows, step.cols,
                                       static_cast<int32_t>(op.bins), op.lo, op.hi,
                                       /*accumulate=*/false);
      break;
    case StepKind::kRowConvolve:
      ok = kernels::cpu::RowConvolve(in, type, out, step.rows, step.cols, op.taps.data(),
                                     static_cast<int32_t>(op.taps.size()),
                                     ToKernelConvolveMode(op.mode));
      break;
    case StepKind::kRowTopk:
      ok = kernels::cpu::RowTopk(in, type, out, step.rows, step.cols, static_cast<int32_t>(op.k));
      break;
    default:
      break;
  }
  if (!ok) return Rejected(step);
  return absl::OkStatus();
}

absl::Status ConvolveWindowOnCpu(const PlanStep& step, const kernels::ConvolveWindow& window,
                                 const void* in, void* out) {
  if (step.kind != StepKind::kRowConvolve ||
      !kernels::cpu::RowConvolveWindow(in, ToElementType(step.in_dtype), out, window,
                                       step.op.taps.data(),
                                       static_cast<int32_t>(step.op.taps.size()))) {
    return Rejected(step);
  }
  return absl::OkStatus();
}

absl::Status RunRowResizePieceOnCpu(const Chunk& chunk, const void* in, void* out,
                                    CpuSplitRowState* state) {
  const PlanStep& step = chunk.plan.steps.back();
  const kernels::ElementType type = ToElementType(step.in_dtype);
  const OpSpec& op = step.op;
  bool ok = false;
  switch (step.kind) {
    case StepKind::kRowCumsum:
      if (chunk.piece == 0) std::memset(state->carry, 0, sizeof(state->carry));
      ok = kernels::cpu::RowCumsum(in, type, out, 1, step.cols, state->carry);
      break;
    case StepKind::kRowHistogram:
      if (chunk.piece == 0) state->counts.assign(static_cast<size_t>(op.bins), 0);
      ok = kernels::cpu::RowHistogram(in, type, state->counts.data(), 1, step.cols,
                                       static_cast<int32_t>(op.bins), op.lo, op.hi,
                                       /*accumulate=*/true);
      if (ok && chunk.last_piece) {
        std::memcpy(out, state->counts.data(), state->counts.size() * sizeof(int64_t));
      }
      break;
    case StepKind::kRowTopk:
      ok = kernels::cpu::RowTopk(in, type, out, 1, step.cols, static_cast<int32_t>(op.k));
      break;
    default:
      break;
  }
  if (!ok) return Rejected(step);
  return absl::OkStatus();
}

}  // namespace gpupipe::engine
