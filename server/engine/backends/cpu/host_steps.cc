#include "server/engine/backends/cpu/host_steps.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "kernels/common/convolve_geometry.h"
#include "kernels/cpu/reference_ops.h"
#include "server/engine/planning/kernel_types.h"
#include "server/engine/planning/step_work.h"

namespace gpupipe::engine {
namespace {

using Clock = std::chrono::steady_clock;
namespace cpu = kernels::cpu;

double MicrosBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

absl::Status NoReference(const PlanStep& step) {
  return absl::InternalError(
      absl::StrCat("the CPU reference has no ", step.ops, " for ", DTypeName(step.in_dtype)));
}

// Output elements of one row of a row step.
int64_t OutputRowElements(const PlanStep& step) {
  return step.reduces() ? 1 : step.resizes() ? step.out_cols : step.cols;
}

// `n` elements of elementwise program `program` from `in` to `out` (same type, may be equal),
// in slices.
absl::Status ElementwiseSliced(const PlanStep& step, const kernels::EwProgram& program,
                               const char* in, char* out, int64_t n,
                               const JobInterrupt& interrupt) {
  const int64_t itemsize = step.input_itemsize();
  const int64_t per_slice = std::max<int64_t>(1, kHostSliceWork / RowWork(step));
  for (int64_t e = 0; e < n; e += per_slice) {
    if (absl::Status s = interrupt.Check(); !s.ok()) return s;
    if (!cpu::Elementwise(in + e * itemsize, ToElementType(step.in_dtype), out + e * itemsize,
                          std::min(per_slice, n - e), program)) {
      return NoReference(step);
    }
  }
  return absl::OkStatus();
}

// A reduction, argmax, softmax or normalization of `step.rows` rows, its prologue applied in
// the compute type first, as the kernels apply it on load.
absl::Status RowStepOnHost(const PlanStep& step, const char* in, char* out) {
  const kernels::ElementType in_type = ToElementType(step.in_dtype);
  const bool ok = cpu::RunWithPrologue(
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
            return false;
        }
      });
  return ok ? absl::OkStatus() : NoReference(step);
}

