// What a plan step costs in element operations: the measure behind the work limit
// (Limits::max_work_per_byte, a request that is cheap to send and costly to run is refused) and
// behind the CPU lane's slices (backends/cpu/host_steps.h: the job's interrupt is asked every
// kHostSliceWork operations). Rough by design, the same for every backend: per input element
// one operation per elementwise op and per pass an op makes over its row, per output a
// product per tap for convolve, and a row's bins or k for histogram and topk.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "server/engine/planning/plan.h"

namespace gpupipe::engine {

// Operations per slice of host work between two interrupt checks: a few milliseconds on one
// core for the reference ops.
inline constexpr int64_t kHostSliceWork = int64_t{1} << 20;

// Work every job may take whatever its size (Limits::max_work_per_byte): well under a second
// of host time.
inline constexpr int64_t kWorkAllowance = int64_t{1} << 26;

// One row of `step` (an elementwise step's row is one element). At least 1.
int64_t RowWork(const PlanStep& step);
// The whole step, saturating at INT64_MAX.
int64_t StepWork(const PlanStep& step);
// Every step of `plan`, saturating at INT64_MAX.
int64_t PlanWork(const Plan& plan);

// OK when the plan's work is within `max_work_per_byte` per byte of its input and output plus
// kWorkAllowance (0: no limit); RESOURCE_EXHAUSTED saying by how much otherwise.
absl::Status CheckWork(const Plan& plan, int64_t max_work_per_byte);

}  // namespace gpupipe::engine
