// Jobs whose whole outcome travels in one message (JobSpec::one_message, the RPC layer's
// SubmitSmall): accepted, result, timing and final status as one CompleteJob.
//
// Why a separate check: the one message is only possible where the job's events are few and
// known before it runs (one Accepted, at most one result chunk, a Timing and a Done), which
// the plan and the chunk layout decide, so the job is refused before it is accepted, and the
// caller may send it again as a streamed Submit.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "server/engine/job/types.h"
#include "server/engine/planning/chunk_plan.h"
#include "server/engine/planning/plan.h"

namespace gpupipe::engine {

// OK where `spec` reports no plan (neither explain nor dry_run); otherwise INVALID_ARGUMENT.
// Checked before planning's outcome is known (a dry run ends before its layout is chosen).
absl::Status CheckOneMessageSpec(const JobSpec& spec);

// OK where the job runs as one chunk of `layout` and its result, of `plan`, is at most
// `max_result_bytes` (the largest result chunk a message carries); otherwise INVALID_ARGUMENT
// naming the figure and Submit as the way to send it.
absl::Status CheckOneMessageLayout(const Plan& plan, const ChunkLayout& layout,
                                   int64_t max_result_bytes);

}  // namespace gpupipe::engine
