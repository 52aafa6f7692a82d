#include "server/rpc/event_stream.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "server/rpc/convert.h"
#include "server/rpc/status_mapping.h"

namespace gpupipe::rpc {
namespace {

absl::Status ClientGone() {
  return absl::CancelledError("the client cancelled the call or went away");
}

// Whether `events` are a whole job that fits one CompleteJob event: its Accepted first, its
// Done last, at most one ResultChunk and no Plan between.
bool IsWholeSmallJob(const std::deque<v1::JobEvent>& events) {
  if (events.size() < 2 || !events.front().has_accepted() || !events.back().has_done()) {
    return false;
  }
  int chunks = 0;
  for (const v1::JobEvent& e : events) {
    if (e.has_plan() || e.has_complete()) return false;
    chunks += e.has_chunk();
  }
  return chunks <= 1;
}

// The events of IsWholeSmallJob as one CompleteJob event; `events` are moved from.
v1::JobEvent MergeIntoCompleteJob(std::deque<v1::JobEvent>& events) {
  v1::JobEvent merged;
  merged.set_job_id(events.front().job_id());
  v1::CompleteJob* job = merged.mutable_complete();
  for (v1::JobEvent& e : events) {
    if (e.has_accepted()) *job->mutable_accepted() = std::move(*e.mutable_accepted());
    if (e.has_chunk()) *job->mutable_chunk() = std::move(*e.mutable_chunk());
    if (e.has_timing()) *job->mutable_timing() = std::move(*e.mutable_timing());
    if (e.has_done()) *job->mutable_done() = std::move(*e.mutable_done());
  }
  return merged;
}

// The result bytes `event` carries.
int64_t ResultBytes(const v1::JobEvent& event) {
  if (event.has_chunk()) return static_cast<int64_t>(event.chunk().data().size());
  if (event.has_complete()) return static_cast<int64_t>(event.complete().chunk().data().size());
  return 0;
}

}  // namespace

void EventStream::OnAccepted(const engine::AcceptedInfo& info) {
  int64_t bytes = engine::DTypeSize(info.output_dtype);
  for (int64_t d : info.output_shape) bytes = d >= 0 && bytes >= 0 ? bytes * d : -1;
  std::unique_lock<std::mutex> lock(mu_);
  job_id_ = info.job_id;
  accepted_ = true;
  priority_level_ = static_cast<int>(info.priority);
  output_bytes_ = bytes;
  accepted_held_ =
      whole_job_ || (compact_ && !hold_success_ && bytes >= 0 && bytes <= kSmallResultBytes);
  Push(std::move(lock), EncodeAccepted(info));
}

void EventStream::OnPlan(const engine::PlanDescription& plan) {
  std::unique_lock<std::mutex> lock(mu_);
  // A job with a plan never goes out as one CompleteJob: its Accepted need not wait, and a
  // held one would take a queue place its result may need.
  accepted_held_ = false;
  Push(std::move(lock), EncodePlan(job_id_, plan));
}

absl::Status EventStream::OnChunk(int64_t offset, const char* data, int64_t size) {
  v1::JobEvent event;
  std::unique_lock<std::mutex> lock(mu_);
  if (whole_job_) {
    if (gone_) return gone_reason_;
    const bool first = !partial_chunk_.has_chunk();
    v1::ResultChunk* chunk = partial_chunk_.mutable_chunk();
    if (first) {
      partial_chunk_.set_job_id(job_id_);
      chunk->set_offset(offset);
    } else if (chunk->offset() + static_cast<int64_t>(chunk->data().size()) != offset) {
      return absl::InternalError("result chunks out of order in a one-message job");
    }
    chunk->mutable_data()->append(data, static_cast<size_t>(size));
    HoldBytes(size);
    if (offset + size == output_bytes_) {
      tail_held_ = true;
      Push(std::move(lock), std::move(partial_chunk_));
    }
    return absl::OkStatus();
  }
  waiting_for_room_ = true;
  space_.wait(lock, [&] { return gone_ || queue_.size() < max_queued_; });
  waiting_for_room_ = false;
  if (gone_) return gone_reason_;
  event.set_job_id(job_id_);
  event.mutable_chunk()->set_offset(offset);
  event.mutable_chunk()->set_data(data, static_cast<size_t>(size));
  HoldBytes(size);
  if (!hold_success_ && offset + size == output_bytes_) {
    tail_held_ = true;
  } else {
    accepted_held_ = false;  // more chunks follow: the queue must drain
  }
  Push(std::move(lock), std::move(event));
  return absl::OkStatus();
}

void EventStream::OnTiming(const engine::JobTiming& timing) {
  std::unique_lock<std::mutex> lock(mu_);
  Push(std::move(lock), EncodeTiming(job_id_, timing));
}

void EventStream::OnDone(const absl::Status& job_status) {
  try {
    QueueDone(job_status);
  } catch (...) {
    // The Done could not be made (a failed allocation): the call still ends, with the reason,
    // rather than wait for its client's deadline.
    Abort(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                       "the server ran out of memory for this job's result"));
  }
}

