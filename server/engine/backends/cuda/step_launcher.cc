#include "server/engine/backends/cuda/step_launcher.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/convolve.h"
#include "kernels/cuda/cumsum.h"
#include "kernels/cuda/histogram.h"
#include "kernels/cuda/topk.h"
#include "server/engine/planning/kernel_types.h"

namespace gpupipe::engine {
namespace {

namespace kc = kernels::cuda;

std::vector<kc::KernelLaunchInfo> StepKernels(const PlanStep& step, const kc::LaunchConfig& config) {
  const kernels::ElementType type = ToElementType(step.in_dtype);
  switch (step.kind) {
    case StepKind::kElementwise:
      return kc::DescribeElementwise(step.input_elements(), type, config);
    case StepKind::kRowReduce:
      return kc::DescribeRowReduce(step.rows, step.cols, type, step.reduce, config);
    case StepKind::kRowArgmax:
      return kc::DescribeRowArgmax(step.rows, step.cols, type, config);
    case StepKind::kRowSoftmax:
      return kc::DescribeRowSoftmax(step.rows, step.cols, type, config);
    case StepKind::kRowNormalize:
      return kc::DescribeRowNormalize(step.rows, step.cols, type, step.normalize, config);
    case StepKind::kRowCumsum:
      return kc::DescribeRowCumsum(type, step.rows, step.cols, config);
    case StepKind::kRowHistogram:
      return kc::DescribeRowHistogram(type, step.rows, step.cols,
                                      static_cast<int32_t>(step.op.bins), /*accumulate=*/false,
                                      config);
    case StepKind::kRowConvolve:
      return kc::DescribeRowConvolve(step.rows, step.cols,
                                     static_cast<int32_t>(step.op.taps.size()),
                                     ToKernelConvolveMode(step.op.mode), type, config);
    case StepKind::kRowTopk:
      return kc::DescribeRowTopk(step.rows, step.cols, static_cast<int32_t>(step.op.k), type,
                                 config);
  }
  return {};
}

// Why a kernel waits for the one before it inside one step, by what the kernel does.
const char* InStepReason(const std::string& name) {
  auto ends_with = [&](const char* suffix) {
    const std::string s(suffix);
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  if (ends_with(".normalize")) return "needs each row's statistics";
  if (ends_with(".combine")) return "combines the partial results";
  if (ends_with(".lookback")) return "needs the tile status records reset";
  if (ends_with(".rows") || ends_with(".split") || ends_with(".global")) {
    return "adds into the counts the kernel before zeroed";
  }
  return "reuses the workspace the kernel before reads";
}

// cumsum, histogram, convolve, topk: untyped buffers, the step's dtypes.
cudaError_t LaunchRowResizeStep(const PlanStep& step, const void* d_in, void* d_out,
                                const StepBuffers& buffers, const kc::LaunchConfig& config,
                                int* launched) {
  const kernels::ElementType type = ToElementType(step.in_dtype);
  const OpSpec& op = step.op;
  switch (step.kind) {
    case StepKind::kRowCumsum:
      return kc::RowCumsum(d_in, type, d_out, step.rows, step.cols, /*d_carry=*/nullptr,
                           buffers.d_workspace, buffers.workspace_bytes, config, launched);
    case StepKind::kRowHistogram:
      return kc::RowHistogram(d_in, type, static_cast<int64_t*>(d_out), step.rows, step.cols,
                              static_cast<int32_t>(op.bins), op.lo, op.hi, /*accumulate=*/false,
                              buffers.d_workspace, buffers.workspace_bytes, config, launched);
    case StepKind::kRowConvolve:
      return kc::RowConvolve(d_in, type, d_out, step.rows, step.cols, op.taps.data(),
                             static_cast<int32_t>(op.taps.size()), ToKernelConvolveMode(op.mode),
                             buffers.d_workspace, buffers.workspace_bytes, config, launched);
    case StepKind::kRowTopk:
      return kc::RowTopk(d_in, type, d_out, step.rows, step.cols, static_cast<int32_t>(op.k),
                         buffers.d_workspace, buffers.workspace_bytes, config, launched);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t LaunchStep(const Plan& plan, size_t index, const StepBuffers& buffers,
                       const kc::LaunchConfig& config, int* kernels) {
  const PlanStep& step = plan.steps[index];
  const void* d_in = index == 0 && buffers.input != nullptr ? buffers.input
                                                            : buffers.d_buffers[index % 2];
  void* d_out = index + 1 == plan.steps.size() && buffers.output != nullptr
                    ? buffers.output
                    : buffers.d_buffers[1 - index % 2];
  const kernels::ElementType type = ToElementType(step.in_dtype);
  int launched = 0;
  cudaError_t err = cudaErrorInvalidValue;
  switch (step.kind) {
    case StepKind::kElementwise:
      err = kc::Elementwise(d_in, type, d_out, step.input_elements(), step.program, config,
                            &launched);
      break;
    case StepKind::kRowReduce:
      err = kc::RowReduce(d_in, type, d_out, step.rows, step.cols, step.reduce, step.program,
                          buffers.d_workspace, buffers.workspace_bytes, config, &launched);
      break;
    case StepKind::kRowArgmax:
      err = kc::RowArgmax(d_in, type, static_cast<int64_t*>(d_out), step.rows, step.cols,
                          step.program, buffers.d_workspace, buffers.workspace_bytes, config,
                          &launched);
      break;
    case StepKind::kRowSoftmax:
      err = kc::RowSoftmax(d_in, type, d_out, step.rows, step.cols, step.program,
                           buffers.d_workspace, buffers.workspace_bytes, config, &launched);
      break;
    case StepKind::kRowNormalize:
      err = kc::RowNormalize(d_in, type, d_out, step.rows, step.cols, step.normalize,
                             step.program, buffers.d_workspace, buffers.workspace_bytes, config,
                             &launched);
      break;
    case StepKind::kRowCumsum:
    case StepKind::kRowHistogram:
    case StepKind::kRowConvolve:
    case StepKind::kRowTopk:
      err = LaunchRowResizeStep(step, d_in, d_out, buffers, config, &launched);
      break;
  }
  *kernels += launched;
  return err;
}

cudaError_t LaunchRowResizePiece(const Chunk& chunk, const void* d_in, void* d_out,
                                 void* d_state, const StepBuffers& buffers,
                                 const kc::LaunchConfig& config, int* kernels) {
  const PlanStep& step = chunk.plan.steps.back();
  const kernels::ElementType type = ToElementType(step.in_dtype);
  const OpSpec& op = step.op;
  int launched = 0;
  cudaError_t err = cudaErrorInvalidValue;
  switch (step.kind) {
    case StepKind::kRowCumsum:
      err = kc::RowCumsum(d_in, type, d_out, 1, step.cols, d_state, buffers.d_workspace,
                          buffers.workspace_bytes, config, &launched);
      break;
    case StepKind::kRowHistogram:
      err = kc::RowHistogram(d_in, type, static_cast<int64_t*>(d_state), 1, step.cols,
                             static_cast<int32_t>(op.bins), op.lo, op.hi, /*accumulate=*/true,
                             buffers.d_workspace, buffers.workspace_bytes, config, &launched);
      break;
    case StepKind::kRowConvolve:
      err = kc::RowConvolveWindow(d_in, type, d_out, chunk.window, op.taps.data(),
                                  static_cast<int32_t>(op.taps.size()), buffers.d_workspace,
                                  buffers.workspace_bytes, config, &launched);
      break;
    case StepKind::kRowTopk:
      err = kc::RowTopk(d_in, type, d_out, 1, step.cols, static_cast<int32_t>(op.k),
                        buffers.d_workspace, buffers.workspace_bytes, config, &launched);
      break;
    default:
      break;
  }
  *kernels += launched;
  return err;
}

bool RunsOnMappedHostMemory(const Plan& plan) {
  if (plan.steps.empty()) return false;
  for (const PlanStep& step : plan.steps) {
    switch (step.kind) {
      case StepKind::kElementwise:
      case StepKind::kRowReduce:
      case StepKind::kRowArgmax:
      case StepKind::kRowSoftmax:
      case StepKind::kRowNormalize: break;
      case StepKind::kRowCumsum:
      case StepKind::kRowHistogram:
      case StepKind::kRowConvolve:
      case StepKind::kRowTopk: return false;
    }
  }
  return true;
}

size_t PlanWorkspaceBytes(const Plan& plan) {
  size_t bytes = kc::RowOpsWorkspaceBytes();
  for (const PlanStep& step : plan.steps) {
    const kernels::ElementType type = ToElementType(step.in_dtype);
    switch (step.kind) {
      case StepKind::kRowCumsum:
        bytes = std::max(bytes, kc::RowCumsumWorkspaceBytes(step.rows, step.cols));
        break;
      case StepKind::kRowHistogram:
        bytes = std::max(bytes, kc::RowHistogramWorkspaceBytes(step.rows, step.cols,
                                                               static_cast<int32_t>(step.op.bins)));
        break;
      case StepKind::kRowConvolve:
        bytes = std::max(bytes, kc::ConvolveWorkspaceBytes(
                                    step.rows, step.cols,
                                    static_cast<int32_t>(step.op.taps.size()), type));
        break;
      case StepKind::kRowTopk:
        bytes = std::max(bytes, kc::RowTopkWorkspaceBytes(step.rows, step.cols,
                                                          static_cast<int32_t>(step.op.k), type));
        break;
      default:
        break;
    }
  }
  return bytes;
}

cudaError_t LaunchPlan(const Plan& plan, const StepBuffers& buffers,
                       const kc::LaunchConfig& config, int* kernels) {
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    if (cudaError_t err = LaunchStep(plan, i, buffers, config, kernels); err != cudaSuccess) {
      return err;
    }
  }
  return cudaSuccess;
}

PlanDescription DescribePlan(const Plan& plan, const kc::LaunchConfig& config) {
  PlanDescription d;
  const char* edge_kind = config.pdl ? "pdl" : "stream";
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    const PlanStep& step = plan.steps[s];
    const int first = static_cast<int>(d.kernels.size());
    for (const kc::KernelLaunchInfo& k : StepKernels(step, config)) {
      const int index = static_cast<int>(d.kernels.size());
      if (index > 0) {
        // Kernels inside one step depend on their predecessor's per-row or partial results;
        // the first kernel of a step depends on the previous step's output.
        const char* reason = index == first ? StepDependencyReason(step.kind)
                                            : InStepReason(k.name);
        d.edges.push_back({index - 1, index, edge_kind, reason});
      }
      d.kernels.push_back({k.name, static_cast<int>(s), step.ops, step.rows, step.cols, k.blocks,
                           k.threads});
    }
  }
  return d;
}

std::string PlanTopologyKey(const Plan& plan, const kc::LaunchConfig& config) {
  std::string key = absl::StrCat(static_cast<int>(config.staging), "/", config.stages, "/",
                                 config.pdl ? "pdl" : "stream");
  for (const PlanStep& step : plan.steps) {
    // The element type picks the kernels, so it is part of the graph's topology.
    absl::StrAppend(&key, ";", static_cast<int>(step.kind), ":",
                    static_cast<int>(step.in_dtype), ":", step.rows, "x", step.cols);
    // The reduction and normalization kinds are kernel arguments, not kernel names: without
    // them a graph captured for `sum` was replayed for `min` of the same shape (and one for
    // `l2normalize` for `standardize`), since the parameters key holds only the prologue.
    if (step.kind == StepKind::kRowReduce) {
      absl::StrAppend(&key, ":reduce", static_cast<int>(step.reduce));
    } else if (step.kind == StepKind::kRowNormalize) {
      absl::StrAppend(&key, ":normalize", static_cast<int>(step.normalize));
    }
    if (step.resizes()) {
      absl::StrAppend(&key, ":", step.op.bins, ":", step.op.k, ":", step.op.taps.size(), ":",
                      static_cast<int>(step.op.mode));
    }
  }
  return key;
}

std::string PlanParamsKey(const Plan& plan) {
  std::string key;
  for (const PlanStep& step : plan.steps) {
    key.append(reinterpret_cast<const char*>(&step.program.count), sizeof(step.program.count));
    // Field by field: EwInstr has padding after its opcode, whose bytes are indeterminate, so
    // hashing the raw struct turned identical programs into "update"s instead of hits.
    for (int i = 0; i < step.program.count; ++i) {
      const kernels::EwInstr& instr = step.program.instrs[i];
      key.append(reinterpret_cast<const char*>(&instr.op), sizeof(instr.op));
      key.append(reinterpret_cast<const char*>(&instr.a), sizeof(instr.a));
      key.append(reinterpret_cast<const char*>(&instr.b), sizeof(instr.b));
    }
    if (step.resizes()) {
      // Kernel parameters of the new row ops: the histogram range and the convolution taps.
      key.append(reinterpret_cast<const char*>(&step.op.lo), sizeof(step.op.lo));
      key.append(reinterpret_cast<const char*>(&step.op.hi), sizeof(step.op.hi));
      key.append(reinterpret_cast<const char*>(step.op.taps.data()),
                 sizeof(double) * step.op.taps.size());
    }
  }
  return key;
}

}  // namespace gpupipe::engine
