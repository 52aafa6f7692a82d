#include "kernels/cpu/reference_ops.h"

#include <cmath>
#include <limits>
#include <vector>

#include "common/float16.h"

namespace gpupipe::kernels::cpu {
namespace {

// The wider type sums accumulate in.
template <typename T>
struct Wide;
template <>
struct Wide<float> {
  using type = double;
};
template <>
struct Wide<double> {
  using type = long double;
};

template <typename T>
void ReduceRows(const T* in, T* out, int64_t rows, int64_t cols, RowReduceKind kind) {
  using W = typename Wide<T>::type;
  for (int64_t r = 0; r < rows; ++r) {
    const T* x = in + r * cols;
    switch (kind) {
      case RowReduceKind::kSum:
      case RowReduceKind::kMean: {
        W acc = 0;
        for (int64_t c = 0; c < cols; ++c) acc += x[c];
        out[r] = static_cast<T>(kind == RowReduceKind::kMean ? acc / static_cast<W>(cols) : acc);
        break;
      }
      case RowReduceKind::kNorm2: {
        W acc = 0;
        for (int64_t c = 0; c < cols; ++c) acc += static_cast<W>(x[c]) * x[c];
        out[r] = static_cast<T>(std::sqrt(acc));
        break;
      }
      case RowReduceKind::kMin:
      case RowReduceKind::kMax: {
        const bool is_max = kind == RowReduceKind::kMax;
        T m = x[0];
        for (int64_t c = 1; c < cols && !std::isnan(m); ++c) {
          if (std::isnan(x[c]) || (is_max ? x[c] > m : x[c] < m)) m = x[c];
        }
        out[r] = m;
        break;
      }
    }
  }
}

void ReduceRowsInt32(const int32_t* in, void* out, int64_t rows, int64_t cols,
                     RowReduceKind kind) {
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t* x = in + r * cols;
    if (kind == RowReduceKind::kSum) {
      // Modulo 2^64, as NumPy's int64 accumulator (unsigned, so wrapping is defined).
      uint64_t acc = 0;
      for (int64_t c = 0; c < cols; ++c) acc += static_cast<uint64_t>(static_cast<int64_t>(x[c]));
      static_cast<int64_t*>(out)[r] = static_cast<int64_t>(acc);
    } else {
      int32_t m = x[0];
      for (int64_t c = 1; c < cols; ++c) {
        m = kind == RowReduceKind::kMax ? (x[c] > m ? x[c] : m) : (x[c] < m ? x[c] : m);
      }
      static_cast<int32_t*>(out)[r] = m;
    }
  }
}

template <typename T>
void ArgmaxRows(const T* in, int64_t* out, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* x = in + r * cols;
    int64_t best = 0;
    for (int64_t c = 1; c < cols; ++c) {
      if constexpr (std::numeric_limits<T>::has_quiet_NaN) {
        if (std::isnan(x[best])) break;
        if (std::isnan(x[c])) {
          best = c;
          continue;
        }
      }
      if (x[c] > x[best]) best = c;
    }
    out[r] = best;
  }
}

template <typename T>
void SoftmaxRows(const T* in, T* out, int64_t rows, int64_t cols) {
  using W = typename Wide<T>::type;
  for (int64_t r = 0; r < rows; ++r) {
    const T* x = in + r * cols;
    T* y = out + r * cols;
    // NaN never wins the comparison, but exp(NaN - m) below makes the sum, and so the whole
    // row, NaN; an all -inf row gives exp(-inf - -inf) = NaN likewise (as NumPy does).
    W m = -std::numeric_limits<W>::infinity();
    for (int64_t c = 0; c < cols; ++c) {
      if (x[c] > m) m = x[c];
    }
    W sum = 0;
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(static_cast<W>(x[c]) - m);
    for (int64_t c = 0; c < cols; ++c) {
      y[c] = static_cast<T>(std::exp(static_cast<W>(x[c]) - m) / sum);
    }
  }
}

