// Host API of the CUDA kernels. Contract, shared by every function here:
//  - pointers prefixed d_ are device memory; inputs are read-only; outputs must not overlap
//    inputs unless stated; d_in must be 16-byte aligned (any element count is fine), d_out
//    aligned to its element size;
//  - data is untyped: `in_type` (kernels/common/element_type.h) names the input's element
//    type and each function states the types it accepts and the type it writes (NumPy's
//    rules). float16 is widened to float32 on load, computed and accumulated in float32, and
//    rounded once on store; float64 computes in double; int32 computes in int32 with
//    two's-complement wrap-around (sums accumulate in int64). An unsupported type returns
//    cudaErrorInvalidValue. `pre`/`program` run in the compute type; int32 accepts only the
//    integer opcodes (IsIntegerEwOpcode);
//  - the functions only enqueue work on `config.stream`: they never allocate, never
//    synchronize, and never touch the NULL stream (a config.stream of 0 or cudaStreamLegacy is
//    rejected); scratch memory comes from the caller as `d_workspace` (16-byte aligned) of at
//    least the bytes the matching *WorkspaceBytes function returns;
//  - invalid arguments (negative sizes, stages outside kMinStages..kMaxStages, a bad program,
//    null or misaligned pointers, a short workspace) return cudaErrorInvalidValue and enqueue
//    nothing;
//  - they return the first launch error (cudaSuccess otherwise); asynchronous kernel faults
//    surface at the caller's next synchronization;
//  - `*kernels` (optional) receives the number of kernels enqueued;
//  - with config.pdl every kernel launch, each op's first included, carries the Programmatic
//    Dependent Launch attribute, so consecutive ops on one stream overlap launch latency; each
//    kernel waits for its predecessor before touching global memory, so any sequence of these
//    calls (and of memcpys/events) on a stream keeps plain stream order semantics.
// Row ops work along the last axis: `rows` x `cols`, row-major, rows >= 1, cols >= 1; `pre`
// (possibly empty, count 0) is applied to every element as it is read.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/common/element_type.h"
#include "kernels/common/elementwise_program.h"
#include "kernels/common/row_ops.h"

