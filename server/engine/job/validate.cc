#include "server/engine/job/validate.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/common/histogram_bin.h"
#include "server/engine/job/op_catalog.h"

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

// Limits of the ops that replace the last axis (documented in the proto and the catalog).
constexpr int64_t kMaxHistogramBins = 65536;
constexpr size_t kMaxConvolveTaps = 1024;
constexpr int64_t kMaxTopk = 1024;

// Parameters of cumsum, histogram, convolve and topk; `cols` is the op's row length.
absl::Status ValidateRowResizeParams(size_t index, const OpSpec& op, const OpInfo& info,
                                     int64_t cols) {
  const std::string field = OpField(index, info);
  switch (op.kind) {
    case OpKind::kHistogram:
      if (op.bins < 1 || op.bins > kMaxHistogramBins) {
        return absl::InvalidArgumentError(absl::StrCat(field, ".bins: ", op.bins,
                                                       " is out of range 1..", kMaxHistogramBins));
      }
      for (auto [name, value] : {std::pair<const char*, double>{"lo", op.lo}, {"hi", op.hi}}) {
        if (!std::isfinite(value)) {
          return absl::InvalidArgumentError(
              absl::StrCat(field, ".", name, ": must be a finite number, got ", value));
        }
      }
      if (!(op.lo < op.hi) || !std::isfinite(op.hi - op.lo)) {
        return absl::InvalidArgumentError(absl::StrCat(
            field, ": lo (", op.lo, ") must be below hi (", op.hi, ") with a finite hi - lo"));
      }
      // Values are placed by the binning's width and its inverse: both must be finite and
      // above zero (np.histogram refuses such ranges too: "too many bins for data range").
      if (const kernels::HistogramBinning b =
              kernels::HistogramBinning::Make(static_cast<int32_t>(op.bins), op.lo, op.hi);
          !(b.step > 0) || !std::isfinite(b.scale)) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, ": ", op.bins, " bins over [", op.lo, ", ", op.hi,
                         "] would be narrower than the smallest double; use fewer bins or a "
                         "wider range"));
      }
      return absl::OkStatus();
    case OpKind::kConvolve:
      if (op.taps.empty() || op.taps.size() > kMaxConvolveTaps) {
        return absl::InvalidArgumentError(absl::StrCat(field, ".taps: ", op.taps.size(),
                                                       " taps given; 1 to ", kMaxConvolveTaps,
                                                       " are required"));
      }
      for (size_t i = 0; i < op.taps.size(); ++i) {
        // Taps become float32 for float32 and float16 rows: a finite double may overflow.
        if (!std::isfinite(op.taps[i]) ||
            std::fabs(op.taps[i]) > std::numeric_limits<float>::max()) {
          return absl::InvalidArgumentError(absl::StrCat(
              field, ".taps[", i, "]: must be a finite float32 value, got ", op.taps[i]));
        }
      }
      return absl::OkStatus();
    case OpKind::kTopk:
      if (op.k < 1 || op.k > std::min(cols, kMaxTopk)) {
        return absl::InvalidArgumentError(absl::StrCat(
            field, ".k: ", op.k, " is out of range 1..", std::min(cols, kMaxTopk), " (k is at most ",
            kMaxTopk, " and at most the row length ", cols, ")"));
      }
      return absl::OkStatus();
    default:
      return absl::OkStatus();
  }
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
  const int64_t max_bytes = path == InputPath::kRegion ? limits.max_region_input_bytes
                            : streamed                 ? limits.max_stream_input_bytes
                                                       : limits.max_input_bytes;
  const bool overflows = elements > std::numeric_limits<int64_t>::max() / itemsize;
  if (overflows || elements * itemsize > max_bytes) {
    // An inline input that a streamed upload could carry gets pointed there.
    const std::string hint = path == InputPath::kInline && !overflows &&
                                     elements * itemsize <= limits.max_stream_input_bytes
                                 ? absl::StrCat("; inputs up to ", limits.max_stream_input_bytes,
                                                " bytes can be streamed with Run")
                                 : std::string();
    return absl::ResourceExhaustedError(absl::StrCat(
        "input: shape ", ShapeString(spec.shape), " of ", DTypeName(spec.dtype), " needs ",
        overflows ? std::string("too many") : absl::StrCat(elements * itemsize),
        " bytes, over this server's limit of ", max_bytes, " bytes",
        streamed                     ? " for streamed inputs"
        : path == InputPath::kRegion ? " for region inputs"
                                     : "",
        hint));
  }
  // A dry run reads no input: it may come without its bytes.
  const bool dry_without_input = spec.dry_run && input_bytes == 0 && path == InputPath::kInline;
  if (input_bytes != elements * itemsize && !dry_without_input) {
    return absl::InvalidArgumentError(absl::StrCat(
        path == InputPath::kRegion ? "input_region.length: " : "input.data: ", input_bytes,
        " bytes do not match shape ", ShapeString(spec.shape), " of ", DTypeName(spec.dtype),
        " (", elements * itemsize, " bytes expected)"));
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
  // Each op sees the shape and dtype the ops before it leave.
  std::vector<int64_t> shape = spec.shape;
  DType dtype = spec.dtype;
  for (size_t i = 0; i < spec.ops.size(); ++i) {
    const OpSpec& op = spec.ops[i];
    const OpInfo& info = GetOpInfo(op.kind);
    if (absl::Status s = ValidateOp(i, op, dtype, shape.size()); !s.ok()) return s;
    const int64_t cols = shape.empty() ? 1 : shape.back();
    if (absl::Status s = ValidateRowResizeParams(i, op, info, cols); !s.ok()) return s;
    if (info.op_class == OpClass::kRowReduction) {
      shape.pop_back();
    } else if (info.op_class == OpClass::kRowResize) {
      shape.back() = OpOutputCols(op, shape.back());
    }
    dtype = OpOutputDType(op, dtype);
    // No result may outgrow the input limit of the job's path: ops that widen rows
    // (histogram, convolve) would otherwise let a small request claim unbounded memory.
    const int64_t count = ElementCount(shape);
    if (count < 0 || count > max_bytes / DTypeSize(dtype)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          OpField(i, info), ": its result, shape ", ShapeString(shape), " of ", DTypeName(dtype),
          ", needs more than this server's limit of ", max_bytes, " bytes",
          streamed                     ? " for streamed inputs"
          : path == InputPath::kRegion ? " for region inputs"
                                       : ""));
    }
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
