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
