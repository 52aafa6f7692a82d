// The op catalog: every op the engine knows, its parameters, defaults and dtypes. The single
// source for validation messages and for `Describe`.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "server/engine/types.h"

namespace gpupipe::engine {

enum class OpClass {
  kElementwise,    // applies to every element; fused into runs
  kRowReduction,   // reduces the last axis away
  kRowMultipass,   // needs a per-row result before it can write (e.g. softmax)
};

struct ParamInfo {
  const char* name;
  double default_value;  // unused when required
  const char* description;
  bool required = false;
};

struct OpInfo {
  OpKind kind;
  const char* name;
  OpClass op_class;
  const char* description;
  std::vector<ParamInfo> params;
  std::vector<DType> dtypes;
};

// All ops, in catalog order.
const std::vector<OpInfo>& OpCatalog();
const OpInfo& GetOpInfo(OpKind kind);
bool IsElementwise(OpKind kind);
const char* OpClassName(OpClass op_class);  // "elementwise", ...
// The dtype `kind` writes for input `dtype` (NumPy's): argmax gives int64, a sum of int32
// gives int64, everything else keeps its input's dtype.
DType OpOutputDType(OpKind kind, DType dtype);
// "affine, relu, sum, softmax"
std::string KnownOpNames();

}  // namespace gpupipe::engine
