#include "server/engine/job/op_catalog.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

namespace gpupipe::engine {

const std::vector<OpInfo>& OpCatalog() {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // Float ops take every float type (float16 computes in float32); ops closed over the
  // integers also take int32.
  const std::vector<DType> floats = {DType::kFloat32, DType::kFloat64, DType::kFloat16};
  const std::vector<DType> numeric = {DType::kFloat32, DType::kFloat64, DType::kFloat16,
                                      DType::kInt32};
  static const auto* catalog = new std::vector<OpInfo>{
      {OpKind::kAffine, "affine", OpClass::kElementwise,
       "y = alpha * x + beta, computed as one fused multiply-add",
       {{"alpha", 1.0, "scale"}, {"beta", 0.0, "offset"}}, floats},
      {OpKind::kScale, "scale", OpClass::kElementwise, "y = alpha * x",
       {{"alpha", 1.0, "scale"}}, floats},
      {OpKind::kAdd, "add", OpClass::kElementwise,
       "y = x + value; int32 wraps around (value must be an int32 integer)",
       {{"value", 0.0, "offset"}}, numeric},
      {OpKind::kRelu, "relu", OpClass::kElementwise, "y = max(x, 0); NaN stays NaN", {}, numeric},
      {OpKind::kClamp, "clamp", OpClass::kElementwise,
       "y = np.clip(x, lo, hi); NaN stays NaN; for int32, finite bounds must be integers",
       {{"lo", -kInf, "lower bound"}, {"hi", kInf, "upper bound"}}, numeric},
      {OpKind::kAbs, "abs", OpClass::kElementwise, "y = |x|; int32 abs(-2^31) wraps to -2^31", {},
       numeric},
      {OpKind::kSqrt, "sqrt", OpClass::kElementwise, "y = sqrt(x), correctly rounded; NaN below 0",
       {}, floats},
      {OpKind::kExp, "exp", OpClass::kElementwise, "y = exp(x)", {}, floats},
      {OpKind::kLog, "log", OpClass::kElementwise, "y = ln(x); -inf at 0, NaN below 0", {}, floats},
      {OpKind::kSigmoid, "sigmoid", OpClass::kElementwise, "y = 1 / (1 + exp(-x))", {}, floats},
      {OpKind::kTanh, "tanh", OpClass::kElementwise, "y = tanh(x)", {}, floats},
      {OpKind::kPow, "pow", OpClass::kElementwise, "y = x ** p",
       {{"p", 1.0, "exponent", /*required=*/true}}, floats},
      {OpKind::kSum, "sum", OpClass::kRowReduction,
       "sum along the last axis (removes it); accumulation in the compute type in a tree order "
       "(float32 for float16); int32 sums are int64",
       {}, numeric},
      {OpKind::kMin, "min", OpClass::kRowReduction,
       "minimum along the last axis; NaN if the row holds one", {}, numeric},
      {OpKind::kMax, "max", OpClass::kRowReduction,
       "maximum along the last axis; NaN if the row holds one", {}, numeric},
      {OpKind::kMean, "mean", OpClass::kRowReduction, "mean along the last axis", {}, floats},
      {OpKind::kNorm2, "norm2", OpClass::kRowReduction,
       "Euclidean norm along the last axis, sqrt(sum(x^2))", {}, floats},
      {OpKind::kArgmax, "argmax", OpClass::kRowReduction,
       "index of the first maximum along the last axis (a NaN is the maximum); int64 result", {},
       numeric},
      {OpKind::kSoftmax, "softmax", OpClass::kRowMultipass,
       "exp(x - max) / sum(exp(x - max)) along the last axis", {}, floats},
      {OpKind::kL2Normalize, "l2normalize", OpClass::kRowMultipass,
       "x / norm2(x) along the last axis; a zero row gives NaN", {}, floats},
      {OpKind::kStandardize, "standardize", OpClass::kRowMultipass,
       "(x - mean) / std along the last axis, population std; a constant row gives NaN", {}, floats},
      {OpKind::kCumsum, "cumsum", OpClass::kRowScan,
       "np.cumsum along the last axis (same shape); float16 accumulates in float32, int32 gives "
       "int64",
       {}, numeric},
      {OpKind::kHistogram, "histogram", OpClass::kRowResize,
       "np.histogram(row, bins, range=(lo, hi)) counts per row: the last axis becomes bins int64 "
       "counts; equal-width bins, the last closed on the right; values outside [lo, hi] and NaN "
       "are not counted",
       {{"bins", 10, "number of bins, 1 to 65536", false, "integer"},
        {"lo", 0, "lower edge of the first bin (finite)", /*required=*/true},
        {"hi", 0, "upper edge of the last bin (finite, above lo)", /*required=*/true}},
       numeric},
      {OpKind::kConvolve, "convolve", OpClass::kRowResize,
       "np.convolve(row, taps, mode) along the last axis: N + M - 1 outputs (full), max(N, M) "
       "(same) or max(N, M) - min(N, M) + 1 (valid) for N elements and M taps",
       {{"taps", 0, "filter taps, 1 to 1024 finite numbers", /*required=*/true, "number list"},
        {"mode", 0, "full, same or valid", false, "enum: full, same, valid", "full"}},
       floats},
      {OpKind::kTopk, "topk", OpClass::kRowResize,
       "the k largest values of each row in descending order (np.sort(row)[::-1][:k]; a NaN "
       "counts as the largest): the last axis becomes k",
       {{"k", 0, "values kept per row, 1 to min(row length, 1024)", /*required=*/true,
         "integer"}},
       numeric},
  };
  return *catalog;
}

const OpInfo& GetOpInfo(OpKind kind) {
  for (const OpInfo& info : OpCatalog()) {
    if (info.kind == kind) return info;
  }
  throw std::logic_error("op kind missing from the catalog");
}

const char* OpClassName(OpClass op_class) {
  switch (op_class) {
    case OpClass::kElementwise: return "elementwise";
    case OpClass::kRowReduction: return "row-reduction";
    case OpClass::kRowMultipass: return "row-multipass";
    case OpClass::kRowScan: return "row-scan";
    case OpClass::kRowResize: return "row-resize";
  }
  return "unknown";
}

bool IsElementwise(OpKind kind) { return GetOpInfo(kind).op_class == OpClass::kElementwise; }

DType OpOutputDType(OpKind kind, DType dtype) {
  switch (kind) {
    case OpKind::kArgmax:
    case OpKind::kHistogram: return DType::kInt64;
    case OpKind::kSum:
    case OpKind::kCumsum: return dtype == DType::kInt32 ? DType::kInt64 : dtype;
    default: return dtype;
  }
}

DType OpOutputDType(const OpSpec& op, DType in) { return OpOutputDType(op.kind, in); }

int64_t OpOutputCols(const OpSpec& op, int64_t cols) {
  const auto m = static_cast<int64_t>(op.taps.size());
  switch (op.kind) {
    case OpKind::kHistogram: return op.bins;
    case OpKind::kTopk: return op.k;
    case OpKind::kConvolve:
      switch (op.mode) {
        case ConvolveMode::kFull: return cols + m - 1;
        case ConvolveMode::kSame: return std::max(cols, m);
        case ConvolveMode::kValid: return std::max(cols, m) - std::min(cols, m) + 1;
      }
      return cols;
    default: return cols;
  }
}

std::string KnownOpNames() {
  std::string names;
  for (const OpInfo& info : OpCatalog()) {
    if (!names.empty()) names += ", ";
    names += info.name;
  }
  return names;
}

}  // namespace gpupipe::engine