void EventStream::QueueDone(const absl::Status& job_status) {
  std::unique_lock<std::mutex> lock(mu_);
  // The job no longer counts against the engine's admission; what it left here does now.
  if (unread_ != nullptr && !unread_counted_) {
    unread_counted_ = true;
    unread_->Hold(unread_client_, held_bytes_);
  }
  if (aborted_) return;  // the call already ends with the abort's status
  const absl::Status& status = job_status.ok() ? input_failure_ : job_status;
  if (status.ok() && hold_success_ && !input_ended_) {
    held_done_ = EncodeDone(job_id_, status);
    done_held_ = true;
    held_since_ = std::chrono::steady_clock::now();
    return;
  }
  final_status_ = ToGrpcStatus(status);
  done_queued_ = true;
  Push(std::move(lock), EncodeDone(job_id_, status));
}

void EventStream::AllowCompactEvents() {
  std::lock_guard<std::mutex> lock(mu_);
  compact_ = true;
}

void EventStream::HoldWholeJob() {
  std::lock_guard<std::mutex> lock(mu_);
  whole_job_ = true;
  compact_ = true;
}

void EventStream::CountUnreadIn(UnreadResults* unread, std::string client) {
  std::lock_guard<std::mutex> lock(mu_);
  unread_ = unread;
  unread_client_ = std::move(client);
}

void EventStream::HoldSuccessUntilInputEnds() {
  std::lock_guard<std::mutex> lock(mu_);
  hold_success_ = true;
}

void EventStream::InputFailed(const absl::Status& status) {
  std::unique_lock<std::mutex> lock(mu_);
  if (status.ok() || !input_failure_.ok()) return;
  input_failure_ = status;
  if (!done_held_ || aborted_) return;
  done_held_ = false;
  final_status_ = ToGrpcStatus(status);
  done_queued_ = true;
  Push(std::move(lock), EncodeDone(job_id_, status));
}

void EventStream::InputEnded() {
  std::unique_lock<std::mutex> lock(mu_);
  input_ended_ = true;
  if (!done_held_ || aborted_) return;
  done_held_ = false;
  final_status_ = grpc::Status::OK;
  done_queued_ = true;
  Push(std::move(lock), std::move(held_done_));
}

absl::Status EventStream::ReaderStatus() const {
  std::lock_guard<std::mutex> lock(mu_);
  return gone_ ? gone_reason_ : absl::OkStatus();
}

void EventStream::WriteDone(bool ok) {
  std::unique_lock<std::mutex> lock(mu_);
  writing_ = false;
  // The written event is gRPC's no more: its bytes go now, not when the next write reuses it.
  if (const int64_t bytes = ResultBytes(in_flight_); bytes > 0) {
    ReleaseBytes(bytes);
    in_flight_ = v1::JobEvent();
  }
  if (!ok) MarkGone(ClientGone());
  Pump(std::move(lock));
}

void EventStream::Cancel() {
  std::unique_lock<std::mutex> lock(mu_);
  MarkGone(ClientGone());
  Pump(std::move(lock));
}

void EventStream::FinishNow(const grpc::Status& status) {
  std::unique_lock<std::mutex> lock(mu_);
  if (finishing_ || done_queued_) return;
  final_status_ = status;
  done_queued_ = true;
  Pump(std::move(lock));
}

void EventStream::Abort(const grpc::Status& status) {
  std::unique_lock<std::mutex> lock(mu_);
  if (finishing_ || aborted_) return;
  aborted_ = true;
  final_status_ = status;
  done_queued_ = true;
  MarkGone(
      absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message()));
  Pump(std::move(lock));
}

bool EventStream::accepted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return accepted_;
}

bool EventStream::finishing() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finishing_;
}

void EventStream::Detach() {
  std::unique_lock<std::mutex> lock(mu_);
  if (canceller_ != std::this_thread::get_id()) {
    cancel_done_.wait(lock, [&] { return !cancelling_; });
  }
  writer_ = nullptr;
  MarkGone(ClientGone());
  // What is left is the last event, given to gRPC with the call's status.
  ReleaseBytes(held_bytes_);
}

bool EventStream::detached() const {
  std::lock_guard<std::mutex> lock(mu_);
  return writer_ == nullptr;
}

