// One Submit call: a ServerWriteReactor fed by the engine through an EventStream.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>

#include "gpupipe/v1/gpupipe.pb.h"
#include "server/engine/engine.h"
#include "server/rpc/event_stream.h"

namespace gpupipe::rpc {

// Lifetime: created by the service, deletes itself in OnDone. The engine may outlive it
// through the shared EventStream, whose calls become no-ops once the reactor is gone.
class SubmitReactor final : public grpc::ServerWriteReactor<v1::JobEvent>, public EventWriter {
 public:
  SubmitReactor(engine::Engine* engine, const v1::SubmitRequest* request, int max_queued_events);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  void WriteEvent(const v1::JobEvent* event) override { StartWrite(event); }
  void FinishCall(const grpc::Status& status) override { Finish(status); }

  std::shared_ptr<EventStream> stream_;
};

}  // namespace gpupipe::rpc
