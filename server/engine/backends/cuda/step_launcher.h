// Maps the steps of a plan onto the kernel library: which kernels each step launches on a lane
// and what they are, so that running, capturing and explaining a plan share one mapping.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "kernels/cuda/ops.h"
#include "server/engine/planning/chunk_plan.h"
#include "server/engine/planning/plan.h"

namespace gpupipe::engine {

// The memory one plan runs in: two ping-pong device buffers and the kernels' workspace; and,
// where set, where the plan's first step reads its input (`input`) and its last step writes
// its output (`output`) instead of the buffers. Those two may be mapped page-locked host
// memory for a plan that RunsOnMappedHostMemory.
struct StepBuffers {
  void* d_buffers[2] = {nullptr, nullptr};
  void* d_workspace = nullptr;
  size_t workspace_bytes = 0;
  const void* input = nullptr;
  void* output = nullptr;
};

// Whether `plan`'s kernels, launched with direct staging, touch its input and output only with
// plain loads and stores, each output element written once: elementwise, reduction, argmax,
// softmax and normalize steps (their partials and statistics stay in the device workspace). Their input and output may then be mapped host
// memory (StepBuffers::input, output), which the device reads and writes over the host link.
// The row-resize steps are not: the histogram adds into its counts, cumsum's streamed scan
// and the convolution stage their input with asynchronous copies of their own, and none of
// the four was measured on host memory.
bool RunsOnMappedHostMemory(const Plan& plan);

// Enqueues step `index` of `plan` (reading buffer index % 2, writing the other, or
// buffers.input for the first step and buffers.output for the last) on config.stream. Adds
// the kernels enqueued to `*kernels`.
cudaError_t LaunchStep(const Plan& plan, size_t index, const StepBuffers& buffers,
                       const kernels::cuda::LaunchConfig& config, int* kernels);

// Enqueues the resize step (chunk.plan.steps.back(): cumsum, histogram, convolve or topk) of
// kSplitRowResize piece `chunk` (chunk_plan.h) on config.stream, reading `d_in` (the piece's
// input after its elementwise step) and writing the piece's outputs to `d_out`. `d_state` is
// the lane's split-row state, zeroed by the caller for the row's first piece: cumsum's carry
// (one accumulator) or the histogram's counts (which the kernel adds into; the caller copies
// them out after the row's last piece). Adds the kernels enqueued to `*kernels`.
cudaError_t LaunchRowResizePiece(const Chunk& chunk, const void* d_in, void* d_out,
                                 void* d_state, const StepBuffers& buffers,
                                 const kernels::cuda::LaunchConfig& config, int* kernels);

// The workspace the plan's steps may need: the largest of RowOpsWorkspaceBytes() and the new
// row ops' *WorkspaceBytes for their shapes (cumsum's look-back records, topk's segment
// partials; topk's is sized for any multiprocessor count, so an upper bound). A lane whose
// workspace is smaller fails such a step with cudaErrorInvalidValue; the backend sizes lanes
// with this (or checks against it) once the memory pool knows its largest job.
size_t PlanWorkspaceBytes(const Plan& plan);

// Enqueues every step; the plan's output ends in buffer plan.steps.size() % 2, or in
// buffers.output.
cudaError_t LaunchPlan(const Plan& plan, const StepBuffers& buffers,
                       const kernels::cuda::LaunchConfig& config, int* kernels);

// The kernels each step launches, in order, with the edges between them.
PlanDescription DescribePlan(const Plan& plan, const kernels::cuda::LaunchConfig& config);

// Identifies the plan's graph topology (everything but kernel parameters) and, separately,
// the parameters, for the graph cache. Between them the two keys must cover every argument
// a step's kernels take, or a cached graph is replayed for a different job: the topology key
// holds the staging, launch mode, step kinds, shapes and per-kind choices (reduce and
// normalize kinds, resize parameters' shapes); the parameters key the prologue programs and
// the resize ops' values.
std::string PlanTopologyKey(const Plan& plan, const kernels::cuda::LaunchConfig& config);
std::string PlanParamsKey(const Plan& plan);

}  // namespace gpupipe::engine
