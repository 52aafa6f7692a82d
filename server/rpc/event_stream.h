// The write half of a job's call: events on their way from engine threads to a gRPC reactor,
// at most `max_queued` of them waiting (a slow reader makes the job's lane wait in OnChunk
// instead of growing server memory). Shared by the Submit and Run reactors.
//
// A reader that stops reading holds its job's lane only so long: CheckStalled (called by the
// service's StallWatch) cancels a call whose event write has made no progress for the stall
// timeout (a shorter one while other jobs wait for lanes), and the job ends with
// DEADLINE_EXCEEDED.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "gpupipe/v1/gpupipe.pb.h"
#include "server/engine/job/job_sink.h"
#include "server/rpc/unread_results.h"

namespace gpupipe::rpc {

// What an EventStream needs from its reactor. All are called outside the stream's lock, at
// most one write in flight, FinishCall exactly once, and none after the reactor detached.
class EventWriter {
 public:
  virtual ~EventWriter() = default;
  // StartWrite(event); `event` stays valid until the reactor reports the write done.
  // `more_follow`: another event is queued behind it, so gRPC may hold this one back to send
  // both at once (WriteOptions::set_buffer_hint).
  virtual void WriteEvent(const v1::JobEvent* event, bool more_follow) = 0;
  virtual void FinishCall(const grpc::Status& status) = 0;
  // The last event and the call's status in one operation (StartWriteAndFinish): no write-done
  // reaction follows. `event` stays valid until the reactor is done; the stream reads it no
  // more, so a writer that puts it into a response of its own moves it there (a result held
  // for a reader who does not read is then held by the response alone, not by both).
  virtual void WriteLastAndFinish(v1::JobEvent* event, const grpc::Status& status) = 0;
  // Cancels the call (ServerContext::TryCancel): its pending write fails, OnCancel follows.
  virtual void CancelCall() = 0;
};

// Few writes per small job: a result's last chunk waits for the job's Timing and Done (which
// follow at once), so that they go out together, the Done with the call's status in one write.
// Where the client asked for compact events (AllowCompactEvents), a job whose result fits one
// message (kSmallResultBytes) also holds its Accepted back until its result is there, and the
// whole job goes out as one CompleteJob event. Neither applies where a successful Done waits
// for an upload's half-close (Run), which a client may only send after reading its result.
//
// Thread safety: the JobSink methods come from engine threads, the rest from gRPC reactions;
// all state is guarded by one mutex. Lifetime: shared by the reactor and the engine; once the
// reactor detaches (OnDone), every call is a no-op and OnChunk answers false.
class EventStream final : public engine::JobSink {
 public:
  // Results of at most this many bytes hold their Accepted back (see above): one message.
  static constexpr int64_t kSmallResultBytes = int64_t{1} << 20;

  EventStream(EventWriter* writer, size_t max_queued) : writer_(writer), max_queued_(max_queued) {}

  // ---- JobSink (engine threads) ----
  void OnAccepted(const engine::AcceptedInfo& info) override;
  void OnPlan(const engine::PlanDescription& plan) override;
  absl::Status OnChunk(int64_t offset, const char* data, int64_t size) override;
  void OnTiming(const engine::JobTiming& timing) override;
  void OnDone(const absl::Status& status) override;
  absl::Status ReaderStatus() const override;

  // ---- reactor side ----
  void WriteDone(bool ok);
  // The client went away: drop queued events, refuse new ones, finish CANCELLED.
  void Cancel();
  // Finishes the call with `status` before any job was accepted (a rejected request).
  void FinishNow(const grpc::Status& status);
  // Whether a job was accepted on this call (OnAccepted came), whether or not its Accepted
  // event was sent yet.
  bool accepted() const;
  // Ends the call with `status` whatever the job is doing (a broken upload): queued events
  // are dropped, OnChunk answers false from now on so the job stops, and the job's own Done
  // is not sent.
  void Abort(const grpc::Status& status);
  // For an upload (Run): a successful job's Done, and so the call's OK, waits until
  // InputEnded(), so that bytes or a second spec sent after the input's last byte still end the
  // call with INVALID_ARGUMENT (Abort) and Done never says OK for a broken upload. A failed
  // job's Done is not held.
  void HoldSuccessUntilInputEnds();
  // The client asked for compact events (SubmitRequest.compact_events): a job whose events
  // are all queued when the first write starts goes out as one CompleteJob event.
  void AllowCompactEvents();
  // A unary call (SubmitSmall): nothing is written before the job's Done, and then the whole
  // job goes out as one CompleteJob with the call's status (WriteLastAndFinish). The engine
  // only accepts such a job where its result fits one message (JobSpec::one_message), so
  // result chunks are joined as they come (a batch may deliver a job's rows in two), without
  // waiting for room in the queue.
  void HoldWholeJob();
  // Counts the result bytes this stream holds once its job is done (OnDone), until their write
  // completes or the call is over, as `client`'s in `unread` (which must outlive the stream).
  // A running job's bytes are not counted: it counts against the engine's admission limits
  // (--max-client-jobs), and the queue here bounds them (max_queued). Called before the job is
  // submitted, at most once.
  void CountUnreadIn(UnreadResults* unread, std::string client);
  // The client half-closed after sending the whole input.
  void InputEnded();
  // The upload broke on another call of the same run (RunRequest.stripes): a successful Done,
  // held or still to come, goes out as a Done with `status` instead, so that every call of
  // the run ends alike.
  void InputFailed(const absl::Status& status);
  // True once FinishCall was made or is about to be.
  bool finishing() const;
  // The reactor is gone (OnDone). Waits for a CancelCall in progress on another thread.
  void Detach();

