#include "server/engine/op_catalog.h"

#include <limits>
#include <stdexcept>
#include <string>

namespace gpupipe::engine {

const std::vector<OpInfo>& OpCatalog() {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // Float ops take every float type (float16 computes in float32); ops closed over the
  // integers also take int32.
  const std::vector<DType> f32 = {DType::kFloat32, DType::kFloat64, DType::kFloat16};
  const std::vector<DType> all = {DType::kFloat32, DType::kFloat64, DType::kFloat16,
                                  DType::kInt32};
  static const auto* catalog = new std::vector<OpInfo>{
      {OpKind::kAffine, "affine", OpClass::kElementwise,
       "y = alpha * x + beta, computed as one fused multiply-add",
       {{"alpha", 1.0, "scale"}, {"beta", 0.0, "offset"}}, f32},
      {OpKind::kScale, "scale", OpClass::kElementwise, "y = alpha * x",
       {{"alpha", 1.0, "scale"}}, f32},
      {OpKind::kAdd, "add", OpClass::kElementwise,
       "y = x + value; int32 wraps around (value must be an int32 integer)",
       {{"value", 0.0, "offset"}}, all},
      {OpKind::kRelu, "relu", OpClass::kElementwise, "y = max(x, 0); NaN stays NaN", {}, all},
      {OpKind::kClamp, "clamp", OpClass::kElementwise,
       "y = np.clip(x, lo, hi); NaN stays NaN; for int32, finite bounds must be integers",
       {{"lo", -kInf, "lower bound"}, {"hi", kInf, "upper bound"}}, all},
      {OpKind::kAbs, "abs", OpClass::kElementwise, "y = |x|; int32 abs(-2^31) wraps to -2^31", {},
       all},
      {OpKind::kSqrt, "sqrt", OpClass::kElementwise, "y = sqrt(x), correctly rounded; NaN below 0",
       {}, f32},
      {OpKind::kExp, "exp", OpClass::kElementwise, "y = exp(x)", {}, f32},
      {OpKind::kLog, "log", OpClass::kElementwise, "y = ln(x); -inf at 0, NaN below 0", {}, f32},
      {OpKind::kSigmoid, "sigmoid", OpClass::kElementwise, "y = 1 / (1 + exp(-x))", {}, f32},
      {OpKind::kTanh, "tanh", OpClass::kElementwise, "y = tanh(x)", {}, f32},
      {OpKind::kPow, "pow", OpClass::kElementwise, "y = x ** p",
       {{"p", 1.0, "exponent", /*required=*/true}}, f32},
      {OpKind::kSum, "sum", OpClass::kRowReduction,
       "sum along the last axis (removes it); accumulation in the compute type in a tree order "
       "(float32 for float16); int32 sums are int64",
       {}, all},
      {OpKind::kMin, "min", OpClass::kRowReduction,
       "minimum along the last axis; NaN if the row holds one", {}, all},
      {OpKind::kMax, "max", OpClass::kRowReduction,
       "maximum along the last axis; NaN if the row holds one", {}, all},
      {OpKind::kMean, "mean", OpClass::kRowReduction, "mean along the last axis", {}, f32},
      {OpKind::kNorm2, "norm2", OpClass::kRowReduction,
       "Euclidean norm along the last axis, sqrt(sum(x^2))", {}, f32},
      {OpKind::kArgmax, "argmax", OpClass::kRowReduction,
       "index of the first maximum along the last axis (a NaN is the maximum); int64 result", {},
       all},
      {OpKind::kSoftmax, "softmax", OpClass::kRowMultipass,
       "exp(x - max) / sum(exp(x - max)) along the last axis", {}, f32},
      {OpKind::kL2Normalize, "l2normalize", OpClass::kRowMultipass,
       "x / norm2(x) along the last axis; a zero row gives NaN", {}, f32},
      {OpKind::kStandardize, "standardize", OpClass::kRowMultipass,
       "(x - mean) / std along the last axis, population std; a constant row gives NaN", {}, f32},
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
  }
  return "unknown";
}

bool IsElementwise(OpKind kind) { return GetOpInfo(kind).op_class == OpClass::kElementwise; }

DType OpOutputDType(OpKind kind, DType dtype) {
  if (kind == OpKind::kArgmax) return DType::kInt64;
  if (kind == OpKind::kSum && dtype == DType::kInt32) return DType::kInt64;
  return dtype;
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
