#include "client/submit_call.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "client/job_client.h"
#include "grpcpp/alarm.h"

namespace gpupipe {
namespace client {
namespace {

// What the calls of one job share.
struct Job {
  v1::JobService::Stub* stub;
  v1::JobService::Stub* small_stub;  // SubmitSmall's
  std::function<void(grpc::ClientContext*)> prepare;
  std::shared_ptr<const v1::SubmitRequest> request;  // with compact events; read by every call
  int attempts = 1;
  std::chrono::system_clock::time_point deadline;  // the first call's
  bool deadline_set = false;
  SubmitDone done;
  std::atomic<bool>* submit_small_unsupported = nullptr;
  // SubmitSmall answered UNIMPLEMENTED, which gRPC also answers for a request it cannot
  // decode: the daemon lacks SubmitSmall only if it decodes the same request as a Submit.
  bool small_unimplemented = false;
};

// Whether a Submit call that ended with `status` (`accepted`: after an Accepted event) reached
// the daemon's own handling of its request, which gRPC runs only on a request it decoded.
bool DaemonDecoded(const grpc::Status& status, bool accepted) {
  switch (status.error_code()) {
    case grpc::StatusCode::OK:
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED:
      return true;
    default:
      return accepted;
  }
}

// One call of a job. Owns itself from Start to OnDone, where it reports, or hands the job to
// the next call, and deletes itself.
class SubmitCall final : public grpc::ClientReadReactor<v1::JobEvent> {
 public:
  SubmitCall(std::shared_ptr<Job> job, int attempt)
      : job_(std::move(job)),
        attempt_(attempt),
        assembler_(job_->request->dry_run(), nullptr, job_->request->has_output_region()) {}

  void Start() {
    if (job_->prepare) job_->prepare(&context_);
    if (!job_->deadline_set) {
      job_->deadline = context_.deadline();
      job_->deadline_set = true;
    } else {
      context_.set_deadline(job_->deadline);
    }
    job_->stub->async()->Submit(&context_, job_->request.get(), this);
    StartRead(&event_);
    StartCall();
  }

  // Starts after `delay`, on a gRPC thread. The alarm has fired before the call can end and
  // delete it; gRPC holds its own reference to the alarm until the callback, which touches
  // nothing of this call after Start, has returned.
  void StartAfter(std::chrono::milliseconds delay) {
    alarm_ = std::make_unique<grpc::Alarm>();
    alarm_->Set(std::chrono::system_clock::now() + delay, [this](bool) { Start(); });
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
    if (stream_error_.ok() && !assembler_.accepted() && attempt_ < job_->attempts &&
        RefusedBeforeAcceptance(status, context_)) {
      const std::chrono::milliseconds delay = SubmitRetryDelay(attempt_ + 1);
      if (std::chrono::system_clock::now() + delay < job_->deadline) {
        (new SubmitCall(job_, attempt_ + 1))->StartAfter(delay);
        delete this;
        return;
      }
    }
    if (job_->small_unimplemented && DaemonDecoded(status, assembler_.accepted())) {
      job_->submit_small_unsupported->store(true, std::memory_order_relaxed);
    }
    // As JobClient::Submit: a failed Done carries the job's own verdict.
    absl::StatusOr<JobResult> result = !stream_error_.ok()
                                           ? absl::StatusOr<JobResult>(stream_error_)
                                       : !status.ok() ? FromGrpcStatus(status)
                                                      : assembler_.Finish();
    if (result.ok()) result->peer = context_.peer();
    std::shared_ptr<Job> job = std::move(job_);
    delete this;
    job->done(std::move(result));
  }

 private:
  std::shared_ptr<Job> job_;
  const int attempt_;
  grpc::ClientContext context_;
  // Only a retry waits, and most calls are not one: their alarm is made when needed.
  std::unique_ptr<grpc::Alarm> alarm_;
  v1::JobEvent event_;
  ResultAssembler assembler_;
  absl::Status stream_error_;
};

// The job as one SubmitSmall call: its one response is the whole job. Owns itself from Start
// until its callback, where it reports or hands the job to Submit calls, and deletes itself.
class SubmitSmallCall final {
 public:
  explicit SubmitSmallCall(std::shared_ptr<Job> job) : job_(std::move(job)) {}

