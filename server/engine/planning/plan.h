// A plan: the kernels a validated job becomes, independent of the backend that runs it.
//
// Each maximal run of elementwise ops becomes one elementwise program. A run followed by a row
// op is fused into that op as its prologue (applied to each element on load), so
// `affine | relu | softmax` is one softmax step and one pass over the input per kernel. A run at
// the end of the pipeline becomes an elementwise step of its own. Row ops see their input as
// `rows` x `cols` (last axis); a reduction removes the last axis.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/common/elementwise_program.h"
#include "kernels/common/row_ops.h"
#include "server/engine/planning/kernel_types.h"  // ToElementType: the kernels' name for a dtype
#include "server/engine/job/types.h"

namespace gpupipe::engine {

// kRowCumsum .. kRowTopk take no prologue: a run of elementwise ops before them is a step of
// its own. They run on every dtype their op accepts (in_dtype / out_dtype).
enum class StepKind {
  kElementwise, kRowReduce, kRowArgmax, kRowSoftmax, kRowNormalize,
  kRowCumsum, kRowHistogram, kRowConvolve, kRowTopk,
};

struct PlanStep {
  StepKind kind = StepKind::kElementwise;
  // The elementwise program (kElementwise) or the prologue applied on load (row steps).
  kernels::EwProgram program;
  kernels::RowReduceKind reduce = kernels::RowReduceKind::kSum;                 // kRowReduce
  kernels::RowNormalizeKind normalize = kernels::RowNormalizeKind::kL2Normalize;  // kRowNormalize
  int64_t rows = 1;  // elementwise steps: 1 row of all elements
  int64_t cols = 1;
  std::string ops;  // the ops this step runs, e.g. "affine+relu+softmax"
  // Element types the step reads and writes (ToElementType gives the kernels' name). The
  // output differs for argmax and histogram (int64) and for sums and cumsums of int32 (int64).
  DType in_dtype = DType::kFloat32;
  DType out_dtype = DType::kFloat32;
  // kRowCumsum .. kRowTopk: the op with its parameters, and the row length it leaves.
  OpSpec op;
  int64_t out_cols = 0;

  int64_t input_elements() const { return rows * cols; }
  bool reduces() const { return kind == StepKind::kRowReduce || kind == StepKind::kRowArgmax; }
  bool resizes() const {
    return kind == StepKind::kRowCumsum || kind == StepKind::kRowHistogram ||
           kind == StepKind::kRowConvolve || kind == StepKind::kRowTopk;
  }
  int64_t output_elements() const {
    return reduces() ? rows : resizes() ? rows * out_cols : rows * cols;
  }
  int64_t input_itemsize() const { return DTypeSize(in_dtype); }
  int64_t output_itemsize() const { return DTypeSize(out_dtype); }
};

struct Plan {
  std::vector<PlanStep> steps;
  DType output_dtype = DType::kFloat32;
  std::vector<int64_t> output_shape;
  int64_t input_elements = 0;
  int64_t output_elements = 0;
  // Largest tensor any step reads or writes, in bytes: sizes the intermediate buffers.
  int64_t max_bytes = 0;
};

// "elementwise", "row-reduce", "row-argmax", "row-softmax", "row-normalize", "row-cumsum",
// "row-histogram", "row-convolve", "row-topk"
const char* StepKindName(StepKind kind);

// A plan as a backend will run it: every kernel launch and the dependencies between them.
struct KernelDescription {
  std::string name;  // e.g. "softmax.stats"
  int step = 0;
  std::string ops;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t blocks = 0;  // 0 where nothing is launched on a device (cpu)
  int threads = 0;
};

struct EdgeDescription {
  int from = 0;
  int to = 0;
  std::string kind;    // "pdl" or "stream"
  std::string reason;  // why `to` waits for `from`
};

struct PlanDescription {
  std::vector<KernelDescription> kernels;
  std::vector<EdgeDescription> edges;
  std::string launch;
  std::string staging;
};

// Why a step must wait for the one before it, for the explain output.
const char* StepDependencyReason(StepKind kind);

// Plans a job that ValidateJob accepted. Errors only on internal inconsistencies.
absl::StatusOr<Plan> PlanJob(const JobSpec& spec);

}  // namespace gpupipe::engine
