#include "server/engine/planning/one_message.h"

#include "absl/strings/str_cat.h"

namespace gpupipe::engine {

absl::Status CheckOneMessageSpec(const JobSpec& spec) {
  if (spec.explain || spec.dry_run) {
    return absl::InvalidArgumentError(
        "SubmitSmall returns no plan: send a job with explain or dry_run with Submit");
  }
  return absl::OkStatus();
}

absl::Status CheckOneMessageLayout(const Plan& plan, const ChunkLayout& layout,
                                   int64_t max_result_bytes) {
  const int64_t result_bytes = plan.output_elements * DTypeSize(plan.output_dtype);
  if (plan.output_elements < 0 || result_bytes > max_result_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("the result (", result_bytes, " bytes) is larger than SubmitSmall carries (",
                     max_result_bytes, " bytes, Limits.max_chunk_bytes): send it with Submit"));
  }
  if (layout.chunk_count != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the job runs as ", layout.chunk_count,
                     " chunks and SubmitSmall takes jobs of one: send it with Submit"));
  }
  return absl::OkStatus();
}

}  // namespace gpupipe::engine
