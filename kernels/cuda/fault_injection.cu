#include "kernels/cuda/fault_injection.h"

#include <cstdint>

namespace gpupipe::kernels::cuda {
namespace {

__global__ void WriteThrough(int* p) { *p = 1; }

}  // namespace

cudaError_t LaunchFault(FaultKind kind, cudaStream_t stream) {
  switch (kind) {
    case FaultKind::kStickyIllegalAddress:
      // An address in no allocation of this process.
      WriteThrough<<<1, 1, 0, stream>>>(reinterpret_cast<int*>(uintptr_t{0x10}));
      break;
    case FaultKind::kLaunchConfiguration:
      // More threads per block than any GPU has: refused at launch, the context unharmed.
      WriteThrough<<<1, 2048, 0, stream>>>(nullptr);
      break;
  }
  return cudaGetLastError();
}

}  // namespace gpupipe::kernels::cuda
