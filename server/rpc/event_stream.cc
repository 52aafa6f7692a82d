#include "server/rpc/event_stream.h"

#include <utility>

#include "server/rpc/convert.h"
#include "server/rpc/status_mapping.h"

namespace gpupipe::rpc {

void EventStream::OnAccepted(const engine::AcceptedInfo& info) {
  std::unique_lock<std::mutex> lock(mu_);
  job_id_ = info.job_id;
  Push(std::move(lock), EncodeAccepted(info));
}

void EventStream::OnPlan(const engine::PlanDescription& plan) {
  std::unique_lock<std::mutex> lock(mu_);
  Push(std::move(lock), EncodePlan(job_id_, plan));
}

bool EventStream::OnChunk(int64_t offset, const char* data, int64_t size) {
  v1::JobEvent event;
  std::unique_lock<std::mutex> lock(mu_);
  space_.wait(lock, [&] { return gone_ || queue_.size() < max_queued_; });
  if (gone_) return false;
  event.set_job_id(job_id_);
  event.mutable_chunk()->set_offset(offset);
  event.mutable_chunk()->set_data(data, static_cast<size_t>(size));
  Push(std::move(lock), std::move(event));
  return true;
}

void EventStream::OnTiming(const engine::JobTiming& timing) {
  std::unique_lock<std::mutex> lock(mu_);
  Push(std::move(lock), EncodeTiming(job_id_, timing));
}

void EventStream::OnDone(const absl::Status& status) {
  std::unique_lock<std::mutex> lock(mu_);
  if (aborted_) return;  // the call already ends with the abort's status
  if (status.ok() && hold_success_ && !input_ended_) {
    held_done_ = EncodeDone(job_id_, status);
    done_held_ = true;
    return;
  }
  final_status_ = ToGrpcStatus(status);
  done_queued_ = true;
  Push(std::move(lock), EncodeDone(job_id_, status));
}

void EventStream::HoldSuccessUntilInputEnds() {
  std::lock_guard<std::mutex> lock(mu_);
  hold_success_ = true;
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

bool EventStream::Cancelled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return gone_;
}

void EventStream::WriteDone(bool ok) {
  std::unique_lock<std::mutex> lock(mu_);
  writing_ = false;
  if (!ok) MarkGone();
  Pump(std::move(lock));
}

void EventStream::Cancel() {
  std::unique_lock<std::mutex> lock(mu_);
  MarkGone();
  Pump(std::move(lock));
}

void EventStream::FinishNow(const grpc::Status& status) {
  std::unique_lock<std::mutex> lock(mu_);
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
  MarkGone();
  Pump(std::move(lock));
}

bool EventStream::finishing() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finishing_;
}

void EventStream::Detach() {
  std::lock_guard<std::mutex> lock(mu_);
  writer_ = nullptr;
  MarkGone();
}

void EventStream::MarkGone() {
  gone_ = true;
  queue_.clear();
  space_.notify_all();
}

void EventStream::Push(std::unique_lock<std::mutex> lock, v1::JobEvent event) {
  if (!gone_) queue_.push_back(std::move(event));
  Pump(std::move(lock));
}

void EventStream::Pump(std::unique_lock<std::mutex> lock) {
  if (writer_ == nullptr || writing_ || finishing_) return;
  EventWriter* writer = writer_;
  if (!gone_ && !queue_.empty()) {
    in_flight_ = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;
    space_.notify_all();
    lock.unlock();
    writer->WriteEvent(&in_flight_);
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
