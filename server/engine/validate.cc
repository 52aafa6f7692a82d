#include "server/engine/validate.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/engine/op_catalog.h"

namespace gpupipe::engine {
namespace {

std::string OpField(size_t index, const OpInfo& info) {
  return absl::StrCat("ops[", index, "] (", info.name, ")");
}

std::string DTypeList(const std::vector<DType>& dtypes) {
  std::vector<std::string> names;
  for (DType d : dtypes) names.push_back(DTypeName(d));
  return absl::StrJoin(names, ", ");
}

absl::Status ValidateOp(size_t index, const OpSpec& op, DType dtype, size_t rank_before) {
  const OpInfo& info = GetOpInfo(op.kind);
  if (std::find(info.dtypes.begin(), info.dtypes.end(), dtype) == info.dtypes.end()) {
    return absl::InvalidArgumentError(absl::StrCat(OpField(index, info), ": dtype ",
                                                   DTypeName(dtype), " is not supported (supported: ",
                                                   DTypeList(info.dtypes), ")"));
  }
  // Parameters run in the compute type: float32 for float32/float16 data (a finite double can
  // still overflow there), double for float64, int32 for int32 (where they must be integers in
  // range: NumPy rejects out-of-range Python ints). Clamp bounds may be infinite (their
  // defaults, meaning no bound); nothing may be NaN.
  std::vector<std::pair<const char*, double>> finite;
  std::vector<std::pair<const char*, double>> bounds;
  switch (op.kind) {
    case OpKind::kAffine: finite = {{"alpha", op.alpha}, {"beta", op.beta}}; break;
    case OpKind::kScale: finite = {{"alpha", op.alpha}}; break;
    case OpKind::kAdd: finite = {{"value", op.value}}; break;
    case OpKind::kPow: finite = {{"p", op.p}}; break;
    case OpKind::kClamp: bounds = {{"lo", op.lo}, {"hi", op.hi}}; break;
    default: break;
  }
  const double max_abs = dtype == DType::kFloat64 ? std::numeric_limits<double>::max()
                                                   : std::numeric_limits<float>::max();
  const char* type_name = dtype == DType::kFloat64 ? "float64" : "float32";
  const auto is_int32 = [](double v) {
    return v == std::floor(v) && v >= std::numeric_limits<int32_t>::min() &&
           v <= std::numeric_limits<int32_t>::max();
  };
  for (auto [name, value] : finite) {
    if (dtype == DType::kInt32) {
      if (!std::isfinite(value) || !is_int32(value)) {
        return absl::InvalidArgumentError(absl::StrCat(
            OpField(index, info), ".", name,
            ": must be an integer in the int32 range for int32 input, got ", value));
      }
    } else if (!std::isfinite(value) || std::fabs(value) > max_abs) {
      return absl::InvalidArgumentError(absl::StrCat(OpField(index, info), ".", name,
                                                     ": must be a finite ", type_name,
                                                     " value, got ", value));
    }
  }
  for (auto [name, value] : bounds) {
    if (dtype == DType::kInt32) {
      if (std::isnan(value) || (std::isfinite(value) && !is_int32(value))) {
        return absl::InvalidArgumentError(absl::StrCat(
            OpField(index, info), ".", name,
            ": must be an integer in the int32 range or infinity for int32 input, got ", value));
      }
    } else if (std::isnan(value) || (std::isfinite(value) && std::fabs(value) > max_abs)) {
      return absl::InvalidArgumentError(absl::StrCat(OpField(index, info), ".", name,
                                                     ": must be a ", type_name,
                                                     " value or infinity, got ", value));
    }
  }
  if (info.op_class != OpClass::kElementwise && rank_before == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(OpField(index, info),
                     ": works along the last axis, but its input is a scalar (shape [])"));
  }
  return absl::OkStatus();
}

}  // namespace

int64_t ElementCount(const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && count > std::numeric_limits<int64_t>::max() / d) return -1;
    count *= d;
  }
  return count;
}

absl::Status ValidateJob(const JobSpec& spec, int64_t input_bytes, const Limits& limits) {
  if (static_cast<int>(spec.shape.size()) > limits.max_rank) {
    return absl::InvalidArgumentError(absl::StrCat("input.shape: rank ", spec.shape.size(),
                                                   " exceeds the limit of ", limits.max_rank));
  }
  for (size_t i = 0; i < spec.shape.size(); ++i) {
    if (spec.shape[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("input.shape[", i, "]: dimension ", spec.shape[i], " is negative"));
    }
  }
  const int64_t elements = ElementCount(spec.shape);
  if (elements < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("input.shape: ", ShapeString(spec.shape), " has too many elements"));
  }
  if (elements == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input.shape: the tensor is empty (shape ", ShapeString(spec.shape),
        "); at least one element is required"));
  }
  const int64_t itemsize = DTypeSize(spec.dtype);
  if (elements > std::numeric_limits<int64_t>::max() / itemsize ||
      elements * itemsize > limits.max_input_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "input: shape ", ShapeString(spec.shape), " of ", DTypeName(spec.dtype), " needs ",
        elements > std::numeric_limits<int64_t>::max() / itemsize ? std::string("too many")
                                                                  : absl::StrCat(elements * itemsize),
        " bytes, over this server's limit of ", limits.max_input_bytes, " bytes"));
  }
  if (input_bytes != elements * itemsize) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input.data: ", input_bytes, " bytes do not match shape ", ShapeString(spec.shape), " of ",
        DTypeName(spec.dtype), " (", elements * itemsize, " bytes expected)"));
  }
  if (spec.ops.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ops: the pipeline is empty; give at least one op (known: ", KnownOpNames(),
                     ")"));
  }
  if (static_cast<int>(spec.ops.size()) > limits.max_ops) {
    return absl::InvalidArgumentError(absl::StrCat("ops: ", spec.ops.size(),
                                                   " ops exceed the limit of ", limits.max_ops));
  }
  // Each op sees the rank and dtype the ops before it leave.
  size_t rank = spec.shape.size();
  DType dtype = spec.dtype;
  for (size_t i = 0; i < spec.ops.size(); ++i) {
    if (absl::Status s = ValidateOp(i, spec.ops[i], dtype, rank); !s.ok()) return s;
    if (GetOpInfo(spec.ops[i].kind).op_class == OpClass::kRowReduction) --rank;
    dtype = OpOutputDType(spec.ops[i].kind, dtype);
  }
  if (spec.stages < 0 || spec.stages > 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.stages: ", spec.stages, " is out of range 1..8 (0 = default)"));
  }
  if (static_cast<int>(spec.client_tag.size()) > limits.max_client_tag_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("client_tag: ", spec.client_tag.size(),
                                                   " bytes exceed the limit of ",
                                                   limits.max_client_tag_bytes));
  }
  return absl::OkStatus();
}

}  // namespace gpupipe::engine
