// The client side of a Run, over one call or split over several (RunRequest.stripes): each call
// has an upload thread that sends its share of the input, message m of the upload on call
// m % calls, with the reads of the input taken in turn so that `read` still sees one sequential
// stream; the calling thread reads the events back round-robin (result chunk n on call
// n % calls), which restores the one ordered stream that ResultAssembler checks. Every call
// must end with the same Done; the first error of any call cancels all of them.
#ifndef GPUPIPE_CLIENT_STRIPED_RUN_H_
#define GPUPIPE_CLIENT_STRIPED_RUN_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "client/job_client.h"
#include "client/result_assembler.h"
#include "gpupipe/v1/gpupipe.grpc.pb.h"

namespace gpupipe {
namespace client {

// Runs `spec` over one call per stub (each best on a connection of its own), `prepare` setting
// up each call's context (deadline, metadata). With one stub, a plain Run. Results, errors and
// callbacks as JobClient::Run.
absl::StatusOr<JobResult> RunOverCalls(const std::vector<v1::JobService::Stub*>& stubs,
                                       const std::function<void(grpc::ClientContext*)>& prepare,
                                       const v1::SubmitRequest& spec, int64_t input_bytes,
                                       const InputReader& read, const EventCallback& on_event,
                                       const UploadProgress& on_progress, ResultSink* sink);

// The number of calls to split an upload of `input_bytes` over when the caller leaves it to the
// library: one for small inputs, more as the input grows, at most `max_calls`.
int CallsForUpload(int64_t input_bytes, int max_calls);

}  // namespace client
}  // namespace gpupipe

#endif  // GPUPIPE_CLIENT_STRIPED_RUN_H_
