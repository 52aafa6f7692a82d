#include "server/engine/planning/plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "server/engine/job/op_catalog.h"
#include "server/engine/job/validate.h"

namespace gpupipe::engine {
namespace {

// scale and add are affine instructions: fma(alpha, x, 0) and fma(1, x, value) round once,
// exactly like alpha * x and x + value (and for int32, 1 * x + value wraps like x + value).
// Parameters stay doubles; each compute type converts them (kernels::EwParam).
kernels::EwInstr ToInstr(const OpSpec& op) {
  using kernels::EwOpcode;
  switch (op.kind) {
    case OpKind::kAffine: return {EwOpcode::kAffine, op.alpha, op.beta};
    case OpKind::kScale: return {EwOpcode::kAffine, op.alpha, 0.0};
    case OpKind::kAdd: return {EwOpcode::kAffine, 1.0, op.value};
    case OpKind::kRelu: return {EwOpcode::kRelu, 0.0, 0.0};
    case OpKind::kClamp: return {EwOpcode::kClamp, op.lo, op.hi};
    case OpKind::kAbs: return {EwOpcode::kAbs, 0.0, 0.0};
    case OpKind::kSqrt: return {EwOpcode::kSqrt, 0.0, 0.0};
    case OpKind::kExp: return {EwOpcode::kExp, 0.0, 0.0};
    case OpKind::kLog: return {EwOpcode::kLog, 0.0, 0.0};
    case OpKind::kSigmoid: return {EwOpcode::kSigmoid, 0.0, 0.0};
    case OpKind::kTanh: return {EwOpcode::kTanh, 0.0, 0.0};
    case OpKind::kPow: return {EwOpcode::kPow, op.p, 0.0};
    default:
      break;
  }
  return {};
}

class PlanBuilder {
 public:
  explicit PlanBuilder(const JobSpec& spec) : shape_(spec.shape), dtype_(spec.dtype) {
    plan_.output_dtype = spec.dtype;
    plan_.input_elements = ElementCount(spec.shape);
    plan_.max_bytes = plan_.input_elements * DTypeSize(spec.dtype);
  }

  void AddElementwise(const OpSpec& op) {
    if (pending_.count == kernels::kMaxEwInstrs) FlushElementwise();
    pending_.Append(ToInstr(op));
    AppendLabel(op);
  }

  absl::Status AddRowOp(const OpSpec& op, PlanStep step) {
    if (shape_.empty()) return absl::InternalError("row op on a scalar passed validation");
    step.program = pending_;
    step.in_dtype = dtype_;
    step.out_dtype = OpOutputDType(op, dtype_);
    step.cols = shape_.back();
    step.rows = ElementCount(std::vector<int64_t>(shape_.begin(), shape_.end() - 1));
    AppendLabel(op);
    step.ops = std::move(pending_label_);
    pending_ = {};
    pending_label_.clear();
    if (step.reduces()) shape_.pop_back();
    dtype_ = step.out_dtype;
    plan_.output_dtype = dtype_;
    plan_.steps.push_back(std::move(step));
    return absl::OkStatus();
  }

  // cumsum, histogram, convolve, topk: no prologue, so a pending elementwise run is flushed
  // into a step of its own first.
  absl::Status AddResizingRowOp(const OpSpec& op, StepKind kind) {
    if (shape_.empty()) return absl::InternalError("row op on a scalar passed validation");
    if (pending_.count > 0) FlushElementwise();
    PlanStep step;
    step.kind = kind;
    step.op = op;
    step.in_dtype = dtype_;
    step.out_dtype = OpOutputDType(op, dtype_);
    step.cols = shape_.back();
    step.rows = ElementCount(std::vector<int64_t>(shape_.begin(), shape_.end() - 1));
    step.out_cols = OpOutputCols(op, step.cols);
    step.ops = GetOpInfo(op.kind).name;
    shape_.back() = step.out_cols;
    dtype_ = step.out_dtype;
    plan_.output_dtype = dtype_;
    plan_.steps.push_back(std::move(step));
    return absl::OkStatus();
  }

  Plan Finish() {
    if (pending_.count > 0) FlushElementwise();
    plan_.output_shape = shape_;
    plan_.output_elements = ElementCount(shape_);
    for (const PlanStep& s : plan_.steps) {
      plan_.max_bytes = std::max({plan_.max_bytes, s.input_elements() * s.input_itemsize(),
                                  s.output_elements() * s.output_itemsize()});
    }
    return std::move(plan_);
  }

