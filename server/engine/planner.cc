#include "server/engine/plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "server/engine/op_catalog.h"
#include "server/engine/validate.h"

namespace gpupipe::engine {
namespace {

kernels::EwInstr ToInstr(const OpSpec& op) {
  switch (op.kind) {
    case OpKind::kAffine:
      return {kernels::EwOpcode::kAffine, static_cast<float>(op.alpha), static_cast<float>(op.beta)};
    case OpKind::kRelu:
      return {kernels::EwOpcode::kRelu, 0.0f, 0.0f};
    default:
      return {};
  }
}

class PlanBuilder {
 public:
  explicit PlanBuilder(const JobSpec& spec) : shape_(spec.shape) {
    plan_.output_dtype = spec.dtype;
    plan_.input_elements = ElementCount(spec.shape);
    plan_.max_elements = plan_.input_elements;
  }

  void AddElementwise(const OpSpec& op) {
    if (pending_.count == kernels::kMaxEwInstrs) FlushElementwise();
    pending_.Append(ToInstr(op));
    AppendLabel(op);
  }

  absl::Status AddRowOp(const OpSpec& op, StepKind kind) {
    if (shape_.empty()) return absl::InternalError("row op on a scalar passed validation");
    PlanStep step;
    step.kind = kind;
    step.program = pending_;
    step.cols = shape_.back();
    step.rows = ElementCount(std::vector<int64_t>(shape_.begin(), shape_.end() - 1));
    AppendLabel(op);
    step.ops = std::move(pending_label_);
    pending_ = {};
    pending_label_.clear();
    if (kind == StepKind::kRowSum) shape_.pop_back();
    plan_.steps.push_back(std::move(step));
    return absl::OkStatus();
  }

  Plan Finish() {
    if (pending_.count > 0) FlushElementwise();
    plan_.output_shape = shape_;
    plan_.output_elements = ElementCount(shape_);
    for (const PlanStep& s : plan_.steps) {
      plan_.max_elements = std::max({plan_.max_elements, s.input_elements(), s.output_elements()});
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
  kernels::EwProgram pending_;
  std::string pending_label_;
};

}  // namespace

const char* StepKindName(StepKind kind) {
  switch (kind) {
    case StepKind::kElementwise: return "elementwise";
    case StepKind::kRowSum: return "row-sum";
    case StepKind::kRowSoftmax: return "row-softmax";
  }
  return "unknown";
}

absl::StatusOr<Plan> PlanJob(const JobSpec& spec) {
  PlanBuilder builder(spec);
  for (const OpSpec& op : spec.ops) {
    switch (op.kind) {
      case OpKind::kAffine:
      case OpKind::kRelu:
        builder.AddElementwise(op);
        break;
      case OpKind::kSum:
        if (absl::Status s = builder.AddRowOp(op, StepKind::kRowSum); !s.ok()) return s;
        break;
      case OpKind::kSoftmax:
        if (absl::Status s = builder.AddRowOp(op, StepKind::kRowSoftmax); !s.ok()) return s;
        break;
    }
  }
  return builder.Finish();
}

}  // namespace gpupipe::engine
