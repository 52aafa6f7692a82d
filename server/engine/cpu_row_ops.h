// The CPU backend's runner for the row ops that take any dtype and may replace the last axis
// (cumsum, histogram, convolve, topk): maps a plan step onto the kernels/cpu references.
#pragma once

#include "absl/status/status.h"
#include "server/engine/plan.h"

namespace gpupipe::engine {

// Runs `step` (kRowCumsum, kRowHistogram, kRowConvolve or kRowTopk) from `in` (rows x cols of
// step.in_dtype) into `out` (rows x step.out_cols of step.out_dtype). INTERNAL if the
// reference rejects arguments that validation accepted.
absl::Status RunRowResizeOnCpu(const PlanStep& step, const void* in, void* out);

}  // namespace gpupipe::engine
