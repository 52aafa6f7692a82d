#include "server/engine/scheduling/direct_run.h"

#include "server/engine/job/types.h"
#include "server/engine/planning/step_work.h"

namespace gpupipe::engine {

bool DirectRunEligible(const DirectRunPolicy& policy, const Plan& plan, const ChunkLayout& layout,
                       int64_t input_bytes, bool inline_input, bool output_to_region) {
  if (!policy.enabled() || !inline_input || output_to_region) return false;
  // One chunk and one result message: a few events, which the caller's sink holds without
  // waiting for its reader (kDirectRunEvents); the thread cannot let the reader run.
  if (layout.chunk_count != 1 || input_bytes < 0) return false;
  const int64_t output_bytes = plan.output_elements * DTypeSize(plan.output_dtype);
  if (plan.output_elements < 0 || output_bytes > policy.max_output_message_bytes) return false;
  if (input_bytes + output_bytes > policy.max_bytes) return false;
  return PlanWork(plan) <= policy.max_work;
}

}  // namespace gpupipe::engine
