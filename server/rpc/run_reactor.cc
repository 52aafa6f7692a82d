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
                       StallWatch* watch, std::chrono::milliseconds spec_timeout, RunGroups* runs,
                       int max_run_streams, UnreadResults* unread, ActiveCalls* calls)
    : engine_(engine),
      context_(context),
      unread_(unread),
      caller_(caller.ok() ? *caller : std::string()),
      runs_(runs),
      max_run_streams_(max_run_streams),
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
      more = OnSpec(&message);
      break;
    case v1::RunRequest::kJoin:
      more = OnJoin(message.join());
      break;
    case v1::RunRequest::kData:
      more = OnData(message.mutable_data());
      break;
    case v1::RunRequest::KIND_NOT_SET:
      if (have_first_) {
        Break(absl::InvalidArgumentError(
            "RunRequest: a message with neither spec nor data (sent by a newer client?)"));
      } else {
        Reject(absl::InvalidArgumentError(
            "RunRequest: the first message must carry the spec (RunRequest.spec) or join a run "
            "(RunRequest.join); it had neither"));
      }
      break;
  }
  // Once the call is finishing (the job is done or failed, or the upload broke), nothing more
  // is read: the client's further writes fail and it stops.
  if (more) ReadNext();
}

void RunReactor::ReadNext() {
  std::lock_guard<std::mutex> lock(finish_mu_);
  if (!finished_ && !stream_->finishing()) StartRead(&request_);
}

void RunReactor::FinishCall(const grpc::Status& status) {
  {
    // No read starts from now on (ReadNext); one started before this is answered by gRPC.
    std::lock_guard<std::mutex> lock(finish_mu_);
    finished_ = true;
  }
  Finish(status);
}

void RunReactor::WriteLastAndFinish(v1::JobEvent* event, const grpc::Status& status) {
  {
    std::lock_guard<std::mutex> lock(finish_mu_);
    finished_ = true;
  }
  StartWriteAndFinish(event, grpc::WriteOptions(), status);
}

bool RunReactor::OnSpec(v1::RunRequest* message) {
  if (have_first_) {
    const std::shared_ptr<engine::StripedInput> source = upload();
    Break(absl::InvalidArgumentError(absl::StrCat(
        "spec: a second spec arrived after ", source ? source->ring().received() : 0,
        " input bytes; a Run call carries one job (its spec first, then data messages)")));
    return false;
  }
  have_first_ = true;
  spec_seen_->store(true);
  // The spec came just as the call timed out waiting for it: the call is over.
  if (stream_->finishing()) return false;
  const v1::SubmitRequest& spec_message = message->spec();
  const bool striped = message->has_stripes() && message->stripes().count() != 1;
  if (striped) {
    if (absl::Status bad = RunGroups::Check(message->stripes(), true, max_run_streams_);
        !bad.ok()) {
      RefuseSeat(message->stripes(), bad);
      return false;
    }
  }
  absl::StatusOr<engine::JobSpec> spec = DecodeRunSpec(spec_message);
  if (!spec.ok()) {
    // A run split over calls is refused on every call.
    if (striped) {
      runs_->Refuse(ClientIdentity(*context_, caller_), message->stripes(),
                    std::make_shared<RunSeat>(stream_, 0, nullptr), spec.status());
    } else {
      Reject(spec.status());
    }
    return false;
  }
  ApplyCallContext(*context_, caller_, &*spec);
  if (unread_ != nullptr) {
    // Draining: the engine's UNAVAILABLE comes first (SubmitStreamed answers it).
    if (absl::Status full = unread_->Check(spec->client); !full.ok() && engine_->accepting()) {
      if (striped) {
        runs_->Refuse(spec->client, message->stripes(),
                      std::make_shared<RunSeat>(stream_, 0, nullptr), full);
      } else {
        Reject(full);
      }
      return false;
    }
    stream_->CountUnreadIn(unread_, spec->client);
  }
  if (striped) {
    TakeSeat(message->stripes(), *std::move(spec));
    return false;  // the run's start reads on
  }
  absl::StatusOr<std::shared_ptr<engine::InputRing>> ring =
      engine_->SubmitStreamed(*std::move(spec), stream_);
  if (!ring.ok()) {
    // The engine counted the refusal; the mark says no job ran, as Submit's refusals do.
    if (!stream_->accepted()) context_->AddTrailingMetadata(kAcceptedMetadataKey, "0");
    stream_->FinishNow(ToGrpcStatus(ring.status()));
    return false;
  }
  if (*ring == nullptr) {
    // A dry run, answered already: it reads no input, so its Done need not wait for the
    // client's last message, and nothing more is read.
    stream_->InputEnded();
    return false;
  }
  return BeginUpload(engine::StripedInput::Create(*std::move(ring), 1), 0);
}