template <typename T>
void NormalizeRows(const T* in, T* out, int64_t rows, int64_t cols, RowNormalizeKind kind) {
  using W = typename Wide<T>::type;
  for (int64_t r = 0; r < rows; ++r) {
    const T* x = in + r * cols;
    T* y = out + r * cols;
    W shift = 0;  // subtracted before dividing
    W scale = 0;  // divided by
    if (kind == RowNormalizeKind::kL2Normalize) {
      W ss = 0;
      for (int64_t c = 0; c < cols; ++c) ss += static_cast<W>(x[c]) * x[c];
      scale = std::sqrt(ss);
    } else {
      // Two passes: the variance is a sum of squared deviations, never a difference of
      // large sums.
      W sum = 0;
      for (int64_t c = 0; c < cols; ++c) sum += x[c];
      shift = sum / static_cast<W>(cols);
      W m2 = 0;
      for (int64_t c = 0; c < cols; ++c) m2 += (x[c] - shift) * (x[c] - shift);
      scale = std::sqrt(m2 / static_cast<W>(cols));
    }
    // A zero scale gives 0 / 0 = NaN for the elements equal to the shift (all of them for a
    // zero or constant row), as NumPy's division would.
    for (int64_t c = 0; c < cols; ++c) y[c] = static_cast<T>((x[c] - shift) / scale);
  }
}

std::vector<float> Widen(const void* in, int64_t n) {
  const auto* h = static_cast<const HalfBits*>(in);
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[i] = HalfToFloat(h[i]);
  return out;
}

void Narrow(const std::vector<float>& in, void* out) {
  auto* h = static_cast<HalfBits*>(out);
  for (size_t i = 0; i < in.size(); ++i) h[i] = FloatToHalf(in[i]);
}

bool IsIntegerProgram(const EwProgram& program) {
  for (int i = 0; i < program.count; ++i) {
    if (!IsIntegerEwOpcode(program.instrs[i].op)) return false;
  }
  return true;
}

}  // namespace

bool Elementwise(const void* in, ElementType type, void* out, int64_t n,
                 const EwProgram& program) {
  // Same ApplyEw as the device code (see elementwise_program.h for where results may differ).
  switch (type) {
    case ElementType::kFloat32: {
      const auto* x = static_cast<const float*>(in);
      auto* y = static_cast<float*>(out);
      for (int64_t i = 0; i < n; ++i) y[i] = ApplyEw(program, x[i]);
      return true;
    }
    case ElementType::kFloat64: {
      const auto* x = static_cast<const double*>(in);
      auto* y = static_cast<double*>(out);
      for (int64_t i = 0; i < n; ++i) y[i] = ApplyEw(program, x[i]);
      return true;
    }
    case ElementType::kFloat16: {
      const auto* x = static_cast<const HalfBits*>(in);
      auto* y = static_cast<HalfBits*>(out);
      for (int64_t i = 0; i < n; ++i) y[i] = FloatToHalf(ApplyEw(program, HalfToFloat(x[i])));
      return true;
    }
    case ElementType::kInt32: {
      if (!IsIntegerProgram(program)) return false;
      const auto* x = static_cast<const int32_t*>(in);
      auto* y = static_cast<int32_t*>(out);
      for (int64_t i = 0; i < n; ++i) y[i] = ApplyEw(program, x[i]);
      return true;
    }
    case ElementType::kInt64: return false;
  }
  return false;
}

bool RowReduce(const void* in, ElementType type, void* out, int64_t rows, int64_t cols,
               RowReduceKind kind) {
  if (!RowReduceAccepts(type, kind)) return false;
  switch (type) {
    case ElementType::kFloat32:
      ReduceRows(static_cast<const float*>(in), static_cast<float*>(out), rows, cols, kind);
      return true;
    case ElementType::kFloat64:
      ReduceRows(static_cast<const double*>(in), static_cast<double*>(out), rows, cols, kind);
      return true;
    case ElementType::kFloat16: {
      std::vector<float> y(static_cast<size_t>(rows));
      ReduceRows(Widen(in, rows * cols).data(), y.data(), rows, cols, kind);
      Narrow(y, out);
      return true;
    }
    case ElementType::kInt32:
      ReduceRowsInt32(static_cast<const int32_t*>(in), out, rows, cols, kind);
      return true;
    case ElementType::kInt64: return false;
  }
  return false;
}

