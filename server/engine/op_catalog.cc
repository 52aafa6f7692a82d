#include "server/engine/op_catalog.h"

#include <stdexcept>
#include <string>

namespace gpupipe::engine {

const std::vector<OpInfo>& OpCatalog() {
  static const auto* catalog = new std::vector<OpInfo>{
      {OpKind::kAffine, "affine", OpClass::kElementwise,
       "y = alpha * x + beta, computed as one fused multiply-add",
       {{"alpha", 1.0, "scale"}, {"beta", 0.0, "offset"}},
       {DType::kFloat32}},
      {OpKind::kRelu, "relu", OpClass::kElementwise, "y = max(x, 0); NaN stays NaN", {},
       {DType::kFloat32}},
      {OpKind::kSum, "sum", OpClass::kRowReduction,
       "sum along the last axis (removes it); float32 accumulation in a tree order", {},
       {DType::kFloat32}},
      {OpKind::kSoftmax, "softmax", OpClass::kRowMultipass,
       "exp(x - max) / sum(exp(x - max)) along the last axis", {}, {DType::kFloat32}},
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

std::string KnownOpNames() {
  std::string names;
  for (const OpInfo& info : OpCatalog()) {
    if (!names.empty()) names += ", ";
    names += info.name;
  }
  return names;
}

}  // namespace gpupipe::engine
