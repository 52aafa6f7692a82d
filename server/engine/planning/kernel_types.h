// The kernel library's names for engine types, shared by the CPU and CUDA backends.
#pragma once

#include "kernels/common/convolve_geometry.h"
#include "kernels/common/element_type.h"
#include "server/engine/job/types.h"

namespace gpupipe::engine {

inline kernels::ElementType ToElementType(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return kernels::ElementType::kFloat32;
    case DType::kFloat64: return kernels::ElementType::kFloat64;
    case DType::kFloat16: return kernels::ElementType::kFloat16;
    case DType::kInt32: return kernels::ElementType::kInt32;
    case DType::kInt64: return kernels::ElementType::kInt64;
  }
  return kernels::ElementType::kFloat32;
}

inline DType ToDType(kernels::ElementType type) {
  switch (type) {
    case kernels::ElementType::kFloat32: return DType::kFloat32;
    case kernels::ElementType::kFloat64: return DType::kFloat64;
    case kernels::ElementType::kFloat16: return DType::kFloat16;
    case kernels::ElementType::kInt32: return DType::kInt32;
    case kernels::ElementType::kInt64: return DType::kInt64;
  }
  return DType::kFloat32;
}

inline kernels::ConvolveMode ToKernelConvolveMode(ConvolveMode mode) {
  switch (mode) {
    case ConvolveMode::kFull: return kernels::ConvolveMode::kFull;
    case ConvolveMode::kSame: return kernels::ConvolveMode::kSame;
    case ConvolveMode::kValid: return kernels::ConvolveMode::kValid;
  }
  return kernels::ConvolveMode::kFull;
}

}  // namespace gpupipe::engine
