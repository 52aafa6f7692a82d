#include "kernels/cpu/reference_ops.h"

#include <cmath>
#include <limits>

namespace gpupipe::kernels::cpu {

void Elementwise(const float* in, float* out, int64_t n, const EwProgram& program) {
  // Same ApplyEw as the device code: bit-identical results by construction.
  for (int64_t i = 0; i < n; ++i) out[i] = ApplyEw(program, in[i]);
}

void RowSum(const float* in, float* out, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = in + r * cols;
    double acc = 0.0;
    for (int64_t c = 0; c < cols; ++c) acc += x[c];
    out[r] = static_cast<float>(acc);
  }
}

void RowSoftmax(const float* in, float* out, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = in + r * cols;
    float* y = out + r * cols;
    // NaN never wins the comparison, but exp(NaN - m) below makes the sum, and so the whole
    // row, NaN; an all -inf row gives exp(-inf - -inf) = NaN likewise (as NumPy does).
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t c = 0; c < cols; ++c) {
      if (x[c] > m) m = x[c];
    }
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(static_cast<double>(x[c]) - m);
    for (int64_t c = 0; c < cols; ++c) {
      y[c] = static_cast<float>(std::exp(static_cast<double>(x[c]) - m) / sum);
    }
  }
}

}  // namespace gpupipe::kernels::cpu
