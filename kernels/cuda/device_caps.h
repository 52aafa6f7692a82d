// What one CUDA device offers this build's kernels, and which of their code paths it can run.
//
// The library is built for several architectures (CMAKE_CUDA_ARCHITECTURES: SASS for each, PTX
// of the newest for the driver to compile for GPUs newer still). Some paths need sm_90 (Hopper)
// or newer: bulk copies into shared memory (Staging::kBulk, the streamed float32 cumsum) and
// Programmatic Dependent Launch. Whether a device can run them depends on the code the driver
// actually loads for it, not only on the device: a build that carries only compute_80 PTX,
// JIT-compiled on an H200, has its sm_90 paths compiled out. So the level that decides is the
// lower of the device's compute capability and the PTX architecture the loaded kernels were
// compiled from (cudaFuncAttributes::ptxVersion of a probe kernel of this library).
#pragma once

#include <cuda_runtime_api.h>

#include <string>

namespace gpupipe::kernels::cuda {

// Architecture levels as major * 10 + minor (sm_90: 90).
inline constexpr int kBulkCopyArch = 90;  // cp.async.bulk, mbarrier transaction counts
inline constexpr int kPdlArch = 90;       // Programmatic Dependent Launch

struct DeviceCaps {
  int compute_capability = 0;  // the device's, e.g. 90 for an H200
  int ptx_arch = 0;            // the PTX the loaded kernels were compiled from, e.g. 90 or 80
  int binary_arch = 0;         // the SASS the driver loaded (equal to compute_capability's
                               // family unless the PTX was JIT-compiled)
  int multiprocessors = 0;
  int max_smem_per_block = 0;  // bytes of shared memory one block may opt in to

  // The level the kernels' paths are chosen by (LaunchConfig::arch).
  int feature_arch() const { return ptx_arch < compute_capability ? ptx_arch : compute_capability; }
  bool bulk_copy() const { return feature_arch() >= kBulkCopyArch; }
  bool pdl() const { return feature_arch() >= kPdlArch; }
};

// Fills `caps` for device `device`. Selects nothing and never synchronizes; the first call
// loads (and, from PTX, compiles) the probe kernel's module. Returns
// cudaErrorNoKernelImageForDevice (or the driver's error) when this build carries no code the
// device can run: its SASS is for other architectures and its PTX is newer than the device.
cudaError_t QueryDeviceCaps(int device, DeviceCaps* caps);

// The current device's caps (cudaGetDevice), queried once per device and kept for the
// process: what a LaunchConfig's arch and max_smem_per_block of 0 stand for. A failed query
// gives zeros (no sm_90 path, no shared-memory row path), and the launches then report the
// device's error themselves.
const DeviceCaps& CurrentDeviceCaps();

// A LaunchConfig's arch or max_smem_per_block as used: the value, or the current device's
// where it is 0.
inline int ResolveArch(int arch) { return arch > 0 ? arch : CurrentDeviceCaps().feature_arch(); }
inline int ResolveSmemLimit(int bytes) {
  return bytes > 0 ? bytes : CurrentDeviceCaps().max_smem_per_block;
}

// The architectures this library was compiled for, as given to CMake
// ("80-real;86-real;...;120-virtual", or "90").
const char* BuiltCudaArchitectures();

// "sm_90" for 90.
std::string ArchName(int arch);

}  // namespace gpupipe::kernels::cuda
