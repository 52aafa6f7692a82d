#include "server/engine/backends/cuda/ipc_memory.h"

#include <cuda_runtime_api.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace gpupipe::engine {
namespace {

// cuMemGetAddressRange from the driver, fetched through the runtime so that the daemon links
// no driver library (it starts, and serves on the CPU, where there is none).
using GetAddressRangeFn = int (*)(unsigned long long* base, size_t* size, unsigned long long ptr);

GetAddressRangeFn AddressRange() {
  static const GetAddressRangeFn fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &f, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      return GetAddressRangeFn{nullptr};
    }
    return reinterpret_cast<GetAddressRangeFn>(f);
  }();
  return fn;
}

}  // namespace

absl::StatusOr<DeviceMapping> OpenIpcMemory(int device, const std::string& handle) {
  cudaIpcMemHandle_t h{};
  if (handle.size() != sizeof(h)) {
    return absl::InvalidArgumentError(absl::StrCat("cuda_ipc_handle: ", handle.size(),
                                                   " bytes; a cudaIpcMemHandle_t has ", sizeof(h)));
  }
  std::memcpy(&h, handle.data(), sizeof(h));
  if (cudaError_t err = cudaSetDevice(device); err != cudaSuccess) {
    cudaGetLastError();
    return absl::InternalError(absl::StrCat("cudaSetDevice: ", cudaGetErrorString(err)));
  }
  void* ptr = nullptr;
  if (cudaError_t err = cudaIpcOpenMemHandle(&ptr, h, cudaIpcMemLazyEnablePeerAccess);
      err != cudaSuccess) {
    cudaGetLastError();
    return absl::InvalidArgumentError(
        absl::StrCat("cuda_ipc_handle: the driver cannot open it: ", cudaGetErrorName(err), " (",
                     cudaGetErrorString(err),
                     "); export it with cudaIpcGetMemHandle from another process "
                     "on this host, on the daemon's GPU, and keep the allocation alive"));
  }
  const auto close = [ptr, device] {
    cudaSetDevice(device);
    cudaIpcCloseMemHandle(ptr);
    cudaGetLastError();
  };
  unsigned long long base = 0;
  size_t size = 0;
  GetAddressRangeFn range = AddressRange();
  if (range == nullptr || range(&base, &size, reinterpret_cast<unsigned long long>(ptr)) != 0) {
    close();
    return absl::InternalError("cuda_ipc_handle: cannot learn the opened allocation's size");
  }
  const unsigned long long at = reinterpret_cast<unsigned long long>(ptr);
  return DeviceMapping{static_cast<char*>(ptr), static_cast<int64_t>(base + size - at), close};
}

}  // namespace gpupipe::engine
