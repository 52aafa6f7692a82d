#include "kernels/cpu/reference_ops.h"

#include <cmath>
#include <limits>

namespace gpupipe::kernels::cpu {

void Elementwise(const float* in, float* out, int64_t n, const EwProgram& program) {
  // Same ApplyEw as the device code (see elementwise_program.h for where results may differ).
  for (int64_t i = 0; i < n; ++i) out[i] = ApplyEw(program, in[i]);
}

void RowReduce(const float* in, float* out, int64_t rows, int64_t cols, RowReduceKind kind) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = in + r * cols;
    switch (kind) {
      case RowReduceKind::kSum:
      case RowReduceKind::kMean: {
        double acc = 0.0;
        for (int64_t c = 0; c < cols; ++c) acc += x[c];
        out[r] = static_cast<float>(kind == RowReduceKind::kMean ? acc / cols : acc);
        break;
      }
      case RowReduceKind::kNorm2: {
        double acc = 0.0;
        for (int64_t c = 0; c < cols; ++c) acc += static_cast<double>(x[c]) * x[c];
        out[r] = static_cast<float>(std::sqrt(acc));
        break;
      }
      case RowReduceKind::kMin:
      case RowReduceKind::kMax: {
        const bool is_max = kind == RowReduceKind::kMax;
        float m = x[0];
        for (int64_t c = 1; c < cols && !std::isnan(m); ++c) {
          if (std::isnan(x[c]) || (is_max ? x[c] > m : x[c] < m)) m = x[c];
        }
        out[r] = m;
        break;
      }
    }
  }
}

void RowSum(const float* in, float* out, int64_t rows, int64_t cols) {
  RowReduce(in, out, rows, cols, RowReduceKind::kSum);
}

void RowArgmax(const float* in, int64_t* out, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = in + r * cols;
    int64_t best = 0;
    for (int64_t c = 1; c < cols && !std::isnan(x[best]); ++c) {
      if (std::isnan(x[c]) || x[c] > x[best]) best = c;
    }
    out[r] = best;
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

void RowNormalize(const float* in, float* out, int64_t rows, int64_t cols,
                  RowNormalizeKind kind) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = in + r * cols;
    float* y = out + r * cols;
    double shift = 0.0;  // subtracted before dividing
    double scale = 0.0;  // divided by
    if (kind == RowNormalizeKind::kL2Normalize) {
      double ss = 0.0;
      for (int64_t c = 0; c < cols; ++c) ss += static_cast<double>(x[c]) * x[c];
      scale = std::sqrt(ss);
    } else {
      // Two passes: the variance is a sum of squared deviations, never a difference of
      // large sums.
      double sum = 0.0;
      for (int64_t c = 0; c < cols; ++c) sum += x[c];
      shift = sum / cols;
      double m2 = 0.0;
      for (int64_t c = 0; c < cols; ++c) m2 += (x[c] - shift) * (x[c] - shift);
      scale = std::sqrt(m2 / cols);
    }
    // A zero scale gives 0 / 0 = NaN for the elements equal to the shift (all of them for a
    // zero or constant row), as NumPy's division would.
    for (int64_t c = 0; c < cols; ++c) y[c] = static_cast<float>((x[c] - shift) / scale);
  }
}

}  // namespace gpupipe::kernels::cpu
