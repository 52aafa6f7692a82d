#include "kernels/cpu/cumsum_reference.h"

#include "common/float16.h"

namespace gpupipe::kernels::cpu {
namespace {

// Float inputs: double running sum; the carry is stored in the kernel's accumulator type.
template <typename In, typename Out, typename Carry, typename Load, typename Store>
void ScanFloat(const In* in, Out* out, int64_t rows, int64_t cols, Carry* carry, Load load,
               Store store) {
  for (int64_t r = 0; r < rows; ++r) {
    double acc = carry != nullptr ? static_cast<double>(carry[r]) : 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      acc += load(in[r * cols + c]);
      out[r * cols + c] = store(acc);
    }
    if (carry != nullptr) carry[r] = static_cast<Carry>(acc);
  }
}

}  // namespace

ElementType CumsumOutputType(ElementType in_type) {
  return in_type == ElementType::kInt32 ? ElementType::kInt64 : in_type;
}

bool RowCumsum(const void* in, ElementType in_type, void* out, int64_t rows, int64_t cols,
               void* carry) {
  if (rows < 1 || cols < 1) return false;
  switch (in_type) {
    case ElementType::kFloat32:
      ScanFloat(static_cast<const float*>(in), static_cast<float*>(out), rows, cols,
                static_cast<float*>(carry), [](float x) { return static_cast<double>(x); },
                [](double a) { return static_cast<float>(a); });
      return true;
    case ElementType::kFloat64:
      ScanFloat(static_cast<const double*>(in), static_cast<double*>(out), rows, cols,
                static_cast<double*>(carry), [](double x) { return x; },
                [](double a) { return a; });
      return true;
    case ElementType::kFloat16:
      ScanFloat(static_cast<const uint16_t*>(in), static_cast<uint16_t*>(out), rows, cols,
                static_cast<float*>(carry),
                [](uint16_t x) { return static_cast<double>(HalfToFloat(x)); },
                [](double a) { return FloatToHalf(static_cast<float>(a)); });
      return true;
    case ElementType::kInt32: {
      const auto* x = static_cast<const int32_t*>(in);
      auto* y = static_cast<int64_t*>(out);
      auto* c = static_cast<int64_t*>(carry);
      for (int64_t r = 0; r < rows; ++r) {
        // Unsigned arithmetic: wraps like the device's two's complement adds, without UB.
        uint64_t acc = c != nullptr ? static_cast<uint64_t>(c[r]) : 0;
        for (int64_t i = 0; i < cols; ++i) {
          acc += static_cast<uint64_t>(static_cast<int64_t>(x[r * cols + i]));
          y[r * cols + i] = static_cast<int64_t>(acc);
        }
        if (c != nullptr) c[r] = static_cast<int64_t>(acc);
      }
      return true;
    }
    case ElementType::kInt64:
      return false;
  }
  return false;
}

}  // namespace gpupipe::kernels::cpu