bool RowArgmax(const void* in, ElementType type, int64_t* out, int64_t rows, int64_t cols) {
  switch (type) {
    case ElementType::kFloat32:
      ArgmaxRows(static_cast<const float*>(in), out, rows, cols);
      return true;
    case ElementType::kFloat64:
      ArgmaxRows(static_cast<const double*>(in), out, rows, cols);
      return true;
    case ElementType::kFloat16:
      ArgmaxRows(Widen(in, rows * cols).data(), out, rows, cols);
      return true;
    case ElementType::kInt32:
      ArgmaxRows(static_cast<const int32_t*>(in), out, rows, cols);
      return true;
    case ElementType::kInt64: return false;
  }
  return false;
}

bool RowSoftmax(const void* in, ElementType type, void* out, int64_t rows, int64_t cols) {
  switch (type) {
    case ElementType::kFloat32:
      SoftmaxRows(static_cast<const float*>(in), static_cast<float*>(out), rows, cols);
      return true;
    case ElementType::kFloat64:
      SoftmaxRows(static_cast<const double*>(in), static_cast<double*>(out), rows, cols);
      return true;
    case ElementType::kFloat16: {
      std::vector<float> y(static_cast<size_t>(rows * cols));
      SoftmaxRows(Widen(in, rows * cols).data(), y.data(), rows, cols);
      Narrow(y, out);
      return true;
    }
    default: return false;
  }
}

bool RowNormalize(const void* in, ElementType type, void* out, int64_t rows, int64_t cols,
                  RowNormalizeKind kind) {
  switch (type) {
    case ElementType::kFloat32:
      NormalizeRows(static_cast<const float*>(in), static_cast<float*>(out), rows, cols, kind);
      return true;
    case ElementType::kFloat64:
      NormalizeRows(static_cast<const double*>(in), static_cast<double*>(out), rows, cols, kind);
      return true;
    case ElementType::kFloat16: {
      std::vector<float> y(static_cast<size_t>(rows * cols));
      NormalizeRows(Widen(in, rows * cols).data(), y.data(), rows, cols, kind);
      Narrow(y, out);
      return true;
    }
    default: return false;
  }
}

bool RunWithPrologue(const void* in, ElementType type, int64_t n, const EwProgram& pre,
                     void* out, ElementType out_type, int64_t out_count,
                     const std::function<bool(const void* x, ElementType type, void* y)>& op) {
  const bool half = type == ElementType::kFloat16;
  std::vector<char> buffer;
  std::vector<float> wide;
  const void* x = in;
  if (half) {
    wide = Widen(in, n);
    if (!Elementwise(wide.data(), ElementType::kFloat32, wide.data(), n, pre)) return false;
    x = wide.data();
  } else if (pre.count > 0) {
    buffer.resize(static_cast<size_t>(n) * ElementSize(type));
    if (!Elementwise(in, type, buffer.data(), n, pre)) return false;
    x = buffer.data();
  }
  if (half && out_type == ElementType::kFloat16) {
    std::vector<float> y(static_cast<size_t>(out_count));
    if (!op(x, ElementType::kFloat32, y.data())) return false;
    Narrow(y, out);
    return true;
  }
  return op(x, half ? ElementType::kFloat32 : type, out);
}

void Elementwise(const float* in, float* out, int64_t n, const EwProgram& program) {
  Elementwise(in, ElementType::kFloat32, out, n, program);
}
void RowReduce(const float* in, float* out, int64_t rows, int64_t cols, RowReduceKind kind) {
  RowReduce(in, ElementType::kFloat32, out, rows, cols, kind);
}
void RowSum(const float* in, float* out, int64_t rows, int64_t cols) {
  RowReduce(in, out, rows, cols, RowReduceKind::kSum);
}
void RowArgmax(const float* in, int64_t* out, int64_t rows, int64_t cols) {
  RowArgmax(in, ElementType::kFloat32, out, rows, cols);
}
void RowSoftmax(const float* in, float* out, int64_t rows, int64_t cols) {
  RowSoftmax(in, ElementType::kFloat32, out, rows, cols);
}
void RowNormalize(const float* in, float* out, int64_t rows, int64_t cols,
                  RowNormalizeKind kind) {
  RowNormalize(in, ElementType::kFloat32, out, rows, cols, kind);
}

}  // namespace gpupipe::kernels::cpu
