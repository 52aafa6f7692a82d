#include "server/rpc/submit_reactor.h"

#include "server/rpc/submit_job.h"

namespace gpupipe::rpc {

SubmitReactor::SubmitReactor(engine::Engine* engine, grpc::CallbackServerContext* context,
                             const v1::SubmitRequest* request,
                             const absl::StatusOr<std::string>& caller, int max_queued_events,
                             StallWatch* watch, UnreadResults* unread, ActiveCalls* calls)
    : context_(context),
      calls_(calls),
      stream_(std::make_shared<EventStream>(this, static_cast<size_t>(max_queued_events))) {
  const auto received = std::chrono::steady_clock::now();
  if (calls_ != nullptr) calls_->Begin();
  if (request->compact_events()) stream_->AllowCompactEvents();
  if (watch != nullptr) watch->Watch(stream_);
  StartJobCall(engine, context, request, caller, received, max_queued_events,
               /*one_message=*/false, unread, stream_);
}

void SubmitReactor::OnWriteDone(bool ok) { stream_->WriteDone(ok); }
void SubmitReactor::OnCancel() { stream_->Cancel(); }

void SubmitReactor::OnDone() {
  stream_->Detach();
  ActiveCalls* calls = calls_;
  delete this;
  if (calls != nullptr) calls->End();
}

}  // namespace gpupipe::rpc