absl::StatusOr<engine::JobSpec> RunReactor::DecodeRunSpec(const v1::SubmitRequest& spec) {
  if (!spec.input().data().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("spec.input.data: must be empty in Run (got ", spec.input().data().size(),
                     " bytes); send the input as data messages after the spec"));
  }
  if (spec.has_input_region() || spec.has_output_region()) {
    return absl::InvalidArgumentError(
        "spec.input_region, spec.output_region: regions go with Submit (Run streams the input "
        "and the result through the call)");
  }
  return DecodeJobSpec(spec);
}

bool RunReactor::OnJoin(const v1::RunStripes& join) {
  if (have_first_) {
    Break(absl::InvalidArgumentError(
        "join: only a call's first message may join a run (it came after the spec or a join)"));
    return false;
  }
  have_first_ = true;
  spec_seen_->store(true);
  if (stream_->finishing()) return false;
  if (absl::Status bad = RunGroups::Check(join, false, max_run_streams_); !bad.ok()) {
    RefuseSeat(join, bad);
    return false;
  }
  // The run's spec was checked against the unread limits; each call holds its share.
  if (unread_ != nullptr) stream_->CountUnreadIn(unread_, ClientIdentity(*context_, caller_));
  TakeSeat(join, std::nullopt);
  return false;  // the run's start reads on
}

void RunReactor::TakeSeat(const v1::RunStripes& stripes, std::optional<engine::JobSpec> spec) {
  const int index = static_cast<int>(stripes.index());
  auto seat = std::make_shared<RunSeat>(
      stream_, index, [this, index](std::shared_ptr<engine::StripedInput> upload) {
        if (BeginUpload(std::move(upload), index)) ReadNext();
      });
  {
    std::lock_guard<std::mutex> lock(input_mu_);
    seat_ = seat;
  }
  // The last call of the run to come starts it from here.
  runs_->Arrive(ClientIdentity(*context_, caller_), stripes, std::move(seat), std::move(spec));
}

bool RunReactor::BeginUpload(std::shared_ptr<engine::StripedInput> upload, int stripe) {
  {
    std::lock_guard<std::mutex> lock(input_mu_);
    upload_ = upload;
    stripe_ = stripe;
  }
  // The callbacks stop before the reactor goes (OnDone detaches).
  engine::StripedInput::Producer producer;
  producer.resume = [this] { ReadNext(); };
  producer.overrun = [this](const absl::Status& status) { Break(status); };
  producer.ended_early = [this] { OnEndedEarly(); };
  producer.complete = [this] { stream_->InputEnded(); };
  producer.failed = [this](const absl::Status& status) { stream_->InputFailed(status); };
  upload->Attach(stripe, std::move(producer));
  // A client that cancelled while the job was being submitted may have missed the input.
  if (context_->IsCancelled()) {
    upload->Fail(stripe, absl::CancelledError("the client cancelled the upload"));
    return false;
  }
  return true;
}

bool RunReactor::OnData(std::string* data) {
  const std::shared_ptr<engine::StripedInput> source = upload();
  if (source == nullptr) {
    Reject(absl::InvalidArgumentError(
        "RunRequest: the first message must carry the spec (RunRequest.spec), not data"));
    return false;
  }
  if (source->stripes() > 1 && data->size() > kMaxStripedMessageBytes) {
    // Each call of a split run may park one message while it waits its turn: bounded here.
    Break(absl::InvalidArgumentError(
        absl::StrCat("data: ", data->size(),
                     " bytes in one message; a run split over calls takes data "
                     "messages of at most ",
                     kMaxStripedMessageBytes, " bytes")));
    return false;
  }
  return source->Offer(stripe_, std::move(*data));
}

