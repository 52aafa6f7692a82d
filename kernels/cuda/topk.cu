#include "kernels/cuda/topk.h"

namespace gpupipe::kernels::cuda {

size_t RowTopkWorkspaceBytes(int64_t, int64_t, int32_t, ElementType) { return 0; }

cudaError_t RowTopk(const void*, ElementType, void*, int64_t, int64_t, int32_t, void*, size_t,
                    const LaunchConfig&, int* kernels) {
  if (kernels != nullptr) *kernels = 0;
  return cudaErrorNotSupported;
}

std::vector<KernelLaunchInfo> DescribeRowTopk(int64_t, int64_t, int32_t, ElementType,
                                              const LaunchConfig&) {
  return {};
}

}  // namespace gpupipe::kernels::cuda
