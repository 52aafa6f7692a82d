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
#include "server/engine/types.h"

namespace gpupipe::engine {

enum class StepKind { kElementwise, kRowSum, kRowSoftmax };

struct PlanStep {
  StepKind kind = StepKind::kElementwise;
  // The elementwise program (kElementwise) or the prologue applied on load (row steps).
  kernels::EwProgram program;
  int64_t rows = 1;  // elementwise steps: 1 row of all elements
  int64_t cols = 1;
  std::string ops;  // the ops this step runs, e.g. "affine+relu+softmax"

  int64_t input_elements() const { return rows * cols; }
  int64_t output_elements() const { return kind == StepKind::kRowSum ? rows : rows * cols; }
};

struct Plan {
  std::vector<PlanStep> steps;
  DType output_dtype = DType::kFloat32;
  std::vector<int64_t> output_shape;
  int64_t input_elements = 0;
  int64_t output_elements = 0;
  // Largest tensor any step reads or writes, in elements: sizes the intermediate buffers.
  int64_t max_elements = 0;
};

const char* StepKindName(StepKind kind);  // "elementwise", "row-sum", "row-softmax"

// Plans a job that ValidateJob accepted. Errors only on internal inconsistencies.
absl::StatusOr<Plan> PlanJob(const JobSpec& spec);

}  // namespace gpupipe::engine