void EventStream::CheckStalled(const StallCheck& check) {
  const std::chrono::steady_clock::time_point now = check.now;
  std::unique_lock<std::mutex> lock(mu_);
  if (writer_ == nullptr || cancelling_) return;
  if (done_held_ && !aborted_ && now - held_since_ >= check.timeout) {
    // The input was whole and the job succeeded; a client that never half-closes must not
    // hold the call open for ever. Bytes it sends later are not read.
    input_ended_ = true;
    done_held_ = false;
    final_status_ = grpc::Status::OK;
    done_queued_ = true;
    Push(std::move(lock), std::move(held_done_));
    return;
  }
  const bool busy = waiting_for_room_ && check.busy_timeout.count() > 0 &&
                    ((check.busy_levels >> priority_level_) & 1u) != 0;
  const std::chrono::milliseconds timeout = busy ? check.busy_timeout : check.timeout;
  if (!writing_ || gone_ || now - write_started_ < timeout) return;
  const double seconds = static_cast<double>(timeout.count()) / 1000.0;
  MarkGone(absl::DeadlineExceededError(
      busy ? absl::StrFormat("the client read nothing for %g s while a result waited and "
                             "other jobs waited for its lane (gpupiped "
                             "--reader-idle-busy-seconds); the call was cancelled",
                             seconds)
           : absl::StrFormat("the client read nothing for %g s while a result waited "
                             "(gpupiped --reader-idle-timeout-seconds); the call was "
                             "cancelled",
                             seconds)));
  cancelling_ = true;
  canceller_ = std::this_thread::get_id();
  EventWriter* writer = writer_;
  lock.unlock();
  writer->CancelCall();
  lock.lock();
  cancelling_ = false;
  canceller_ = std::thread::id();
  cancel_done_.notify_all();
}

void EventStream::MarkGone(absl::Status reason) {
  if (!gone_) gone_reason_ = std::move(reason);
  gone_ = true;
  int64_t dropped = ResultBytes(partial_chunk_);
  for (const v1::JobEvent& event : queue_) dropped += ResultBytes(event);
  queue_.clear();
  partial_chunk_.Clear();
  ReleaseBytes(dropped);
  space_.notify_all();
}

void EventStream::HoldBytes(int64_t bytes) {
  if (unread_ == nullptr || bytes <= 0) return;
  held_bytes_ += bytes;
  if (unread_counted_) unread_->Hold(unread_client_, bytes);
}

void EventStream::ReleaseBytes(int64_t bytes) {
  if (unread_ == nullptr || bytes <= 0) return;
  held_bytes_ -= bytes;
  if (unread_counted_) unread_->Release(unread_client_, bytes);
}

void EventStream::Push(std::unique_lock<std::mutex> lock, v1::JobEvent event) {
  if (!gone_) queue_.push_back(std::move(event));
  Pump(std::move(lock));
}

void EventStream::Pump(std::unique_lock<std::mutex> lock) {
  if (writer_ == nullptr || writing_ || finishing_) return;
  // The last chunk and what follows it (and a small result's Accepted) wait for the Done.
  if ((tail_held_ || accepted_held_ || whole_job_) && !done_queued_ && !gone_) return;
  EventWriter* writer = writer_;
  if (compact_ && !wrote_first_ && done_queued_ && !gone_ && IsWholeSmallJob(queue_)) {
    in_flight_ = MergeIntoCompleteJob(queue_);
    queue_.clear();
    wrote_first_ = true;
    writing_ = true;
    finishing_ = true;
    write_started_ = std::chrono::steady_clock::now();
    space_.notify_all();
    const grpc::Status status = final_status_;
    lock.unlock();
    writer->WriteLastAndFinish(&in_flight_, status);
    return;
  }
  if (!gone_ && !queue_.empty()) {
    in_flight_ = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;
    write_started_ = std::chrono::steady_clock::now();
    space_.notify_all();
    if (queue_.empty() && done_queued_ && in_flight_.has_done()) {
      finishing_ = true;
      const grpc::Status status = final_status_;
      lock.unlock();
      writer->WriteLastAndFinish(&in_flight_, status);
      return;
    }
    // gRPC never completes a hinted write that carries the call's initial metadata (the
    // first one), so only later writes are hinted.
    const bool more_follow = !queue_.empty() && wrote_first_;
    wrote_first_ = true;
    lock.unlock();
    writer->WriteEvent(&in_flight_, more_follow);
    return;
  }
  if (gone_ || (done_queued_ && queue_.empty())) {
    finishing_ = true;
    const grpc::Status status =
        gone_ && !done_queued_ ? grpc::Status(grpc::StatusCode::CANCELLED, "call cancelled")
                               : final_status_;
    lock.unlock();
    writer->FinishCall(status);
  }
}

}  // namespace gpupipe::rpc