 private:
  void FlushElementwise() {
    PlanStep step;
    step.kind = StepKind::kElementwise;
    step.program = pending_;
    step.rows = 1;
    step.cols = ElementCount(shape_);
    step.in_dtype = dtype_;
    step.out_dtype = dtype_;
    step.ops = std::move(pending_label_);
    pending_ = {};
    pending_label_.clear();
    plan_.steps.push_back(std::move(step));
  }

  void AppendLabel(const OpSpec& op) {
    if (!pending_label_.empty()) pending_label_ += "+";
    pending_label_ += GetOpInfo(op.kind).name;
  }

  Plan plan_;
  std::vector<int64_t> shape_;
  DType dtype_;  // of the tensor the next step reads
  kernels::EwProgram pending_;
  std::string pending_label_;
};

}  // namespace

const char* StepKindName(StepKind kind) {
  switch (kind) {
    case StepKind::kElementwise: return "elementwise";
    case StepKind::kRowReduce: return "row-reduce";
    case StepKind::kRowArgmax: return "row-argmax";
    case StepKind::kRowSoftmax: return "row-softmax";
    case StepKind::kRowNormalize: return "row-normalize";
    case StepKind::kRowCumsum: return "row-cumsum";
    case StepKind::kRowHistogram: return "row-histogram";
    case StepKind::kRowConvolve: return "row-convolve";
    case StepKind::kRowTopk: return "row-topk";
  }
  return "unknown";
}

const char* StepDependencyReason(StepKind kind) {
  switch (kind) {
    case StepKind::kElementwise: return "reads the previous op's output";
    case StepKind::kRowReduce:
    case StepKind::kRowArgmax: return "reduces the previous op's output";
    case StepKind::kRowSoftmax:
    case StepKind::kRowNormalize: return "normalizes the previous op's output";
    case StepKind::kRowCumsum: return "scans the previous op's output";
    case StepKind::kRowHistogram: return "counts the previous op's output";
    case StepKind::kRowConvolve: return "filters the previous op's output";
    case StepKind::kRowTopk: return "selects from the previous op's output";
  }
  return "";
}

absl::StatusOr<Plan> PlanJob(const JobSpec& spec) {
  PlanBuilder builder(spec);
  for (const OpSpec& op : spec.ops) {
    if (IsElementwise(op.kind)) {
      builder.AddElementwise(op);
      continue;
    }
    StepKind resizing = StepKind::kElementwise;
    switch (op.kind) {
      case OpKind::kCumsum: resizing = StepKind::kRowCumsum; break;
      case OpKind::kHistogram: resizing = StepKind::kRowHistogram; break;
      case OpKind::kConvolve: resizing = StepKind::kRowConvolve; break;
      case OpKind::kTopk: resizing = StepKind::kRowTopk; break;
      default: break;
    }
    if (resizing != StepKind::kElementwise) {
      if (absl::Status s = builder.AddResizingRowOp(op, resizing); !s.ok()) return s;
      continue;
    }
    PlanStep step;
    switch (op.kind) {
      case OpKind::kSum: step.reduce = kernels::RowReduceKind::kSum; break;
      case OpKind::kMin: step.reduce = kernels::RowReduceKind::kMin; break;
      case OpKind::kMax: step.reduce = kernels::RowReduceKind::kMax; break;
      case OpKind::kMean: step.reduce = kernels::RowReduceKind::kMean; break;
      case OpKind::kNorm2: step.reduce = kernels::RowReduceKind::kNorm2; break;
      case OpKind::kArgmax: step.kind = StepKind::kRowArgmax; break;
      case OpKind::kSoftmax: step.kind = StepKind::kRowSoftmax; break;
      case OpKind::kL2Normalize:
        step.kind = StepKind::kRowNormalize;
        step.normalize = kernels::RowNormalizeKind::kL2Normalize;
        break;
      case OpKind::kStandardize:
        step.kind = StepKind::kRowNormalize;
        step.normalize = kernels::RowNormalizeKind::kStandardize;
        break;
      default:
        return absl::InternalError(absl::StrCat("op ", GetOpInfo(op.kind).name, " has no plan"));
    }
    if (GetOpInfo(op.kind).op_class == OpClass::kRowReduction && op.kind != OpKind::kArgmax) {
      step.kind = StepKind::kRowReduce;
    }
    if (absl::Status s = builder.AddRowOp(op, step); !s.ok()) return s;
  }
  return builder.Finish();
}

}  // namespace gpupipe::engine
