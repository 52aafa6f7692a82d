// Validation of a job before it is accepted. Messages name the offending request field the way
// the API spells it (`input.shape`, `ops[2] (affine).alpha`, `options.stages`).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "server/engine/job/limits.h"
#include "server/engine/job/types.h"

namespace gpupipe::engine {

// OK, INVALID_ARGUMENT for malformed jobs, RESOURCE_EXHAUSTED for jobs over a size limit.
// `path` selects the input size limit (inline or streamed).
absl::Status ValidateJob(const JobSpec& spec, int64_t input_bytes, const Limits& limits,
                         InputPath path = InputPath::kInline);

// Number of elements of `shape` (1 for a scalar); -1 on overflow or a negative dimension.
int64_t ElementCount(const std::vector<int64_t>& shape);

}  // namespace gpupipe::engine