  void Start() {
    if (job_->prepare) job_->prepare(&context_);
    job_->deadline = context_.deadline();
    job_->deadline_set = true;
    job_->small_stub->async()->SubmitSmall(&context_, job_->request.get(), &response_,
                                           [this](grpc::Status status) { Done(status); });
  }

 private:
  void Done(const grpc::Status& status) {
    if (!status.ok() && GoesOnAsSubmit(status)) {
      std::shared_ptr<Job> job = std::move(job_);
      delete this;
      (new SubmitCall(std::move(job), 1))->Start();
      return;
    }
    absl::StatusOr<JobResult> result = absl::UnknownError("no result");
    if (!status.ok()) {
      result = FromGrpcStatus(status);
    } else {
      // The client library reads the one response as the events it stands for, moving its
      // parts (the result's bytes among them) into the result rather than copying them.
      ResultAssembler assembler(job_->request->dry_run(), nullptr,
                                job_->request->has_output_region());
      absl::Status added = assembler.AddComplete(&response_);
      result = added.ok() ? assembler.Finish() : absl::StatusOr<JobResult>(added);
      if (result.ok()) result->peer = context_.peer();
    }
    std::shared_ptr<Job> job = std::move(job_);
    delete this;
    job->done(std::move(result));
  }

  // Whether the job may go on as Submit calls: the daemon ran nothing (it refused the call
  // before accepting a job, or does not know SubmitSmall, or could not decode the request:
  // the Submit call tells which, see Job::small_unimplemented).
  bool GoesOnAsSubmit(const grpc::Status& status) {
    // A priority listener that refused the job before accepting it (full, or not for this
    // priority): the main address takes it.
    if (job_->small_stub != job_->stub && MarkedAsAcceptingNone(context_)) return true;
    if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
      job_->small_unimplemented = true;
      return true;
    }
    return (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT ||
            status.error_code() == grpc::StatusCode::UNAVAILABLE) &&
           MarkedAsAcceptingNone(context_);
  }

  std::shared_ptr<Job> job_;
  grpc::ClientContext context_;
  v1::CompleteJob response_;
};

}  // namespace

bool MarkedAsAcceptingNone(const grpc::ClientContext& context) {
  const auto& trailers = context.GetServerTrailingMetadata();
  const auto mark = trailers.find(kAcceptedMetadataKey);
  return mark != trailers.end() && mark->second == "0";
}

bool RefusedBeforeAcceptance(const grpc::Status& status, const grpc::ClientContext& context) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE && MarkedAsAcceptingNone(context);
}

std::chrono::milliseconds SubmitRetryDelay(int attempt) {
  return std::chrono::milliseconds(std::min(50 << std::clamp(attempt - 2, 0, 5), 1000));
}

void StartSubmitCall(v1::JobService::Stub* stub,
                     const std::function<void(grpc::ClientContext*)>& prepare,
                     std::shared_ptr<const v1::SubmitRequest> request, SubmitDone done,
                     int attempts, std::atomic<bool>* submit_small_unsupported,
                     v1::JobService::Stub* small_stub) {
  auto job = std::make_shared<Job>();
  job->stub = stub;
  job->small_stub = small_stub != nullptr ? small_stub : stub;
  job->prepare = prepare;
  if (!request->compact_events()) {
    auto compact = std::make_shared<v1::SubmitRequest>(*request);
    compact->set_compact_events(true);
    request = std::move(compact);
  }
  job->request = std::move(request);
  job->attempts = std::max(attempts, 1);
  job->done = std::move(done);
  job->submit_small_unsupported = submit_small_unsupported;
  const bool small = submit_small_unsupported != nullptr &&
                     !submit_small_unsupported->load(std::memory_order_relaxed) &&
                     !job->request->explain() && !job->request->dry_run() &&
                     static_cast<int64_t>(job->request->input().data().size()) <=
                         kSubmitSmallInputBytes;
  if (small) {
    (new SubmitSmallCall(std::move(job)))->Start();
  } else {
    (new SubmitCall(std::move(job), 1))->Start();
  }
}

}  // namespace client
}  // namespace gpupipe
