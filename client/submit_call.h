// One Submit call on gRPC's callback API: the events feed a ResultAssembler as they arrive, and
// no thread waits for the job. JobClient::SubmitAsync is its public face; load generators and
// event loops use it to keep many jobs in flight with few threads.
//
// Also the rule by which a job is sent again, which JobClient::Submit shares: only a call the
// daemon refused before accepting the job. gRPC's own retry policy cannot tell: a small job's
// Accepted event is held back until its result (compact events), so a call that failed with
// no event may still have run its job.
#ifndef GPUPIPE_CLIENT_SUBMIT_CALL_H_
#define GPUPIPE_CLIENT_SUBMIT_CALL_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "client/result_assembler.h"
#include "gpupipe/v1/gpupipe.grpc.pb.h"

namespace gpupipe {
namespace client {

// The trailing metadata key of a Submit call the daemon refused before it accepted a job (the
// value "0"; gpupipe.proto, JobService.Submit).
inline constexpr char kAcceptedMetadataKey[] = "gpupipe-accepted";

// Whether a finished Submit call that delivered no event may be sent again: it failed
// UNAVAILABLE (the daemon drains, shuts down or lost its device) and the daemon marked it as
// having accepted no job (kAcceptedMetadataKey). `context` is the call's, after it finished.
bool RefusedBeforeAcceptance(const grpc::Status& status, const grpc::ClientContext& context);

// Whether the daemon marked a finished call as having accepted no job (kAcceptedMetadataKey),
// whatever its status. `context` is the call's, after it finished.
bool MarkedAsAcceptingNone(const grpc::ClientContext& context);

// The wait before call `attempt` (2, 3, ...) of a job: 50 ms, doubling, at most 1 s. Short: a
// balanced channel sends the next call to another daemon.
std::chrono::milliseconds SubmitRetryDelay(int attempt);

// Called exactly once per job, on a gRPC thread, with what JobClient::Submit would return.
// It must not block for long: it holds one of gRPC's callback threads.
using SubmitDone = std::function<void(absl::StatusOr<JobResult>)>;

// The largest inline input for which StartSubmitCall tries SubmitSmall first.
inline constexpr int64_t kSubmitSmallInputBytes = int64_t{64} << 10;

// Starts `request` on `stub`, `prepare` setting up each call's context (deadline, metadata),
// and makes up to `attempts` calls for it as JobClient::Submit does, each after the last ended
// (the wait on a gRPC timer, not a thread); every call keeps the first call's deadline. The
// calls read `request`, which the job holds until `done` returned; one that does not ask for
// compact events is copied to ask for them. `stub` must outlive the job (until `done`
// returned).
// With `submit_small_unsupported` (null: never), a job of at most kSubmitSmallInputBytes of
// inline input without explain or dry_run goes first as one SubmitSmall call; where the daemon
// refuses it before accepting it (too large for one message: INVALID_ARGUMENT; draining:
// UNAVAILABLE) or answers UNIMPLEMENTED, the job goes on as Submit calls. UNIMPLEMENTED is
// also gRPC's answer to a request it cannot decode, so `*submit_small_unsupported` is set (later
// jobs skip SubmitSmall) only once the daemon decoded the same request as a Submit.
// `small_stub` (null: `stub`) takes the SubmitSmall call, for a daemon's priority listener
// (gpupiped --priority-listen); Submit calls always go to `stub`, among them the job's next
// call wherever the listener refused it before accepting it (full, or not for its priority).
void StartSubmitCall(v1::JobService::Stub* stub,
                     const std::function<void(grpc::ClientContext*)>& prepare,
                     std::shared_ptr<const v1::SubmitRequest> request, SubmitDone done,
                     int attempts = 1,
                     std::atomic<bool>* submit_small_unsupported = nullptr,
                     v1::JobService::Stub* small_stub = nullptr);

}  // namespace client
}  // namespace gpupipe

#endif  // GPUPIPE_CLIENT_SUBMIT_CALL_H_
