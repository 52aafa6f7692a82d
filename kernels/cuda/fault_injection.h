// Test builds only (GPUPIPE_FAULT_INJECTION): kernels that fail on purpose, so that the
// daemon's handling of device errors can be proven on a real GPU. Never in a production build.
#pragma once

#include <cuda_runtime_api.h>

namespace gpupipe::kernels::cuda {

enum class FaultKind {
  // A kernel that writes through an invalid address: cudaErrorIllegalAddress, sticky (the
  // context is unusable from then on), seen at the stream's next synchronization.
  kStickyIllegalAddress,
  // A launch with more threads per block than allowed: refused at once and not sticky (later
  // work on the device is unaffected). Which error the runtime names for it
  // (cudaErrorInvalidConfiguration or cudaErrorInvalidValue) depends on the CUDA version.
  kLaunchConfiguration,
};

// Launches the fault on `stream`; returns the launch's error (kLaunchConfiguration's at once).
cudaError_t LaunchFault(FaultKind kind, cudaStream_t stream);

}  // namespace gpupipe::kernels::cuda
