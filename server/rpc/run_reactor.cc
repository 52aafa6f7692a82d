#include "server/rpc/run_reactor.h"

#include <limits>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/engine/validate.h"
#include "server/rpc/convert.h"
#include "server/rpc/status_mapping.h"

namespace gpupipe::rpc {
namespace {

// prod(shape) * sizeof(dtype), or -1 when that does not fit (validation then says why).
int64_t InputBytes(const engine::JobSpec& spec) {
  const int64_t elements = engine::ElementCount(spec.shape);
  const int64_t itemsize = engine::DTypeSize(spec.dtype);
  if (elements < 0 || elements > std::numeric_limits<int64_t>::max() / itemsize) return -1;
  return elements * itemsize;
}

}  // namespace

RunReactor::RunReactor(engine::Engine* engine, grpc::CallbackServerContext* context,
                       int max_queued_events)
    : engine_(engine),
      context_(context),
      stream_(std::make_shared<EventStream>(this, static_cast<size_t>(max_queued_events))) {
  StartRead(&request_);
}

void RunReactor::OnReadDone(bool ok) {
  if (!ok) {
    // The client half-closed, or the call broke.
    OnInputEnded();
    return;
  }
  bool more = false;
  switch (request_.kind_case()) {
    case v1::RunRequest::kSpec:
      more = OnSpec(request_.mutable_spec());
      break;
    case v1::RunRequest::kData:
      more = OnData(request_.data());
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
  request_.Clear();
  // Once the call is finishing (the job is done or failed, or the upload broke), nothing more
  // is read: the client's further writes fail and it stops.
  if (more && !stream_->finishing()) StartRead(&request_);
}

bool RunReactor::OnSpec(v1::SubmitRequest* spec_message) {
  if (have_spec_) {
    const std::shared_ptr<engine::InputSource> source = input();
    Break(absl::InvalidArgumentError(absl::StrCat(
        "spec: a second spec arrived after ", source ? source->available() : 0,
        " input bytes; a Run call carries one job (its spec first, then data messages)")));
    return false;
  }
  have_spec_ = true;
  if (!spec_message->input().data().empty()) {
    Reject(absl::InvalidArgumentError(absl::StrCat(
        "spec.input.data: must be empty in Run (got ", spec_message->input().data().size(),
        " bytes); send the input as data messages after the spec")));
    return false;
  }
  absl::StatusOr<engine::JobSpec> spec = DecodeJobSpec(*spec_message);
  if (!spec.ok()) {
    Reject(spec.status());
    return false;
  }
  // Validate before the input buffer is allocated, so an oversized shape costs nothing.
  const int64_t bytes = InputBytes(*spec);
  if (absl::Status s = engine::ValidateJob(*spec, bytes, engine_->Describe().limits,
                                           engine::InputPath::kStreamed);
      !s.ok()) {
    Reject(s);
    return false;
  }
  // Pinned where the backend has room, so the upload's copy is the only host copy.
  std::shared_ptr<engine::InputSource> source = engine_->NewInput(bytes);
  {
    std::lock_guard<std::mutex> lock(input_mu_);
    input_ = source;
  }
  if (absl::Status s = engine_->Submit(*std::move(spec), source, stream_); !s.ok()) {
    Reject(s);
    return false;
  }
  // A client that cancelled while the job was being submitted may have missed the input.
  if (context_->IsCancelled()) source->Fail(absl::CancelledError("the client cancelled the upload"));
  return true;
}

bool RunReactor::OnData(const std::string& data) {
  const std::shared_ptr<engine::InputSource> source = input();
  if (!have_spec_ || source == nullptr) {
    Reject(absl::InvalidArgumentError(
        "RunRequest: the first message must carry the spec (RunRequest.spec), not data"));
    return false;
  }
  if (absl::Status s = source->Append(data.data(), static_cast<int64_t>(data.size())); !s.ok()) {
    Break(s);
    return false;
  }
  return true;
}

void RunReactor::OnInputEnded() {
  const std::shared_ptr<engine::InputSource> source = input();
  if (context_->IsCancelled()) {
    if (source) source->Fail(absl::CancelledError("the client cancelled the upload"));
    return;  // OnCancel ends the call
  }
  if (!have_spec_) {
    Reject(absl::InvalidArgumentError(
        "RunRequest: the stream ended before the spec (the first message must carry it)"));
    return;
  }
  if (source == nullptr || source->complete()) return;  // rejected already, or all there
  Break(absl::InvalidArgumentError(absl::StrCat("input ended after ", source->available(),
                                                " of ", source->size(), " bytes")));
}

void RunReactor::Reject(const absl::Status& status) { stream_->FinishNow(ToGrpcStatus(status)); }

void RunReactor::Break(const absl::Status& status) {
  if (const std::shared_ptr<engine::InputSource> source = input()) source->Fail(status);
  stream_->Abort(ToGrpcStatus(status));
}

std::shared_ptr<engine::InputSource> RunReactor::input() const {
  std::lock_guard<std::mutex> lock(input_mu_);
  return input_;
}

void RunReactor::OnWriteDone(bool ok) { stream_->WriteDone(ok); }

void RunReactor::OnCancel() {
  if (const std::shared_ptr<engine::InputSource> source = input()) {
    source->Fail(absl::CancelledError("the client cancelled the upload"));
  }
  stream_->Cancel();
}

void RunReactor::OnDone() {
  stream_->Detach();
  delete this;
}

}  // namespace gpupipe::rpc
