// Whether this host can run CUDA kernel tests: GPU tests skip cleanly where it cannot (CI has
// no GPU), with the reason in the skip message.
#pragma once

#include <cuda_runtime_api.h>

#include <optional>
#include <string>

namespace gpupipe::testing {

// Why no CUDA kernel can run here, or nothing when a device is usable. Clears the error it
// may leave behind, so later checks of cudaGetLastError() do not see it.
inline std::optional<std::string> NoCudaDeviceReason() {
  int devices = 0;
  const cudaError_t err = cudaGetDeviceCount(&devices);
  if (err == cudaSuccess && devices > 0) return std::nullopt;
  (void)cudaGetLastError();
  return "no usable CUDA device (cudaGetDeviceCount: " + std::string(cudaGetErrorString(err)) +
         ", " + std::to_string(devices) + " devices)";
}

}  // namespace gpupipe::testing