namespace gpupipe::kernels::cuda {

// How a kernel moves its input from global memory into the registers that compute on it.
// Every strategy gives the same results (bit-identical for elementwise ops); they differ only
// in speed. The staged ones (all but kDirect) stream whole tiles through `stages` shared-memory
// buffers (kernels/cuda/detail/pipeline_staging.cuh) and read ragged ends with plain loads.
enum class Staging {
  kDirect,          // vectorized plain loads into registers, several in flight per thread
  kPipeline,        // cuda::pipeline, thread_scope_block, partitioned: a producer warp copies
  kPipelineThread,  // cuda::pipeline, thread_scope_thread: each thread stages its own vectors
  kPrimitives,      // __pipeline_memcpy_async / __pipeline_commit / __pipeline_wait_prior
  kBulk,            // Hopper cp.async.bulk, one copy per tile, completing on an mbarrier
  kAuto,            // per op family, element type and size from kernels/cuda/tuning/
};

// "direct", "pipeline", "pipeline-thread", "primitives", "bulk", "auto".
inline const char* StagingName(Staging staging) {
  switch (staging) {
    case Staging::kDirect: return "direct";
    case Staging::kPipeline: return "pipeline";
    case Staging::kPipelineThread: return "pipeline-thread";
    case Staging::kPrimitives: return "primitives";
    case Staging::kBulk: return "bulk";
    case Staging::kAuto: return "auto";
  }
  return "?";
}

inline constexpr int kMinStages = 1;
inline constexpr int kMaxStages = 8;

// Optional per-kernel timing: after each kernel it launches, an op records the next of
// `events` on its stream, while any are left, and counts it in `used`. The events between
// kernels keep dependent kernels from overlapping, so profiled times run slightly high.
struct KernelProfile {
  cudaEvent_t* events = nullptr;
  int capacity = 0;
  int used = 0;
};

struct LaunchConfig {
  cudaStream_t stream = nullptr;
  Staging staging = Staging::kPipeline;
  int stages = 2;         // kMinStages..kMaxStages: buffers in flight of the staged strategies
  bool pdl = true;        // every launch carries the Programmatic Dependent Launch attribute
                          // (where `arch` has PDL; else the kernels launch in plain order)
  int multiprocessors = 132;  // of the target device; sizes persistent grids
  // What the target device runs of this build (kernels/cuda/device_caps.h): the architecture
  // level that chooses the paths (DeviceCaps::feature_arch: sm_90 paths such as kBulk, the
  // streamed cumsum and PDL need >= 90), and the shared memory one block may opt in to (the
  // shared-memory row paths take rows that fit). 0: the current device's, queried once per
  // device. An explicit kBulk where `arch` is below 90 returns cudaErrorNotSupported; kAuto
  // never chooses it there.
  int arch = 0;
  int max_smem_per_block = 0;
  KernelProfile* profile = nullptr;  // optional, see KernelProfile
};

// y[i] = ApplyEw(program, x[i]) for i < n (n >= 0). d_out may equal d_in. Types: float32,
// float64, float16, int32; the output has the input's type.
cudaError_t Elementwise(const void* d_in, ElementType in_type, void* d_out, int64_t n,
                        const EwProgram& program, const LaunchConfig& config,
                        int* kernels = nullptr);

// Workspace for every row op of any shape: a fixed bound, so callers can allocate it once at
// start. Ops on one stream may share one workspace.
size_t RowOpsWorkspaceBytes();

// d_out[r] = reduction (RowReduceKind) over row r of ApplyEw(pre, x); d_out holds `rows`
// values of RowReduceOutputType(in_type, kind) (kernels/common/row_ops.h). Types: float32,
// float64, float16 for every kind; int32 for sum (int64 out), min and max (int32 out).
// Accumulation in the compute type (float32 for float16: relative error a small multiple of
// 1e-7 * sum|x| / |result| against exact; double: 1e-16 alike); min, max and int32 are exact,
// float min and max NaN if the row holds one. One kernel, or two (partials, combine) when few
// long rows are split over blocks.
cudaError_t RowReduce(const void* d_in, ElementType in_type, void* d_out, int64_t rows,
                      int64_t cols, RowReduceKind kind, const EwProgram& pre, void* d_workspace,
                      size_t workspace_bytes, const LaunchConfig& config,
                      int* kernels = nullptr);

// RowReduce(kSum).
cudaError_t RowSum(const void* d_in, ElementType in_type, void* d_out, int64_t rows,
                   int64_t cols, const EwProgram& pre, void* d_workspace,
                   size_t workspace_bytes, const LaunchConfig& config, int* kernels = nullptr);

// d_out[r] = column of the first maximum of ApplyEw(pre, x) in row r, as np.argmax: a NaN is
// the maximum (the first NaN wins), -0 and +0 tie. d_out holds `rows` int64 values (8-byte
// aligned). Types: float32, float64, float16, int32. Exact. One or two kernels, as RowReduce.
cudaError_t RowArgmax(const void* d_in, ElementType in_type, int64_t* d_out, int64_t rows,
                      int64_t cols, const EwProgram& pre, void* d_workspace,
                      size_t workspace_bytes, const LaunchConfig& config,
                      int* kernels = nullptr);

// Softmax of ApplyEw(pre, x) along each row. Types: float32, float64, float16; the output has
// the input's type. One kernel when a row fits in registers (cols up to 8192), or, with rows
// enough for a block each, in one block's shared memory (up to 192 KiB of compute-type
// values: 49149 float32 or 49145 float16 or 24575 float64 columns, a few less for rows that
// start unaligned; less where config.max_smem_per_block is smaller); otherwise two kernels per
// batch of rows (statistics, then normalization), as many batches as the workspace needs.
cudaError_t RowSoftmax(const void* d_in, ElementType in_type, void* d_out, int64_t rows,
                       int64_t cols, const EwProgram& pre, void* d_workspace,
                       size_t workspace_bytes, const LaunchConfig& config,
                       int* kernels = nullptr);

// Each row of ApplyEw(pre, x) normalized (RowNormalizeKind): x / norm2(x), or
// (x - mean) / std with the population std; a zero (resp. constant) row gives NaN, as 0 / 0.
// Statistics are exact two-pass moments over registers or shared memory (one kernel, for the
// rows RowSoftmax runs in one kernel) or float Welford/Chan moments (other long rows, two
// kernels per batch of rows, as RowSoftmax); neither has the E[x^2] - E[x]^2 cancellation. Types: float32, float64, float16 (moments in
// the compute type); the output has the input's type.
cudaError_t RowNormalize(const void* d_in, ElementType in_type, void* d_out, int64_t rows,
                         int64_t cols, RowNormalizeKind kind, const EwProgram& pre,
                         void* d_workspace, size_t workspace_bytes, const LaunchConfig& config,
                         int* kernels = nullptr);

// ---- launch descriptions -----------------------------------------------------------------------
// What the op with these arguments launches, one entry per kernel launch in launch order
// (batches included), computed by the same dispatch code that launches (nothing is enqueued
// and no CUDA call is made; config.stream is ignored). Empty for arguments the op would reject,
// and for Elementwise with n == 0 (or a type the op does not accept). A config.arch or
// max_smem_per_block of 0 is the current device's, which costs a query the first time.
// Kernel names are "<op>.<kernel>":
//   elementwise.<staging>, with <staging> direct | pipeline | pipeline-thread | primitives |
//     bulk (config.staging, kAuto resolved by the tuning table for the element type);
//   <kind>.rows (one kernel), or <kind>.partials + <kind>.combine (split rows), with <kind>
//     sum | min | max | mean | norm2 | argmax;
//   <op>.rows (one kernel, rows held in registers or shared memory), or <op>.stats +
//     <op>.normalize per batch,
//     with <op> softmax | l2normalize | standardize.
struct KernelLaunchInfo {
  const char* name;  // static storage
  int64_t blocks;
  int threads;
};

std::vector<KernelLaunchInfo> DescribeElementwise(int64_t n, ElementType type,
                                                  const LaunchConfig& config);
std::vector<KernelLaunchInfo> DescribeRowReduce(int64_t rows, int64_t cols, ElementType type,
                                                RowReduceKind kind, const LaunchConfig& config);
std::vector<KernelLaunchInfo> DescribeRowArgmax(int64_t rows, int64_t cols, ElementType type,
                                                const LaunchConfig& config);
std::vector<KernelLaunchInfo> DescribeRowSoftmax(int64_t rows, int64_t cols, ElementType type,
                                                 const LaunchConfig& config);
std::vector<KernelLaunchInfo> DescribeRowNormalize(int64_t rows, int64_t cols, ElementType type,
                                                   RowNormalizeKind kind,
                                                   const LaunchConfig& config);

}  // namespace gpupipe::kernels::cuda
