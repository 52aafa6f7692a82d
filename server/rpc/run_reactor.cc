#include "server/rpc/run_reactor.h"

#include <limits>
#include <new>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/engine/job/validate.h"
#include "server/rpc/call_context.h"
#include "server/rpc/convert.h"
#include "server/rpc/status_mapping.h"

namespace gpupipe::rpc {
RunReactor::RunReactor(engine::Engine* engine, grpc::CallbackServerContext* context,
                       const absl::StatusOr<std::string>& caller, int max_queued_events,
                       StallWatch* watch, std::chrono::milliseconds spec_timeout,
                       ActiveCalls* calls)
    : engine_(engine),
      context_(context),
      caller_(caller.ok() ? *caller : std::string()),
      calls_(calls),
      stream_(std::make_shared<EventStream>(this, static_cast<size_t>(max_queued_events))) {
  if (calls_ != nullptr) calls_->Begin();
  if (!caller.ok()) {
    // Nothing is read; the service counts unauthenticated calls itself.
    stream_->FinishNow(ToGrpcStatus(caller.status()));
    return;
  }
  stream_->HoldSuccessUntilInputEnds();
  if (watch != nullptr) watch->Watch(stream_);
  if (spec_timeout.count() > 0) {
    spec_timeout_.Set(
        std::chrono::system_clock::now() + spec_timeout,
        [stream = stream_, seen = spec_seen_, engine = engine_, spec_timeout](bool fired) {
          if (!fired || seen->load()) return;
          const absl::Status late = absl::DeadlineExceededError(
              absl::StrCat("RunRequest: no spec within ", spec_timeout.count() / 1000.0,
                           " s of the call's start (gpupiped --upload-idle-timeout-seconds)"));
          engine->CountRefusal(late);
          stream->FinishNow(ToGrpcStatus(late));
        });
  }
  StartRead(&request_);
}

void RunReactor::OnReadDone(bool ok) {
  try {
    HandleRead(ok);
  } catch (const std::bad_alloc&) {
    // Nothing more is read: the upload breaks, and with it the job.
    Break(absl::ResourceExhaustedError("the server ran out of memory for this upload"));
  }
}

void RunReactor::HandleRead(bool ok) {
  if (!ok) {
    // The client half-closed, or the call broke.
    OnInputEnded();
    return;
  }
  v1::RunRequest message;
  message.Swap(&request_);
  bool more = false;
  switch (message.kind_case()) {
    case v1::RunRequest::kSpec:
      more = OnSpec(message.mutable_spec());
      break;
    case v1::RunRequest::kData:
      more = OnData(message.mutable_data());
      break;
    case v1::RunRequest::KIND_NOT_SET:
      if (have_spec_) {
        Break(absl::InvalidArgumentError(
            "RunRequest: a message with neither spec nor data (sent by a newer client?)"));
      } else {
        Reject(absl::InvalidArgumentError(
            "RunRequest: the first message must carry the spec (RunRequest.spec); it had "
            "neither spec nor data"));
      }
      break;
  }
  // Once the call is finishing (the job is done or failed, or the upload broke), nothing more
  // is read: the client's further writes fail and it stops.
  if (more && !stream_->finishing()) StartRead(&request_);
}

bool RunReactor::OnSpec(v1::SubmitRequest* spec_message) {
  if (have_spec_) {
    const std::shared_ptr<engine::InputRing> source = input();
    Break(absl::InvalidArgumentError(absl::StrCat(
        "spec: a second spec arrived after ", source ? source->received() : 0,
        " input bytes; a Run call carries one job (its spec first, then data messages)")));
    return false;
  }
  have_spec_ = true;
  spec_seen_->store(true);
  // The spec came just as the call timed out waiting for it: the call is over.
  if (stream_->finishing()) return false;
  if (!spec_message->input().data().empty()) {
    Reject(absl::InvalidArgumentError(absl::StrCat(
        "spec.input.data: must be empty in Run (got ", spec_message->input().data().size(),
        " bytes); send the input as data messages after the spec")));
    return false;
  }
  if (spec_message->has_input_region() || spec_message->has_output_region()) {
    Reject(absl::InvalidArgumentError(
        "spec.input_region, spec.output_region: regions go with Submit (Run streams the input "
        "and the result through the call)"));
    return false;
  }
  absl::StatusOr<engine::JobSpec> spec = DecodeJobSpec(*spec_message);
  if (!spec.ok()) {
    Reject(spec.status());
    return false;
  }
  ApplyCallContext(*context_, caller_, &*spec);
  absl::StatusOr<std::shared_ptr<engine::InputRing>> ring =
      engine_->SubmitStreamed(*std::move(spec), stream_);
  if (!ring.ok()) {
    stream_->FinishNow(ToGrpcStatus(ring.status()));  // the engine counted the refusal
    return false;
  }
  {
    std::lock_guard<std::mutex> lock(input_mu_);
    input_ = *ring;
  }
  // A client that cancelled while the job was being submitted may have missed the input.
  if (context_->IsCancelled()) {
    (*ring)->Fail(absl::CancelledError("the client cancelled the upload"));
  }
  return true;
}

bool RunReactor::OnData(std::string* data) {
  if (!have_spec_ || input() == nullptr) {
    Reject(absl::InvalidArgumentError(
        "RunRequest: the first message must carry the spec (RunRequest.spec), not data"));
    return false;
  }
  {
    std::lock_guard<std::mutex> lock(pending_mu_);
    pending_ = std::move(*data);
    pending_taken_ = 0;
  }
  return WriteRest();
}

bool RunReactor::WriteRest() {
  const std::shared_ptr<engine::InputRing> ring = input();
  absl::Status too_much;
  {
    std::lock_guard<std::mutex> lock(pending_mu_);
    absl::StatusOr<int64_t> taken =
        ring->Write(pending_.data() + pending_taken_,
                    static_cast<int64_t>(pending_.size() - pending_taken_), [this] {
                      // The job freed a buffer: finish this message, then read the next one.
                      if (WriteRest() && !stream_->finishing()) StartRead(&request_);
                    });
    if (taken.ok()) {
      pending_taken_ += static_cast<size_t>(*taken);
      return pending_taken_ == pending_.size();
    }
    // A ring that failed already belongs to a job that is ending (or an upload that broke):
    // the job's own Done finishes the call. Otherwise the client sent too much.
    if (!ring->failure().ok()) return false;
    too_much = taken.status();
  }
  Break(too_much);
  return false;
}

void RunReactor::OnInputEnded() {
  const std::shared_ptr<engine::InputRing> source = input();
  if (context_->IsCancelled()) {
    if (source) source->Fail(absl::CancelledError("the client cancelled the upload"));
    return;  // OnCancel ends the call
  }
  if (!have_spec_) {
    Reject(absl::InvalidArgumentError(
        "RunRequest: the stream ended before the spec (the first message must carry it)"));
    return;
  }
  if (source == nullptr) return;  // rejected already
  if (source->complete()) {
    stream_->InputEnded();  // a successful job's Done may go now
    return;
  }
  // The stream ended early, or the client cancelled and this read was reported first: judge
  // it once a cancel would have arrived.
  const absl::Status early = absl::InvalidArgumentError(
      absl::StrCat("input ended after ", source->received(), " of ", source->size(), " bytes"));
  early_end_.Set(std::chrono::system_clock::now() + kCancelSettle,
                 [stream = stream_, source, early](bool /*fired*/) {
                   const absl::Status gone = stream->ReaderStatus();
                   if (!gone.ok()) {
                     source->Fail(gone);  // cancelled: OnCancel failed it already
                     return;
                   }
                   source->Fail(early);
                   stream->Abort(ToGrpcStatus(early));
                 });
}

void RunReactor::Reject(const absl::Status& status) {
  engine_->CountRefusal(status);
  stream_->FinishNow(ToGrpcStatus(status));
}

void RunReactor::Break(const absl::Status& status) {
  if (const std::shared_ptr<engine::InputRing> source = input()) source->Fail(status);
  stream_->Abort(ToGrpcStatus(status));
}

std::shared_ptr<engine::InputRing> RunReactor::input() const {
  std::lock_guard<std::mutex> lock(input_mu_);
  return input_;
}

void RunReactor::OnWriteDone(bool ok) { stream_->WriteDone(ok); }

void RunReactor::OnCancel() {
  if (const std::shared_ptr<engine::InputRing> source = input()) {
    source->Fail(absl::CancelledError("the client cancelled the upload"));
  }
  stream_->Cancel();
}

void RunReactor::OnDone() {
  // The ring may outlive this reactor (the job holds it): its callback must not call back.
  if (const std::shared_ptr<engine::InputRing> source = input()) source->ForgetRoomCallback();
  stream_->Detach();
  ActiveCalls* calls = calls_;
  delete this;
  if (calls != nullptr) calls->End();
}

}  // namespace gpupipe::rpc
