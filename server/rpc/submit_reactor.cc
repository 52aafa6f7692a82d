#include "server/rpc/submit_reactor.h"

#include <string>

#include "server/rpc/convert.h"
#include "server/rpc/status_mapping.h"

namespace gpupipe::rpc {

SubmitReactor::SubmitReactor(engine::Engine* engine, const v1::SubmitRequest* request,
                             int max_queued_events)
    : stream_(std::make_shared<EventStream>(this, static_cast<size_t>(max_queued_events))) {
  absl::StatusOr<engine::JobSpec> spec = DecodeJobSpec(*request);
  if (!spec.ok()) {
    stream_->FinishNow(ToGrpcStatus(spec.status()));
    return;
  }
  // The request lives until the call ends and nothing reads its bytes after this point, so the
  // input is moved out instead of copied (it can be tens of MiB).
  std::string input =
      std::move(*const_cast<v1::SubmitRequest*>(request)->mutable_input()->mutable_data());
  if (absl::Status s = engine->Submit(*std::move(spec), input, stream_); !s.ok()) {
    stream_->FinishNow(ToGrpcStatus(s));
  }
}

void SubmitReactor::OnWriteDone(bool ok) { stream_->WriteDone(ok); }
void SubmitReactor::OnCancel() { stream_->Cancel(); }

void SubmitReactor::OnDone() {
  stream_->Detach();
  delete this;
}

}  // namespace gpupipe::rpc
