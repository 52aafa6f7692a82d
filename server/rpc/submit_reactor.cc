#include "server/rpc/submit_reactor.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>

#include "server/engine/job_sink.h"
#include "server/rpc/convert.h"
#include "server/rpc/status_mapping.h"

namespace gpupipe::rpc {

// Events of one job on their way from engine threads to the reactor. All state is guarded by
// `mu_`; gRPC calls (StartWrite, Finish) are made outside it, and `writing_`/`finishing_`
// guarantee at most one write in flight and exactly one Finish.
class EventStream final : public engine::JobSink {
 public:
  EventStream(SubmitReactor* reactor, size_t max_queued)
      : reactor_(reactor), max_queued_(max_queued) {}

  // ---- JobSink (engine threads) ----
  void OnAccepted(const engine::AcceptedInfo& info) override {
    std::unique_lock<std::mutex> lock(mu_);
    job_id_ = info.job_id;
    Push(std::move(lock), EncodeAccepted(info));
  }

  void OnPlan(const engine::PlanDescription& plan) override {
    std::unique_lock<std::mutex> lock(mu_);
    Push(std::move(lock), EncodePlan(job_id_, plan));
  }

  bool OnChunk(int64_t offset, const char* data, int64_t size) override {
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

  void OnTiming(const engine::JobTiming& timing) override {
    std::unique_lock<std::mutex> lock(mu_);
    Push(std::move(lock), EncodeTiming(job_id_, timing));
  }

  void OnDone(const absl::Status& status) override {
    std::unique_lock<std::mutex> lock(mu_);
    final_status_ = ToGrpcStatus(status);
    done_queued_ = true;
    Push(std::move(lock), EncodeDone(job_id_, status));
  }

  bool Cancelled() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return gone_;
  }

  // ---- reactor side ----
  void WriteDone(bool ok) {
    std::unique_lock<std::mutex> lock(mu_);
    writing_ = false;
    if (!ok) MarkGone();
    Pump(std::move(lock));
  }

  void Cancel() {
    std::unique_lock<std::mutex> lock(mu_);
    MarkGone();
    Pump(std::move(lock));
  }

  // Before the call finishes without any job (rejected request).
  void FinishNow(const grpc::Status& status) {
    std::unique_lock<std::mutex> lock(mu_);
    final_status_ = status;
    done_queued_ = true;
    Pump(std::move(lock));
  }

  void Detach() {
    std::lock_guard<std::mutex> lock(mu_);
    reactor_ = nullptr;
    MarkGone();
  }

 private:
  void MarkGone() {
    gone_ = true;
    queue_.clear();
    space_.notify_all();
  }

  void Push(std::unique_lock<std::mutex> lock, v1::JobEvent event) {
    if (!gone_) queue_.push_back(std::move(event));
    Pump(std::move(lock));
  }

  // Starts the next write, or finishes the call once the terminal event is written (or the
  // reader is gone). Called with the lock held; releases it before calling into gRPC.
  void Pump(std::unique_lock<std::mutex> lock) {
    if (reactor_ == nullptr || writing_ || finishing_) return;
    SubmitReactor* reactor = reactor_;
    if (!gone_ && !queue_.empty()) {
      in_flight_ = std::move(queue_.front());
      queue_.pop_front();
      writing_ = true;
      space_.notify_all();
      lock.unlock();
      reactor->StartWrite(&in_flight_);
      return;
    }
    if (gone_ || (done_queued_ && queue_.empty())) {
      finishing_ = true;
      const grpc::Status status =
          gone_ && !done_queued_ ? grpc::Status(grpc::StatusCode::CANCELLED, "call cancelled")
                                 : final_status_;
      lock.unlock();
      reactor->Finish(status);
    }
  }

  mutable std::mutex mu_;
  std::condition_variable space_;
  SubmitReactor* reactor_;
  const size_t max_queued_;
  std::string job_id_;
  std::deque<v1::JobEvent> queue_;
  v1::JobEvent in_flight_;  // owned here until OnWriteDone
  bool writing_ = false;
  bool finishing_ = false;
  bool done_queued_ = false;
  bool gone_ = false;
  grpc::Status final_status_;
};

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