  // ---- the stall watch (stall_watch.h), any thread ----
  struct StallCheck {
    std::chrono::steady_clock::time_point now;
    // The reader idle timeout: a write in flight this long (the client reads nothing, so flow
    // control holds the write) makes the reader count as gone with DEADLINE_EXCEEDED and
    // cancels the call; a successful Done held this long for the half-close
    // (HoldSuccessUntilInputEnds) goes out.
    std::chrono::milliseconds timeout{0};
    // Shorter than `timeout`, for the write of a call whose job holds its lane waiting for
    // room in this stream (OnChunk) while jobs of its priority wait for a lane: bit p of
    // busy_levels set for priority p (Engine::levels_waiting_for_lanes). 0: none.
    std::chrono::milliseconds busy_timeout{0};
    uint32_t busy_levels = 0;
  };
  void CheckStalled(const StallCheck& check);
  // Whether the call is over (no further CheckStalled can matter).
  bool detached() const;

 private:
  // OnDone's work; may throw (a failed allocation), and OnDone then aborts the call.
  void QueueDone(const absl::Status& job_status);
  // The reader is gone, for `reason` (CANCELLED unless stalled).
  void MarkGone(absl::Status reason);
  void Push(std::unique_lock<std::mutex> lock, v1::JobEvent event);
  // Result bytes now held, or no longer held (CountUnreadIn). Called with the lock held.
  void HoldBytes(int64_t bytes);
  void ReleaseBytes(int64_t bytes);
  // Starts the next write, or finishes the call once the terminal event is written (or the
  // reader is gone). Called with the lock held; releases it before calling into gRPC.
  void Pump(std::unique_lock<std::mutex> lock);

  mutable std::mutex mu_;
  std::condition_variable space_;
  EventWriter* writer_;
  const size_t max_queued_;
  std::string job_id_;
  bool accepted_ = false;       // OnAccepted came
  int priority_level_ = 0;      // the job's priority, from OnAccepted
  bool waiting_for_room_ = false;  // the job waits in OnChunk, holding its lane
  int64_t output_bytes_ = -1;   // from OnAccepted; -1 where the shape does not give it
  bool tail_held_ = false;      // the last result chunk waits for the Done
  bool accepted_held_ = false;  // the Accepted waits for the result (a small one)
  bool wrote_first_ = false;    // a write (carrying the initial metadata) has started
  bool compact_ = false;        // AllowCompactEvents
  bool whole_job_ = false;      // HoldWholeJob
  v1::JobEvent partial_chunk_;  // HoldWholeJob: the result bytes so far
  std::deque<v1::JobEvent> queue_;
  v1::JobEvent in_flight_;  // owned here until the write is done
  bool writing_ = false;
  bool finishing_ = false;
  bool done_queued_ = false;
  bool gone_ = false;
  bool aborted_ = false;
  bool hold_success_ = false;  // HoldSuccessUntilInputEnds
  bool input_ended_ = false;
  absl::Status input_failure_;  // InputFailed
  bool done_held_ = false;     // a successful Done waits for InputEnded
  v1::JobEvent held_done_;
  std::chrono::steady_clock::time_point held_since_;
  std::chrono::steady_clock::time_point write_started_;  // of the write in flight
  absl::Status gone_reason_;                             // why the reader is gone, once gone_
  // CheckStalled calls CancelCall outside the lock; Detach waits for it to return.
  std::condition_variable cancel_done_;
  bool cancelling_ = false;
  std::thread::id canceller_;
  grpc::Status final_status_;
  UnreadResults* unread_ = nullptr;  // CountUnreadIn
  std::string unread_client_;
  int64_t held_bytes_ = 0;        // result bytes held (with unread_)
  bool unread_counted_ = false;  // the job is done: held_bytes_ count in unread_
};

}  // namespace gpupipe::rpc
