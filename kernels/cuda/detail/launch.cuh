// Host-side launch plumbing shared by the .cu files: argument validation common to every op,
// the one place that calls cudaLaunchKernelEx (so the PDL attribute is set in exactly one way),
// and the Launcher through which each op's dispatch code either launches its kernels or only
// describes them (Describe* in ops.h), so the explain output cannot drift from what runs.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/cuda/device_caps.h"
#include "kernels/cuda/ops.h"

namespace gpupipe::kernels::cuda::detail {

// Upper bound on LaunchConfig::multiprocessors; only guards grid arithmetic against absurd
// values (an H200 has 132).
inline constexpr int kMaxMultiprocessors = 4096;

inline constexpr int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The most blocks a grid's x dimension holds (2^31 - 1).
inline constexpr int64_t kMaxGridBlocks = 2147483647;

inline bool IsAligned(const void* p, uintptr_t bytes) {
  return (reinterpret_cast<uintptr_t>(p) & (bytes - 1)) == 0;
}

// config.arch and config.max_smem_per_block, with 0 standing for the current device's.
inline int EffectiveArch(const LaunchConfig& config) { return ResolveArch(config.arch); }
inline int EffectiveSmemLimit(const LaunchConfig& config) {
  return ResolveSmemLimit(config.max_smem_per_block);
}

// `config` with arch and max_smem_per_block filled in, so that dispatch code reads them as
// plain values.
inline LaunchConfig WithDeviceCaps(const LaunchConfig& config) {
  LaunchConfig out = config;
  out.arch = EffectiveArch(config);
  out.max_smem_per_block = EffectiveSmemLimit(config);
  return out;
}

// Checks the parts of a LaunchConfig every op relies on. The NULL stream (0 or the explicit
// legacy handle) is rejected rather than silently used: it serializes against every other
// blocking stream of the process, which the daemon must never do by accident.
// The stream-independent part, which is all that describing a launch needs.
inline cudaError_t ValidateShapeConfig(const LaunchConfig& config) {
  switch (config.staging) {
    case Staging::kDirect:
    case Staging::kPipeline:
    case Staging::kPipelineThread:
    case Staging::kPrimitives:
    case Staging::kBulk:
    case Staging::kAuto: break;
    default: return cudaErrorInvalidValue;
  }
  if (config.stages < kMinStages || config.stages > kMaxStages) return cudaErrorInvalidValue;
  if (config.multiprocessors < 1 || config.multiprocessors > kMaxMultiprocessors) {
    return cudaErrorInvalidValue;
  }
  if (config.arch < 0 || config.max_smem_per_block < 0) return cudaErrorInvalidValue;
  // Bulk copies are compiled out of code for older targets: running them there would trap.
  if (config.staging == Staging::kBulk && EffectiveArch(config) < kBulkCopyArch) {
    return cudaErrorNotSupported;
  }
  return cudaSuccess;
}

inline cudaError_t ValidateConfig(const LaunchConfig& config) {
  if (config.stream == nullptr || config.stream == cudaStreamLegacy) return cudaErrorInvalidValue;
  return ValidateShapeConfig(config);
}

// A program with an out-of-range count or an unknown opcode (or, for int32 data, a
// non-integer opcode) is rejected rather than run with the bad instructions skipped.
inline cudaError_t ValidateProgram(const EwProgram& program, ElementType type) {
  if (program.count < 0 || program.count > kMaxEwInstrs) return cudaErrorInvalidValue;
  for (int i = 0; i < program.count; ++i) {
    if (!IsValidEwOpcode(program.instrs[i].op)) return cudaErrorInvalidValue;
    if (type == ElementType::kInt32 && !IsIntegerEwOpcode(program.instrs[i].op)) {
      return cudaErrorInvalidValue;
    }
  }
  return cudaSuccess;
}

// The one place an ElementType becomes a storage type: calls f(S{}) with S the storage type of
// `type` among the accepted ones (float, double, __half, int32_t), or returns
// cudaErrorInvalidValue. Each op family dispatches through it once.
template <bool kFloat64, bool kFloat16, bool kInt32, typename F>
cudaError_t DispatchType(ElementType type, F&& f) {
  switch (type) {
    case ElementType::kFloat32: return f(float{});
    case ElementType::kFloat64:
      if constexpr (kFloat64) return f(double{});
      break;
    case ElementType::kFloat16:
      if constexpr (kFloat16) return f(__half{});
      break;
    case ElementType::kInt32:
      if constexpr (kInt32) return f(int32_t{});
      break;
    default: break;
  }
  return cudaErrorInvalidValue;
}

// Launches `kernel` on `stream`. With `pdl`, the launch carries
// cudaLaunchAttributeProgrammaticStreamSerialization so that it may begin while the previous
// kernel in the stream is still running (once all of that kernel's blocks have called
// cudaTriggerProgrammaticLaunchCompletion or exited); after a non-kernel stream operation
// (memcpy, event) it behaves like a plain launch. Every kernel of this library is launched this
// way when config.pdl is set, including each op's first, so the kernels obey one rule: every
// block calls cudaGridDependencySynchronize() (detail::WaitForPrimaryGrids) unconditionally
// before its first global read of data an earlier kernel may write AND before its first global
// write (an earlier kernel may still be reading the buffer: the engine ping-pongs two buffers,
// and the row ops reuse one workspace). Only index math, shared-memory setup and L2 prefetches
// (L2 is the coherence point, so a prefetched line never goes stale) come before it; the one
// exception, a dependent reading an input its primary never writes after the primary's own
// wait and trigger, is argued where it is used (the row multipass segment kernels). Because
// every kernel waits, completion is transitive: a kernel that has completed implies all earlier
// kernels of the stream have too.
//
// The launch status comes from cudaLaunchKernelEx's return value, not from cudaGetLastError():
// the latter would also report (and clear) an unrelated earlier error of this host thread. On
// failure the error is additionally consumed from the thread's last-error slot so that it is
// not reported a second time by whoever calls cudaGetLastError() next.
template <typename... KernelParams, typename... Args>
cudaError_t LaunchKernel(void (*kernel)(KernelParams...), dim3 grid, dim3 block,
                         size_t dynamic_smem_bytes, cudaStream_t stream, bool pdl,
                         Args&&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;

  cudaLaunchConfig_t launch = {};
  launch.gridDim = grid;
  launch.blockDim = block;
  launch.dynamicSmemBytes = dynamic_smem_bytes;
  launch.stream = stream;
  launch.attrs = pdl ? attr : nullptr;
  launch.numAttrs = pdl ? 1 : 0;

  const cudaError_t err = cudaLaunchKernelEx(&launch, kernel, std::forward<Args>(args)...);
  if (err != cudaSuccess) (void)cudaGetLastError();
  return err;
}

// The sink of an op's dispatch code: launches each kernel (counting them into the optional
// `kernels` out-parameter of the host API), or, when describing, records what would be launched
// and launches nothing. The dispatch code must not depend on which: in describe mode the data
// pointers are null (hence Advance below).
class Launcher {
 public:
  // Holds `config` with the device's capabilities filled in (WithDeviceCaps).
  Launcher(const LaunchConfig& config, int* kernels)
      : config_(WithDeviceCaps(config)), kernels_(kernels) {
    if (kernels_ != nullptr) *kernels_ = 0;
  }
  Launcher(const LaunchConfig& config, std::vector<KernelLaunchInfo>* describe)
      : config_(WithDeviceCaps(config)), describe_(describe) {}

