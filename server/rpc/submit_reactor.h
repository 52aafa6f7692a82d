// One Submit call: a ServerWriteReactor fed by the engine through an EventStream.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>

#include "gpupipe/v1/gpupipe.pb.h"
#include "server/engine/engine.h"
#include "server/rpc/active_calls.h"
#include "server/rpc/event_stream.h"
#include "server/rpc/stall_watch.h"

namespace gpupipe::rpc {

// Lifetime: created by the service, deletes itself in OnDone. The engine may outlive it
// through the shared EventStream, whose calls become no-ops once the reactor is gone.
class SubmitReactor final : public grpc::ServerWriteReactor<v1::JobEvent>, public EventWriter {
 public:
  // `caller`: the caller's token name (empty for none), or why the call is refused.
  // `watch` (may be null) watches the call for a client that stops reading; `unread` (may be
  // null) bounds and counts the client's unread results (StartJobCall); `calls` (may be null)
  // counts the call until OnDone.
  SubmitReactor(engine::Engine* engine, grpc::CallbackServerContext* context,
                const v1::SubmitRequest* request, const absl::StatusOr<std::string>& caller,
                int max_queued_events, StallWatch* watch, UnreadResults* unread,
                ActiveCalls* calls = nullptr);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  void WriteEvent(const v1::JobEvent* event, bool more_follow) override {
    StartWrite(event, more_follow ? grpc::WriteOptions().set_buffer_hint() : grpc::WriteOptions());
  }
  void FinishCall(const grpc::Status& status) override { Finish(status); }
  void WriteLastAndFinish(v1::JobEvent* event, const grpc::Status& status) override {
    StartWriteAndFinish(event, grpc::WriteOptions(), status);
  }
  void CancelCall() override { context_->TryCancel(); }

  grpc::CallbackServerContext* const context_;
  ActiveCalls* const calls_;
  std::shared_ptr<EventStream> stream_;
};

}  // namespace gpupipe::rpc