// Outputs of `window` of one convolved row, in slices of outputs, each computed from the
// input elements it reads; `in` holds the window's input, `out` its out_count outputs.
absl::Status ConvolveWindowSliced(const PlanStep& step, const kernels::ConvolveWindow& window,
                                  const char* in, char* out, const JobInterrupt& interrupt) {
  const int64_t taps = static_cast<int64_t>(step.op.taps.size());
  const int64_t itemsize = step.input_itemsize();  // convolve keeps the dtype
  const int64_t per_slice = std::max<int64_t>(1, kHostSliceWork / std::max<int64_t>(1, taps));
  for (int64_t o = 0; o < window.out_count; o += per_slice) {
    if (absl::Status s = interrupt.Check(); !s.ok()) return s;
    kernels::ConvolveWindow slice;
    slice.row_length = window.row_length;
    slice.out_begin = window.out_begin + o;
    slice.out_count = std::min(per_slice, window.out_count - o);
    kernels::ConvolveWindowInput(window.row_length, taps, slice.out_begin, slice.out_count,
                                 &slice.in_begin, &slice.in_count);
    if (slice.in_count == 0) slice.in_begin = window.in_begin;  // outputs of the zero padding
    if (absl::Status s = ConvolveWindowOnCpu(
            step, slice, in + (slice.in_begin - window.in_begin) * itemsize, out + o * itemsize);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// Every row of a convolve step whose rows are each worth several slices.
absl::Status ConvolveRowsSliced(const PlanStep& step, const char* in, char* out,
                                const JobInterrupt& interrupt) {
  const int64_t taps = static_cast<int64_t>(step.op.taps.size());
  kernels::ConvolveWindow row;
  row.row_length = step.cols;
  row.in_begin = 0;
  row.in_count = step.cols;
  kernels::ConvolveOutputRange(step.cols, taps, ToKernelConvolveMode(step.op.mode), &row.out_begin,
                               &row.out_count);
  const int64_t itemsize = step.input_itemsize();
  for (int64_t r = 0; r < step.rows; ++r) {
    if (absl::Status s = ConvolveWindowSliced(step, row, in + r * step.cols * itemsize,
                                              out + r * step.out_cols * itemsize, interrupt);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// Runs one step of a chunk's plan from `in` into `out` (sized for its output), in slices.
absl::Status RunStepSliced(const PlanStep& step, const char* in, char* out,
                           const JobInterrupt& interrupt) {
  if (step.kind == StepKind::kElementwise) {
    return ElementwiseSliced(step, step.program, in, out, step.input_elements(), interrupt);
  }
  const int64_t row_work = RowWork(step);
  if (step.kind == StepKind::kRowConvolve && row_work > kHostSliceWork) {
    return ConvolveRowsSliced(step, in, out, interrupt);
  }
  const int64_t rows_per_slice = std::max<int64_t>(1, kHostSliceWork / row_work);
  const int64_t in_row_bytes = step.cols * step.input_itemsize();
  const int64_t out_row_bytes = OutputRowElements(step) * step.output_itemsize();
  PlanStep slice = step;
  for (int64_t r = 0; r < step.rows; r += rows_per_slice) {
    if (absl::Status s = interrupt.Check(); !s.ok()) return s;
    slice.rows = std::min(rows_per_slice, step.rows - r);
    const char* slice_in = in + r * in_row_bytes;
    char* slice_out = out + r * out_row_bytes;
    if (absl::Status s = step.resizes() ? RunRowResizeOnCpu(slice, slice_in, slice_out)
                                        : RowStepOnHost(slice, slice_in, slice_out);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace

char* HostBuffer::Reserve(int64_t bytes) {
  const int64_t words = (std::max<int64_t>(bytes, 1) + 7) / 8;
  if (words > capacity_) {
    // Uninitialized: every step writes its whole output.
    words_.reset(new uint64_t[static_cast<size_t>(words)]);
    capacity_ = words;
  }
  return data();
}

absl::Status RunPlanOnHost(const Plan& plan, const char* input, const JobInterrupt& interrupt,
                           HostBuffers* buffers, const char** result,
                           std::vector<double>* step_us) {
  const char* in = input;
  auto step_start = Clock::now();
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& step = plan.steps[i];
    HostBuffer& target = i % 2 == 0 ? buffers->a : buffers->b;
    char* out = target.Reserve(step.output_elements() * step.output_itemsize());
    if (absl::Status s = RunStepSliced(step, in, out, interrupt); !s.ok()) return s;
    in = out;
    const auto now = Clock::now();
    (*step_us)[i] += MicrosBetween(step_start, now);
    step_start = now;
  }
  *result = in;
  return absl::OkStatus();
}

absl::Status RunPieceOnHost(const Chunk& chunk, const char* input, CpuSplitRowState* state,
                            const JobInterrupt& interrupt, HostBuffers* buffers,
                            const char** result, std::vector<double>* step_us) {
  const Plan& plan = chunk.plan;
  const PlanStep& resize = plan.steps.back();
  const char* in = input;
  auto start = Clock::now();
  if (plan.steps.size() == 2) {
    const PlanStep& ew = plan.steps.front();
    char* out = buffers->a.Reserve(chunk.in_elements * ew.output_itemsize());
    if (absl::Status s = ElementwiseSliced(ew, ew.program, in, out, chunk.in_elements, interrupt);
        !s.ok()) {
      return s;
    }
    in = out;
    const auto now = Clock::now();
    (*step_us)[0] += MicrosBetween(start, now);
    start = now;
  }
  char* out = buffers->b.Reserve(plan.max_bytes);
  if (absl::Status s = interrupt.Check(); !s.ok()) return s;
  if (absl::Status s = resize.kind == StepKind::kRowConvolve
                           ? ConvolveWindowSliced(resize, chunk.window, in, out, interrupt)
                           : RunRowResizePieceOnCpu(chunk, in, out, state);
      !s.ok()) {
    return s;
  }
  step_us->back() += MicrosBetween(start, Clock::now());
  *result = out;
  return absl::OkStatus();
}

}  // namespace gpupipe::engine
