// The op catalog: every op the engine knows, its parameters, defaults and dtypes. The single
// source for validation messages and for `Describe`.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "server/engine/job/types.h"

namespace gpupipe::engine {

enum class OpClass {
  kElementwise,    // applies to every element; fused into runs
  kRowReduction,   // reduces the last axis away
  kRowMultipass,   // needs a per-row result before it can write (e.g. softmax)
  kRowScan,        // a running result along the last axis (cumsum); keeps the shape
  kRowResize,      // replaces the last axis by one of another length (histogram, topk, ...)
};

struct ParamInfo {
  const char* name;
  double default_value;  // unused when required
  const char* description;
  bool required = false;
  const char* type = "number";          // as Describe shows it
  const char* default_text = nullptr;   // the default when it is not a number (an enum name)
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

// Output rules of the ops that change the last axis or the dtype, shared by validation and the
// planner: the dtype an op leaves for `in`, and the last axis it leaves for a row of `cols`
// (cols itself for ops that keep it; not meaningful for reductions, which remove it).
DType OpOutputDType(const OpSpec& op, DType in);
// The dtype `kind` writes for input `dtype` (NumPy's): argmax and histogram give int64, a sum
// or cumsum of int32 gives int64, everything else keeps its input's dtype.
DType OpOutputDType(OpKind kind, DType dtype);
int64_t OpOutputCols(const OpSpec& op, int64_t cols);
const char* OpClassName(OpClass op_class);  // "elementwise", ...
// "affine, relu, sum, softmax"
std::string KnownOpNames();

}  // namespace gpupipe::engine
