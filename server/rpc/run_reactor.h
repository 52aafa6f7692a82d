// One Run call (the streaming upload): a ServerBidiReactor that reads the spec, submits the job
// as soon as the spec is valid, and hands the input bytes that follow to the job's input ring,
// through an engine::StripedInput (of one stripe, or of several for a run split over calls),
// while the engine's events are written back through an EventStream.
//
// A run split over calls (RunRequest.stripes, join): the call's first message seats it in its
// run (RunGroups), and it reads on only once the run's job has started; its events come
// through the run's FanOutSink.
//
// Flow control: one read outstanding at a time, and the next read starts only once the ring
// took the whole message: when the ring is full, or the message is not the next in order, it
// waits in the StripedInput until the job releases a chunk buffer or the stripes before it
// have sent theirs, so a client is at most one message (under 1 MiB) per call plus gRPC's
// flow-control window ahead of its job, and the daemon holds the ring, never the whole input.
// Writes are bounded by the EventStream's queue. Errors of the upload (bytes beyond the size,
// an early half-close, a second spec) fail the ring, so a job waiting for bytes ends, and end
// the call at once with INVALID_ARGUMENT; a client that cancels fails the ring with CANCELLED.
// A client's cancel also ends its stream, and gRPC may report the read that ended before the
// cancel: a stream that ends before the input needed it to is therefore judged kCancelSettle
// later, as a cancel if the call was cancelled meanwhile, else as an upload that ended early.
#pragma once

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "gpupipe/v1/gpupipe.pb.h"
#include "server/engine/engine.h"
#include "server/engine/pipeline/striped_input.h"
#include "server/rpc/active_calls.h"
#include "server/rpc/event_stream.h"
#include "server/rpc/run_groups.h"
#include "server/rpc/stall_watch.h"

namespace gpupipe::rpc {

// Lifetime: created by the service, deletes itself in OnDone. The engine may outlive it through
// the shared EventStream and InputSource.
class RunReactor final : public grpc::ServerBidiReactor<v1::RunRequest, v1::JobEvent>,
                         public EventWriter {
 public:
  // `watch` (may be null) watches the call for a client that stops reading; a call whose spec
  // has not come `spec_timeout` after it began ends with DEADLINE_EXCEEDED (0: no limit).
  // `unread` (may be null) bounds and counts the client's unread results, as StartJobCall does;
  // `calls` (may be null) counts the call until OnDone.
  // `caller`: the caller's token name (empty for none), or why the call is refused.
  // `runs` seats the calls of runs split over calls, up to `max_run_streams` calls each.
  RunReactor(engine::Engine* engine, grpc::CallbackServerContext* context,
             const absl::StatusOr<std::string>& caller, int max_queued_events, StallWatch* watch,
             std::chrono::milliseconds spec_timeout, RunGroups* runs, int max_run_streams,
             UnreadResults* unread, ActiveCalls* calls = nullptr);

  // How long after a stream ends early it is judged (see above).
  static constexpr std::chrono::milliseconds kCancelSettle{250};
  // The largest data message a call of a split run takes: each call may park one.
  static constexpr size_t kMaxStripedMessageBytes = size_t{1} << 20;

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  void WriteEvent(const v1::JobEvent* event, bool more_follow) override {
    StartWrite(event, more_follow ? grpc::WriteOptions().set_buffer_hint() : grpc::WriteOptions());
  }
  void FinishCall(const grpc::Status& status) override;
  void WriteLastAndFinish(v1::JobEvent* event, const grpc::Status& status) override;
  void CancelCall() override { context_->TryCancel(); }

  // The reaction to a read, without the exception guard of OnReadDone.
  void HandleRead(bool ok);
  // Starts the next read unless the call is finishing. Reads start from gRPC's threads and
  // from the engine's (a parked message taken), so the check and the start are made under
  // finish_mu_, which FinishCall takes too: no read starts once Finish may have been called.
  void ReadNext();
  // Handlers of one read; each returns whether to read on.
  bool OnSpec(v1::RunRequest* message);
  bool OnJoin(const v1::RunStripes& join);
  // The job of a spec, or why the spec cannot run.
  static absl::StatusOr<engine::JobSpec> DecodeRunSpec(const v1::SubmitRequest& spec);
  bool OnData(std::string* data);
  // Takes this call's seat in its run (RunGroups); the job's start starts its upload.
  void TakeSeat(const v1::RunStripes& stripes, std::optional<engine::JobSpec> spec);
  // This call uploads stripe `stripe` of `upload`; returns whether to read on.
  bool BeginUpload(std::shared_ptr<engine::StripedInput> upload, int stripe);
  void OnInputEnded();
  // The stream ended while the input still needed this call's next message.
  void OnEndedEarly();
  // A request rejected before any job exists: counted (Engine::CountRefusal) and finished.
  void Reject(const absl::Status& status);
  // A call of a split run whose seat is invalid (`bad`, from RunGroups::Check): where its key
  // and count still name a run, that run is refused on all of its calls, so that the others
  // do not wait for this seat until the run's timeout; otherwise this call alone.
  void RefuseSeat(const v1::RunStripes& stripes, const absl::Status& bad);
  // A broken upload of an accepted job: the input fails and the call ends with `status`.
  void Break(const absl::Status& status);
  std::shared_ptr<engine::StripedInput> upload() const;

  engine::Engine* const engine_;
  grpc::CallbackServerContext* const context_;
  UnreadResults* const unread_;
  const std::string caller_;  // the caller's token name
  RunGroups* const runs_;
  const int max_run_streams_;
  ActiveCalls* const calls_;
  std::shared_ptr<EventStream> stream_;
  // The read in flight; reads are serialized. HandleRead takes the message out of it before
  // handling it, because handling may start the next read from another thread (a parked
  // message taken later), which reads into it again.
  v1::RunRequest request_;
  bool have_first_ = false;      // the spec or the join came; touched only by OnReadDone
  mutable std::mutex input_mu_;  // OnCancel may run beside OnReadDone and the run's start
  std::shared_ptr<engine::StripedInput> upload_;
  int stripe_ = 0;
  std::shared_ptr<RunSeat> seat_;  // in a run split over calls
  std::mutex finish_mu_;
  bool finished_ = false;  // FinishCall was made
  // Judges a stream that ended early (kCancelSettle). Its callback holds the stream and the
  // upload, never the reactor, which may be gone by then.
  grpc::Alarm early_end_;
  // Ends a call whose spec does not come in time; `spec_seen_` is shared with its callback.
  std::shared_ptr<std::atomic<bool>> spec_seen_ = std::make_shared<std::atomic<bool>>(false);
  grpc::Alarm spec_timeout_;
};

}  // namespace gpupipe::rpc
