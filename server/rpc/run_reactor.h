// One Run call (the streaming upload): a ServerBidiReactor that reads the spec, submits the job
// as soon as the spec is valid, and writes the input bytes that follow into the job's input
// ring (input_ring.h) while the engine's events are written back through an EventStream.
//
// Flow control: one read outstanding at a time, and the next read starts only once the ring
// took the whole message: when the ring is full, the rest of the message waits here until the
// job releases a chunk buffer (the ring's room callback, on the job's thread), so a client is
// at most one message (under 1 MiB) plus gRPC's flow-control window ahead of its job, and the
// daemon holds the ring, never the whole input. Writes are bounded by the EventStream's queue.
// Errors of the upload (bytes beyond the size, an early half-close, a second spec) fail the
// ring, so a job waiting for bytes ends, and end the call at once with INVALID_ARGUMENT; a
// client that cancels fails the ring with CANCELLED. A client's cancel also ends its stream,
// and gRPC may report the read that ended before the cancel: a stream that ends before the
// input's last byte is therefore judged kCancelSettle later, as a cancel if the call was
// cancelled meanwhile, else as an upload that ended early.
#pragma once

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>

#include "absl/status/status.h"
#include "gpupipe/v1/gpupipe.pb.h"
#include "server/engine/engine.h"
#include "server/engine/pipeline/input_ring.h"
#include "server/rpc/active_calls.h"
#include "server/rpc/event_stream.h"
#include "server/rpc/stall_watch.h"

namespace gpupipe::rpc {

// Lifetime: created by the service, deletes itself in OnDone. The engine may outlive it through
// the shared EventStream and InputSource.
class RunReactor final : public grpc::ServerBidiReactor<v1::RunRequest, v1::JobEvent>,
                         public EventWriter {
 public:
  // `watch` (may be null) watches the call for a client that stops reading; a call whose spec
  // has not come `spec_timeout` after it began ends with DEADLINE_EXCEEDED (0: no limit).
  // `calls` (may be null) counts the call until OnDone.
  // `caller`: the caller's token name (empty for none), or why the call is refused.
  RunReactor(engine::Engine* engine, grpc::CallbackServerContext* context,
             const absl::StatusOr<std::string>& caller, int max_queued_events, StallWatch* watch,
             std::chrono::milliseconds spec_timeout, ActiveCalls* calls = nullptr);

  // How long after a stream ends early it is judged (see above).
  static constexpr std::chrono::milliseconds kCancelSettle{250};

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  void WriteEvent(const v1::JobEvent* event) override { StartWrite(event); }
  void FinishCall(const grpc::Status& status) override { Finish(status); }
  void CancelCall() override { context_->TryCancel(); }

  // The reaction to a read, without the exception guard of OnReadDone.
  void HandleRead(bool ok);
  // Handlers of one read; each returns whether to read on.
  bool OnSpec(v1::SubmitRequest* spec);
  bool OnData(std::string* data);
  // Writes the rest of the message read last into the ring; true once all of it is there,
  // false when the ring is full (the room callback then calls WriteRest again) or failed.
  bool WriteRest();
  void OnInputEnded();
  // A request rejected before any job exists: counted (Engine::CountRefusal) and finished.
  void Reject(const absl::Status& status);
  // A broken upload of an accepted job: the input fails and the call ends with `status`.
  void Break(const absl::Status& status);
  std::shared_ptr<engine::InputRing> input() const;

  engine::Engine* const engine_;
  grpc::CallbackServerContext* const context_;
  const std::string caller_;  // the caller's token name
  ActiveCalls* const calls_;
  std::shared_ptr<EventStream> stream_;
  // The read in flight; reads are serialized. HandleRead takes the message out of it before
  // handling it, because handling may start the next read from another thread (a ring write
  // that completes later), which reads into it again.
  v1::RunRequest request_;
  bool have_spec_ = false;  // reaction state: touched only by OnReadDone
  // The data message read last and how much of it the ring took: written by OnReadDone and by
  // the ring's room callback. The callback may start on the consumer's thread as soon as the
  // ring has registered it, before WriteRest has counted what the ring took, so WriteRest runs
  // under pending_mu_ from the write to the count.
  std::mutex pending_mu_;
  std::string pending_;
  size_t pending_taken_ = 0;
  mutable std::mutex input_mu_;  // OnCancel may run beside OnReadDone
  std::shared_ptr<engine::InputRing> input_;
  // Judges a stream that ended early (kCancelSettle). Its callback holds the stream and the
  // ring, never the reactor, which may be gone by then.
  grpc::Alarm early_end_;
  // Ends a call whose spec does not come in time; `spec_seen_` is shared with its callback.
  std::shared_ptr<std::atomic<bool>> spec_seen_ = std::make_shared<std::atomic<bool>>(false);
  grpc::Alarm spec_timeout_;
};

}  // namespace gpupipe::rpc
