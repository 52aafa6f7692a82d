#include "kernels/cuda/convolve.h"

namespace gpupipe::kernels::cuda {

size_t ConvolveWorkspaceBytes(int64_t, int64_t, int32_t, ElementType) { return 0; }

cudaError_t RowConvolve(const void*, ElementType, void*, int64_t, int64_t, const double*, int32_t,
                        ConvolveMode, void*, size_t, const LaunchConfig&, int* kernels) {
  if (kernels != nullptr) *kernels = 0;
  return cudaErrorNotSupported;
}

cudaError_t RowConvolveWindow(const void*, ElementType, void*, const ConvolveWindow&,
                              const double*, int32_t, void*, size_t, const LaunchConfig&,
                              int* kernels) {
  if (kernels != nullptr) *kernels = 0;
  return cudaErrorNotSupported;
}

std::vector<KernelLaunchInfo> DescribeRowConvolve(int64_t, int64_t, int32_t, ConvolveMode,
                                                  ElementType, const LaunchConfig&) {
  return {};
}

std::vector<KernelLaunchInfo> DescribeRowConvolveWindow(const ConvolveWindow&, int32_t,
                                                        ElementType, const LaunchConfig&) {
  return {};
}

}  // namespace gpupipe::kernels::cuda
