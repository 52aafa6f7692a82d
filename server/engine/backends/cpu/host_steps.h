// The CPU lane's computation: a chunk's plan run with the reference ops of kernels/cpu, in
// slices of about kHostSliceWork operations (planning/step_work.h), asking the job's interrupt
// between slices, so a costly chunk (a long chain of ops, a convolution with many taps) stops
// within milliseconds of a cancel, a deadline or a shutdown. A slice is a range of elements,
// a range of rows, or a range of one convolved row's outputs; slicing never changes a result,
// since every op works per element or per row and a range of a convolution's outputs is
// computed as the whole row's are.
//
// Thread safety: none; one lane's job uses its buffers.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "server/engine/backends/cpu/cpu_row_ops.h"
#include "server/engine/job/interrupt.h"
#include "server/engine/planning/chunk_plan.h"
#include "server/engine/planning/plan.h"

namespace gpupipe::engine {

// A tensor's bytes, aligned for any element type. Grows on demand and never shrinks, so a
// lane allocates once per chunk size rather than once per chunk.
class HostBuffer {
 public:
  char* Reserve(int64_t bytes);
  char* data() { return reinterpret_cast<char*>(words_.get()); }

 private:
  std::unique_ptr<uint64_t[]> words_;
  int64_t capacity_ = 0;
};

// The two buffers a plan's steps alternate between.
struct HostBuffers {
  HostBuffer a;
  HostBuffer b;
};

// Runs `plan` on `input` (plan.input_elements of the first step's dtype). `*result` points at
// the output (plan.output_elements of the plan's output dtype) in `buffers`, valid until they
// are used again. Adds each step's time to `step_us` (one entry per step). The interrupt's
// status when it stops the work; INTERNAL where the reference rejects a step.
absl::Status RunPlanOnHost(const Plan& plan, const char* input, const JobInterrupt& interrupt,
                           HostBuffers* buffers, const char** result, std::vector<double>* step_us);

// Runs kSplitRowResize piece `chunk` on its input (chunk.in_elements): its elementwise step if
// it has one, then the resize step with the row's state. `*result` points at the piece's
// chunk.out_elements, as above.
absl::Status RunPieceOnHost(const Chunk& chunk, const char* input, CpuSplitRowState* state,
                            const JobInterrupt& interrupt, HostBuffers* buffers,
                            const char** result, std::vector<double>* step_us);

}  // namespace gpupipe::engine
