#include "server/engine/backends/backend_factory.h"

#include "absl/strings/str_cat.h"

namespace gpupipe::engine {

bool BuiltWithCuda() {
#ifdef GPUPIPE_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

absl::StatusOr<BackendSelection> CreateBackend(BackendChoice choice,
                                               const CudaBackendOptions& cuda_options,
                                               const CpuBackendOptions& cpu_options) {
  if (choice == BackendChoice::kCpu) {
    return BackendSelection{CreateCpuBackend(cpu_options), "requested with --backend cpu"};
  }
  absl::Status cuda_status;
#ifdef GPUPIPE_HAVE_CUDA
  absl::StatusOr<std::unique_ptr<Backend>> cuda = CreateCudaBackend(cuda_options);
  if (cuda.ok()) {
    return BackendSelection{*std::move(cuda),
                            choice == BackendChoice::kCuda ? "requested with --backend cuda"
                                                           : "a CUDA device is usable"};
  }
  cuda_status = cuda.status();
#else
  (void)cuda_options;
  cuda_status = absl::FailedPreconditionError(
      "this build has no CUDA backend (no CUDA compiler was found when it was built)");
#endif
  if (choice == BackendChoice::kCuda) return cuda_status;
  return BackendSelection{CreateCpuBackend(cpu_options),
                          absl::StrCat("no usable GPU: ", cuda_status.message())};
}

}  // namespace gpupipe::engine
