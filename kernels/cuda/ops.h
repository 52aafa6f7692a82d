// Host API of the CUDA kernels (float32). Contract, shared by every function here:
//  - pointers prefixed d_ are device memory; inputs are read-only; outputs must not overlap
//    inputs unless stated; d_in must be 16-byte aligned (any element count is fine);
//  - the functions only enqueue work on `config.stream`: they never allocate, never
//    synchronize, and never touch the NULL stream (a config.stream of 0 or cudaStreamLegacy is
//    rejected); scratch memory comes from the caller as `d_workspace` (16-byte aligned) of at
//    least the bytes the matching *WorkspaceBytes function returns;
//  - invalid arguments (negative sizes, stages outside kMinStages..kMaxStages, a bad program,
//    null or misaligned pointers, a short workspace) return cudaErrorInvalidValue and enqueue
//    nothing;
//  - they return the first launch error (cudaSuccess otherwise); asynchronous kernel faults
//    surface at the caller's next synchronization;
//  - `*kernels` (optional) receives the number of kernels enqueued.
// Row ops work along the last axis: `rows` x `cols`, row-major, rows >= 1, cols >= 1.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/common/elementwise_program.h"

namespace gpupipe::kernels::cuda {

enum class Staging {
  kDirect,    // vectorized plain loads into registers
  kPipeline,  // cuda::pipeline (thread_scope_block) tiles staged through shared memory
};

inline constexpr int kMinStages = 1;
inline constexpr int kMaxStages = 8;

struct LaunchConfig {
  cudaStream_t stream = nullptr;
  Staging staging = Staging::kPipeline;
  int stages = 2;         // kMinStages..kMaxStages, used by kPipeline
  bool pdl = true;        // chain dependent kernels with Programmatic Dependent Launch
  int multiprocessors = 132;  // of the target device; sizes persistent grids
};

// y[i] = ApplyEw(program, x[i]) for i < n (n >= 0). d_out may equal d_in.
cudaError_t Elementwise(const float* d_in, float* d_out, int64_t n, const EwProgram& program,
                        const LaunchConfig& config, int* kernels = nullptr);

// Workspace for RowSum and RowSoftmax of any shape: a fixed bound, so callers can allocate it
// once at start.
size_t RowOpsWorkspaceBytes();

// d_out[r] = sum over row r of ApplyEw(pre, x). `pre` may be empty (count 0).
cudaError_t RowSum(const float* d_in, float* d_out, int64_t rows, int64_t cols,
                   const EwProgram& pre, void* d_workspace, size_t workspace_bytes,
                   const LaunchConfig& config, int* kernels = nullptr);

// Softmax of ApplyEw(pre, x) along each row. Two or more kernels chained with PDL when
// config.pdl is set (statistics, then normalization).
cudaError_t RowSoftmax(const float* d_in, float* d_out, int64_t rows, int64_t cols,
                       const EwProgram& pre, void* d_workspace, size_t workspace_bytes,
                       const LaunchConfig& config, int* kernels = nullptr);

}  // namespace gpupipe::kernels::cuda