  const LaunchConfig& config() const { return config_; }
  bool describing() const { return describe_ != nullptr; }

  template <typename... KernelParams, typename... Args>
  cudaError_t operator()(const char* name, void (*kernel)(KernelParams...), int64_t grid,
                         int threads, Args&&... args) {
    return WithSmem(name, kernel, grid, threads, 0, std::forward<Args>(args)...);
  }

  // As operator(), with `dynamic_smem_bytes` of dynamic shared memory per block (the kernel
  // must have been opted in to sizes above 48 KiB, see row_smem.cuh; describing needs not).
  template <typename... KernelParams, typename... Args>
  cudaError_t WithSmem(const char* name, void (*kernel)(KernelParams...), int64_t grid,
                       int threads, size_t dynamic_smem_bytes, Args&&... args) {
    if (describe_ != nullptr) {
      describe_->push_back({name, grid, threads});
      return cudaSuccess;
    }
    cudaError_t err =
        LaunchKernel(kernel, dim3(static_cast<unsigned>(grid)), dim3(threads),
                     dynamic_smem_bytes, config_.stream,
                     config_.pdl && config_.arch >= kPdlArch,
                     std::forward<Args>(args)...);
    if (err == cudaSuccess && kernels_ != nullptr) ++*kernels_;
    KernelProfile* profile = config_.profile;
    if (err == cudaSuccess && profile != nullptr && profile->used < profile->capacity) {
      err = cudaEventRecord(profile->events[profile->used++], config_.stream);
    }
    return err;
  }

 private:
  const LaunchConfig config_;
  int* kernels_ = nullptr;
  std::vector<KernelLaunchInfo>* describe_ = nullptr;
};

// p + n, except that a null p (describe mode) stays null rather than forming an invalid
// pointer.
template <typename T>
T* Advance(T* p, int64_t n) {
  return p == nullptr ? p : p + n;
}

}  // namespace gpupipe::kernels::cuda::detail
