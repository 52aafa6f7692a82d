#include "client/submit_call.h"

#include <utility>

#include "client/job_client.h"

namespace gpupipe {
namespace client {
namespace {

v1::SubmitRequest WithCompactEvents(v1::SubmitRequest request) {
  request.set_compact_events(true);
  return request;
}

// Owns itself from StartCall to OnDone, where it reports and deletes itself.
class SubmitCall final : public grpc::ClientReadReactor<v1::JobEvent> {
 public:
  SubmitCall(const v1::SubmitRequest& request, SubmitDone done)
      : request_(WithCompactEvents(request)),
        assembler_(request.dry_run(), nullptr, request.has_output_region()),
        done_(std::move(done)) {}

  void Start(v1::JobService::Stub* stub, const std::function<void(grpc::ClientContext*)>& prepare) {
    if (prepare) prepare(&context_);
    stub->async()->Submit(&context_, &request_, this);
    StartRead(&event_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream ended; OnDone follows
    if (stream_error_.ok()) {
      stream_error_ = assembler_.Add(event_);
      // A broken stream ends the call; its events after the breach are read and dropped.
      if (!stream_error_.ok() && !assembler_.done()) context_.TryCancel();
    }
    StartRead(&event_);
  }

  void OnDone(const grpc::Status& status) override {
    // As JobClient::Submit: a failed Done carries the job's own verdict.
    absl::StatusOr<JobResult> result = !stream_error_.ok()
                                           ? absl::StatusOr<JobResult>(stream_error_)
                                       : !status.ok() ? FromGrpcStatus(status)
                                                      : assembler_.Finish();
    SubmitDone done = std::move(done_);
    delete this;
    done(std::move(result));
  }

 private:
  grpc::ClientContext context_;
  v1::SubmitRequest request_;
  v1::JobEvent event_;
  ResultAssembler assembler_;
  absl::Status stream_error_;
  SubmitDone done_;
};

}  // namespace

void StartSubmitCall(v1::JobService::Stub* stub,
                     const std::function<void(grpc::ClientContext*)>& prepare,
                     const v1::SubmitRequest& request, SubmitDone done) {
  (new SubmitCall(request, std::move(done)))->Start(stub, prepare);
}

}  // namespace client
}  // namespace gpupipe