void RunReactor::OnInputEnded() {
  const std::shared_ptr<engine::StripedInput> source = upload();
  if (context_->IsCancelled()) {
    if (source) source->Fail(stripe_, absl::CancelledError("the client cancelled the upload"));
    return;  // OnCancel ends the call
  }
  if (!have_first_) {
    Reject(absl::InvalidArgumentError(
        "RunRequest: the stream ended before the spec (the first message must carry it)"));
    return;
  }
  if (source == nullptr) return;  // rejected already
  source->End(stripe_);           // complete or ended_early follows, now or once the input needs it
}

void RunReactor::OnEndedEarly() {
  const std::shared_ptr<engine::StripedInput> source = upload();
  absl::Status early = source->EarlyEndError();
  if (source->stripes() > 1) {
    early = absl::InvalidArgumentError(absl::StrCat(early.message(), " (stripe ", stripe_, " of ",
                                                    source->stripes(), " ended early)"));
  }
  // The stream ended early, or the client cancelled and this read was reported first: judge
  // it once a cancel would have arrived.
  early_end_.Set(std::chrono::system_clock::now() + kCancelSettle,
                 [stream = stream_, source, stripe = stripe_, early](bool /*fired*/) {
                   const absl::Status gone = stream->ReaderStatus();
                   if (!gone.ok()) {
                     source->Fail(stripe, gone);  // cancelled: OnCancel failed it already
                     return;
                   }
                   source->Fail(stripe, early);
                   stream->Abort(ToGrpcStatus(early));
                 });
}

void RunReactor::Reject(const absl::Status& status) {
  engine_->CountRefusal(status);
  if (!stream_->accepted()) context_->AddTrailingMetadata(kAcceptedMetadataKey, "0");
  stream_->FinishNow(ToGrpcStatus(status));
}

void RunReactor::RefuseSeat(const v1::RunStripes& stripes, const absl::Status& bad) {
  if (!RunGroups::CheckName(stripes, false, max_run_streams_).ok()) {
    Reject(bad);
    return;
  }
  if (!stream_->accepted()) context_->AddTrailingMetadata(kAcceptedMetadataKey, "0");
  runs_->Refuse(ClientIdentity(*context_, caller_), stripes,
                std::make_shared<RunSeat>(stream_, 0, nullptr), bad);
}

void RunReactor::Break(const absl::Status& status) {
  if (const std::shared_ptr<engine::StripedInput> source = upload()) {
    source->Fail(stripe_, status);
  }
  stream_->Abort(ToGrpcStatus(status));
}

std::shared_ptr<engine::StripedInput> RunReactor::upload() const {
  std::lock_guard<std::mutex> lock(input_mu_);
  return upload_;
}

void RunReactor::OnWriteDone(bool ok) { stream_->WriteDone(ok); }

void RunReactor::OnCancel() {
  std::shared_ptr<engine::StripedInput> source;
  std::shared_ptr<RunSeat> seat;
  {
    std::lock_guard<std::mutex> lock(input_mu_);
    source = upload_;
    seat = seat_;
  }
  if (source != nullptr) {
    source->Fail(stripe_, absl::CancelledError("the client cancelled the upload"));
  } else if (seat != nullptr) {
    // The run has not started (or starts now: its start sees the cancel and fails the ring).
    runs_->Leave(*seat, absl::CancelledError("the client cancelled the call"));
  }
  stream_->Cancel();
}

void RunReactor::OnDone() {
  // The upload may outlive this reactor (the job holds its ring): its callbacks must not call
  // back, and the run must not start this call.
  std::shared_ptr<RunSeat> seat;
  {
    std::lock_guard<std::mutex> lock(input_mu_);
    seat = seat_;
  }
  if (seat != nullptr) seat->Leave();
  if (const std::shared_ptr<engine::StripedInput> source = upload()) source->Detach(stripe_);
  stream_->Detach();
  ActiveCalls* calls = calls_;
  delete this;
  if (calls != nullptr) calls->End();
}

}  // namespace gpupipe::rpc
