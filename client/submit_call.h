// One Submit call on gRPC's callback API: the events feed a ResultAssembler as they arrive, and
// no thread waits for the job. JobClient::SubmitAsync is its public face; load generators and
// event loops use it to keep many jobs in flight with few threads.
#ifndef GPUPIPE_CLIENT_SUBMIT_CALL_H_
#define GPUPIPE_CLIENT_SUBMIT_CALL_H_

#include <functional>

#include "absl/status/statusor.h"
#include "client/result_assembler.h"
#include "gpupipe/v1/gpupipe.grpc.pb.h"

namespace gpupipe {
namespace client {

// Called exactly once per call, on a gRPC thread, with what JobClient::Submit would return.
// It must not block for long: it holds one of gRPC's callback threads.
using SubmitDone = std::function<void(absl::StatusOr<JobResult>)>;

// Starts `request` on `stub`, `prepare` setting up the call's context (deadline, metadata).
// The request is copied. `stub` must outlive the call (until `done` returned).
void StartSubmitCall(v1::JobService::Stub* stub,
                     const std::function<void(grpc::ClientContext*)>& prepare,
                     const v1::SubmitRequest& request, SubmitDone done);

}  // namespace client
}  // namespace gpupipe

#endif  // GPUPIPE_CLIENT_SUBMIT_CALL_H_
