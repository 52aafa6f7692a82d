// Kinds of the row ops (along the last axis), shared by the CPU reference and the CUDA kernels.
// The kind is a runtime argument of one kernel family, not a template parameter, so adding a
// kind costs no new kernel instantiations.
#pragma once

#include <cstdint>

#include "kernels/common/element_type.h"

namespace gpupipe::kernels {

// NumPy semantics along axis=-1. Float inputs give results of their own type (float16
// accumulates in float32); int32 inputs allow kSum (int64 result), kMin and kMax (int32).
enum class RowReduceKind : int32_t {
  kSum = 0,    // np.sum
  kMin = 1,    // np.min: a NaN anywhere in the row gives NaN
  kMax = 2,    // np.max: likewise
  kMean = 3,   // np.mean: sum / cols
  kNorm2 = 4,  // np.linalg.norm: sqrt(sum x^2)
};
inline constexpr int32_t kRowReduceKindCount = 5;

inline constexpr bool IsValidRowReduceKind(RowReduceKind kind) {
  return static_cast<int32_t>(kind) >= 0 && static_cast<int32_t>(kind) < kRowReduceKindCount;
}

// Whether `kind` accepts `type`, and the type of its results (NumPy's: np.sum of int32 is
// int64).
inline constexpr bool RowReduceAccepts(ElementType type, RowReduceKind kind) {
  if (IsFloatingPoint(type)) return true;
  return type == ElementType::kInt32 &&
         (kind == RowReduceKind::kSum || kind == RowReduceKind::kMin ||
          kind == RowReduceKind::kMax);
}
inline constexpr ElementType RowReduceOutputType(ElementType type, RowReduceKind kind) {
  return type == ElementType::kInt32 && kind == RowReduceKind::kSum ? ElementType::kInt64 : type;
}

enum class RowNormalizeKind : int32_t {
  kL2Normalize = 0,  // x / norm2(x); a zero row gives NaN (0 / 0)
  kStandardize = 1,  // (x - mean) / std, population std (ddof = 0); a constant row gives NaN
};
inline constexpr int32_t kRowNormalizeKindCount = 2;

inline constexpr bool IsValidRowNormalizeKind(RowNormalizeKind kind) {
  return static_cast<int32_t>(kind) >= 0 && static_cast<int32_t>(kind) < kRowNormalizeKindCount;
}

}  // namespace gpupipe::kernels
