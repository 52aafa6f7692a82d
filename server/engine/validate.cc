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
  // Parameters become float32 on the device: a finite double can still overflow there.
  // Clamp bounds may be infinite (their defaults); nothing may be NaN.
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
  for (auto [name, value] : finite) {
    if (!std::isfinite(value) || std::fabs(value) > std::numeric_limits<float>::max()) {
      return absl::InvalidArgumentError(absl::StrCat(OpField(index, info), ".", name,
                                                     ": must be a finite float32 value, got ", value));
    }
  }
  for (auto [name, value] : bounds) {
    if (std::isnan(value) ||
        (std::isfinite(value) && std::fabs(value) > std::numeric_limits<float>::max())) {
      return absl::InvalidArgumentError(absl::StrCat(
          OpField(index, info), ".", name, ": must be a float32 value or infinity, got ", value));
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

absl::Status ValidateJob(const JobSpec& spec, int64_t input_bytes, const Limits& limits,
                         InputPath path) {
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
  const bool streamed = path == InputPath::kStreamed;
  const int64_t max_bytes = streamed ? limits.max_stream_input_bytes : limits.max_input_bytes;
  const bool overflows = elements > std::numeric_limits<int64_t>::max() / itemsize;
  if (overflows || elements * itemsize > max_bytes) {
    // An inline input that a streamed upload could carry gets pointed there.
    const std::string hint =
        !streamed && !overflows && elements * itemsize <= limits.max_stream_input_bytes
            ? absl::StrCat("; inputs up to ", limits.max_stream_input_bytes,
                           " bytes can be streamed with Run")
            : std::string();
    return absl::ResourceExhaustedError(absl::StrCat(
        "input: shape ", ShapeString(spec.shape), " of ", DTypeName(spec.dtype), " needs ",
        overflows ? std::string("too many") : absl::StrCat(elements * itemsize),
        " bytes, over this server's limit of ", max_bytes, " bytes",
        streamed ? " for streamed inputs" : "", hint));
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
    if (spec.ops[i].kind == OpKind::kArgmax) dtype = DType::kInt64;
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
