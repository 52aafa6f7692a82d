#include "kernels/cpu/topk_reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/float16.h"

namespace gpupipe::kernels::cpu {
namespace {

// Every accepted type converts to double exactly, so comparing doubles compares the values.
double Value(const void* p, ElementType type, int64_t i) {
  switch (type) {
    case ElementType::kFloat32: return static_cast<const float*>(p)[i];
    case ElementType::kFloat64: return static_cast<const double*>(p)[i];
    case ElementType::kFloat16: return HalfToFloat(static_cast<const uint16_t*>(p)[i]);
    case ElementType::kInt32: return static_cast<const int32_t*>(p)[i];
    default: return 0;
  }
}

bool IsTopkType(ElementType type) {
  return type == ElementType::kFloat32 || type == ElementType::kFloat64 ||
         type == ElementType::kFloat16 || type == ElementType::kInt32;
}

// a before b in descending order with NaN largest: a strict weak order (NaNs are equivalent).
bool DescendingNanFirst(double a, double b) {
  if (std::isnan(b)) return false;
  return std::isnan(a) || a > b;
}

}  // namespace

bool RowTopk(const void* in, ElementType type, void* out, int64_t rows, int64_t cols,
             int32_t k) {
  if (!IsTopkType(type) || rows < 1 || cols < 1 || k < 1 || k > cols || in == nullptr ||
      out == nullptr) {
    return false;
  }
  const size_t elem = ElementSize(type);
  std::vector<int64_t> order(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    const char* row = static_cast<const char*>(in) + r * cols * elem;
    for (int64_t c = 0; c < cols; ++c) order[c] = c;
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
      return DescendingNanFirst(Value(row, type, a), Value(row, type, b));
    });
    char* dst = static_cast<char*>(out) + r * static_cast<int64_t>(k) * elem;
    for (int32_t i = 0; i < k; ++i) std::memcpy(dst + i * elem, row + order[i] * elem, elem);
  }
  return true;
}

}  // namespace gpupipe::kernels::cpu
