// One SubmitSmall call: a unary reactor whose one response is the job's CompleteJob, fed by the
// engine through an EventStream that holds every event until the job's Done (HoldWholeJob).
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "gpupipe/v1/gpupipe.pb.h"
#include "server/engine/engine.h"
#include "server/rpc/active_calls.h"
#include "server/rpc/event_stream.h"
#include "server/rpc/stall_watch.h"

namespace gpupipe::rpc {

// Lifetime: created by the service, deletes itself in OnDone; the engine may outlive it through
// the shared EventStream. `response` is gRPC's, valid until OnDone. The other arguments are
// those of SubmitReactor.
class SubmitSmallReactor final : public grpc::ServerUnaryReactor, public EventWriter {
 public:
  SubmitSmallReactor(engine::Engine* engine, grpc::CallbackServerContext* context,
                     const v1::SubmitRequest* request, v1::CompleteJob* response,
                     const absl::StatusOr<std::string>& caller, int max_queued_events,
                     StallWatch* watch, UnreadResults* unread, ActiveCalls* calls = nullptr);

  void OnCancel() override;
  void OnDone() override;
  // OnCancel and OnDone run on the gRPC thread that ends the call instead of being handed to
  // gRPC's executor thread, which would cost every small job a thread wake-up (the reactor
  // gRPC makes for a plain unary handler, DefaultReactor, runs inline the same way). This is
  // gRPC's own hook for that, not its public API; should a gRPC release drop it, `override`
  // fails the build rather than silently losing it. Both are short and wait for nothing but a
  // cancel already under way: OnCancel marks the stream's reader gone and may call Finish;
  // OnDone detaches the stream (waiting at most for a stall-watch TryCancel that is
  // returning) and deletes this. Either may also run within a Finish or
  // TryCancel call, on the calling thread: safe, since the stream calls its writer outside its
  // lock, never writes or finishes after the call that finishes it (a stall-watch CancelCall
  // may follow that call, and Detach waits for it), and after CancelCall updates only itself
  // (EventWriter); and this reactor uses nothing of itself after Finish or TryCancel.
  bool InternalInlineable() override { return true; }

 private:
  // The stream writes nothing but the whole job (WriteLastAndFinish) and refusals
  // (FinishCall); an event on its own would mean the job did not fit one message.
  void WriteEvent(const v1::JobEvent* event, bool more_follow) override;
  void FinishCall(const grpc::Status& status) override { Finish(status); }
  void WriteLastAndFinish(v1::JobEvent* event, const grpc::Status& status) override;
  void CancelCall() override { context_->TryCancel(); }

  grpc::CallbackServerContext* const context_;
  v1::CompleteJob* const response_;
  ActiveCalls* const calls_;
  std::shared_ptr<EventStream> stream_;
};

}  // namespace gpupipe::rpc
