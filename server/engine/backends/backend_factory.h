// Chooses and creates the backend the daemon runs on.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/engine/backends/backend.h"
#include "server/engine/backends/cpu/cpu_backend.h"
#include "server/engine/backends/cuda/cuda_backend.h"

namespace gpupipe::engine {

enum class BackendChoice { kAuto, kCuda, kCpu };

struct BackendSelection {
  std::unique_ptr<Backend> backend;
  std::string reason;  // why this backend, for the daemon's start-up log line
};

// kCuda fails when this build has no CUDA support or no device is usable; kAuto then falls
// back to the CPU backend and says why in `reason`.
absl::StatusOr<BackendSelection> CreateBackend(BackendChoice choice,
                                               const CudaBackendOptions& cuda_options,
                                               const CpuBackendOptions& cpu_options);

// True when this binary was built with the CUDA backend.
bool BuiltWithCuda();

}  // namespace gpupipe::engine
