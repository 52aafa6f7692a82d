// The CPU backend's runner for the row ops that take any dtype and may replace the last axis
// (cumsum, histogram, convolve, topk): maps a plan step onto the kernels/cpu references.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "kernels/common/convolve_geometry.h"
#include "server/engine/planning/chunk_plan.h"
#include "server/engine/planning/plan.h"

namespace gpupipe::engine {

// Runs `step` (kRowCumsum, kRowHistogram, kRowConvolve or kRowTopk) from `in` (rows x cols of
// step.in_dtype) into `out` (rows x step.out_cols of step.out_dtype). INTERNAL if the
// reference rejects arguments that validation accepted.
absl::Status RunRowResizeOnCpu(const PlanStep& step, const void* in, void* out);

// Full outputs [window.out_begin, window.out_begin + window.out_count) of one row of convolve
// step `step` into `out`, from the window's input at `in` (convolve_geometry.h). The CPU lane
// computes a costly row as several such windows (host_steps.h).
absl::Status ConvolveWindowOnCpu(const PlanStep& step, const kernels::ConvolveWindow& window,
                                 const void* in, void* out);

// What a row split into kSplitRowResize pieces keeps between its pieces (chunk_plan.h): the
// cumsum carry (one accumulator of the kernel's type) and the histogram counts.
struct CpuSplitRowState {
  alignas(8) unsigned char carry[8] = {};
  std::vector<int64_t> counts;
};

// Runs the resize step of kSplitRowResize piece `chunk` (chunk.plan.steps.back(): cumsum,
// histogram or topk; a convolve piece is a window, ConvolveWindowOnCpu) from `in` (the piece's
// input after its elementwise step) into `out` (chunk.out_elements of the output dtype),
// keeping the row's carry or counts in `state` (reset by piece 0).
absl::Status RunRowResizePieceOnCpu(const Chunk& chunk, const void* in, void* out,
                                    CpuSplitRowState* state);

}  // namespace gpupipe::engine
