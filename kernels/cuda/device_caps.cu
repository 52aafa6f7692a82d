#include "kernels/cuda/device_caps.h"

#include <array>
#include <mutex>
#include <string>

namespace gpupipe::kernels::cuda {
namespace {

// Compiled like every kernel of the library (same target, same architectures), so its
// attributes say which code the driver loads for the library on this device.
__global__ void ProbeKernel() {}

}  // namespace

cudaError_t QueryDeviceCaps(int device, DeviceCaps* caps) {
  if (caps == nullptr) return cudaErrorInvalidValue;
  int major = 0, minor = 0, sms = 0, smem = 0;
  cudaError_t err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  if (err == cudaSuccess) {
    err = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  }
  if (err == cudaSuccess) {
    err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  }
  if (err == cudaSuccess) {
    err = cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  }
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return err;
  }
  // cudaFuncGetAttributes reads the current device's copy of the module.
  int current = 0;
  if (err = cudaGetDevice(&current); err != cudaSuccess) {
    (void)cudaGetLastError();
    return err;
  }
  if (current != device && (err = cudaSetDevice(device)) != cudaSuccess) {
    (void)cudaGetLastError();
    return err;
  }
  cudaFuncAttributes attr{};
  err = cudaFuncGetAttributes(&attr, ProbeKernel);
  if (current != device) (void)cudaSetDevice(current);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return err;
  }
  caps->compute_capability = major * 10 + minor;
  caps->ptx_arch = attr.ptxVersion;
  caps->binary_arch = attr.binaryVersion;
  caps->multiprocessors = sms;
  caps->max_smem_per_block = smem;
  return cudaSuccess;
}

const DeviceCaps& CurrentDeviceCaps() {
  // Enough for any host; a device beyond it is queried on every call.
  constexpr int kCachedDevices = 64;
  static std::array<DeviceCaps, kCachedDevices> cache;
  static std::array<std::once_flag, kCachedDevices> once;
  thread_local DeviceCaps uncached;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    uncached = DeviceCaps{};
    return uncached;
  }
  if (device < 0 || device >= kCachedDevices) {
    uncached = DeviceCaps{};
    (void)QueryDeviceCaps(device, &uncached);
    return uncached;
  }
  std::call_once(once[device], [device] {
    DeviceCaps caps;
    if (QueryDeviceCaps(device, &caps) == cudaSuccess) cache[device] = caps;
  });
  return cache[device];
}

const char* BuiltCudaArchitectures() { return GPUPIPE_CUDA_ARCHITECTURES; }

std::string ArchName(int arch) { return "sm_" + std::to_string(arch); }

}  // namespace gpupipe::kernels::cuda
