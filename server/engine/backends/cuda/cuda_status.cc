#include "server/engine/backends/cuda/cuda_status.h"

#include <atomic>

#include "absl/strings/str_cat.h"

namespace gpupipe::engine {
namespace {

// The first sticky error seen (cudaSuccess: none yet). The context is the process's, so one
// record serves every lane.
std::atomic<int> g_sticky{cudaSuccess};

absl::Status Describe(cudaError_t err, absl::string_view what) {
  return absl::InternalError(
      absl::StrCat(what, ": ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")"));
}

}  // namespace

bool IsStickyCudaError(cudaError_t err) {
  switch (err) {
    case cudaErrorIllegalAddress:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorLaunchFailure:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
    case cudaErrorLaunchTimeout:
    case cudaErrorDevicesUnavailable:
    case cudaErrorContextIsDestroyed:
      return true;
    default:
      return false;
  }
}

absl::Status CudaError(cudaError_t err, absl::string_view what) {
  if (IsStickyCudaError(err)) {
    int none = cudaSuccess;
    g_sticky.compare_exchange_strong(none, static_cast<int>(err));
  }
  return Describe(err, what);
}

absl::Status StickyCudaError() {
  const int err = g_sticky.load();
  if (err == cudaSuccess) return absl::OkStatus();
  return Describe(static_cast<cudaError_t>(err), "the GPU failed for good");
}

}  // namespace gpupipe::engine
