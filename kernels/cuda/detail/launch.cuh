// Host-side launch plumbing shared by the .cu files: argument validation common to every op and
// the one place that calls cudaLaunchKernelEx, so the PDL attribute is set in exactly one way.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "kernels/cuda/ops.h"

namespace gpupipe::kernels::cuda::detail {

// Upper bound on LaunchConfig::multiprocessors; only guards grid arithmetic against absurd
// values (an H200 has 132).
inline constexpr int kMaxMultiprocessors = 4096;

inline constexpr int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

inline bool IsAligned(const void* p, uintptr_t bytes) {
  return (reinterpret_cast<uintptr_t>(p) & (bytes - 1)) == 0;
}

// Checks the parts of a LaunchConfig every op relies on. The NULL stream (0 or the explicit
// legacy handle) is rejected rather than silently used: it serializes against every other
// blocking stream of the process, which the daemon must never do by accident.
inline cudaError_t ValidateConfig(const LaunchConfig& config) {
  if (config.stream == nullptr || config.stream == cudaStreamLegacy) return cudaErrorInvalidValue;
  if (config.staging != Staging::kDirect && config.staging != Staging::kPipeline) {
    return cudaErrorInvalidValue;
  }
  if (config.stages < kMinStages || config.stages > kMaxStages) return cudaErrorInvalidValue;
  if (config.multiprocessors < 1 || config.multiprocessors > kMaxMultiprocessors) {
    return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

// A program with an out-of-range count or an unknown opcode is rejected rather than run with
// the bad instructions skipped.
inline cudaError_t ValidateProgram(const EwProgram& program) {
  if (program.count < 0 || program.count > kMaxEwInstrs) return cudaErrorInvalidValue;
  for (int i = 0; i < program.count; ++i) {
    const EwOpcode op = program.instrs[i].op;
    if (op != EwOpcode::kAffine && op != EwOpcode::kRelu) return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

// Launches `kernel` on `stream`. With `pdl`, the launch carries
// cudaLaunchAttributeProgrammaticStreamSerialization so that it may begin while the previous
// kernel in the stream is still running; the kernel must then call
// cudaGridDependencySynchronize() before touching anything that kernel writes.
//
// The launch status comes from cudaLaunchKernelEx's return value, not from cudaGetLastError():
// the latter would also report (and clear) an unrelated earlier error of this host thread. On
// failure the error is additionally consumed from the thread's last-error slot so that it is
// not reported a second time by whoever calls cudaGetLastError() next.
template <typename... KernelParams, typename... Args>
cudaError_t LaunchKernel(void (*kernel)(KernelParams...), dim3 grid, dim3 block,
                         cudaStream_t stream, bool pdl, Args&&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;

  cudaLaunchConfig_t launch = {};
  launch.gridDim = grid;
  launch.blockDim = block;
  launch.dynamicSmemBytes = 0;
  launch.stream = stream;
  launch.attrs = pdl ? attr : nullptr;
  launch.numAttrs = pdl ? 1 : 0;

  const cudaError_t err = cudaLaunchKernelEx(&launch, kernel, std::forward<Args>(args)...);
  if (err != cudaSuccess) (void)cudaGetLastError();
  return err;
}

// Counts enqueued kernels into the optional out-parameter of the host API.
class KernelCounter {
 public:
  explicit KernelCounter(int* out) : out_(out) {
    if (out_ != nullptr) *out_ = 0;
  }
  void Add() {
    if (out_ != nullptr) ++*out_;
  }

 private:
  int* out_;
};

}  // namespace gpupipe::kernels::cuda::detail
