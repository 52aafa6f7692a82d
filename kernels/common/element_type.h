// Element types of the kernel library, independent of the engine and of gRPC. Host APIs take
// untyped device pointers plus an ElementType and dispatch to typed kernels in one place per
// op family; each op documents which input types it accepts and the output type it writes
// (NumPy's rules: float16 computes in float32, sums of int32 are int64, indices are int64).
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpupipe::kernels {

enum class ElementType : int32_t { kFloat32 = 0, kFloat64 = 1, kFloat16 = 2, kInt32 = 3, kInt64 = 4 };

constexpr size_t ElementSize(ElementType type) {
  switch (type) {
    case ElementType::kFloat32: return 4;
    case ElementType::kFloat64: return 8;
    case ElementType::kFloat16: return 2;
    case ElementType::kInt32: return 4;
    case ElementType::kInt64: return 8;
  }
  return 0;
}

constexpr const char* ElementTypeName(ElementType type) {
  switch (type) {
    case ElementType::kFloat32: return "float32";
    case ElementType::kFloat64: return "float64";
    case ElementType::kFloat16: return "float16";
    case ElementType::kInt32: return "int32";
    case ElementType::kInt64: return "int64";
  }
  return "?";
}

constexpr bool IsFloatingPoint(ElementType type) {
  return type == ElementType::kFloat32 || type == ElementType::kFloat64 ||
         type == ElementType::kFloat16;
}

}  // namespace gpupipe::kernels
