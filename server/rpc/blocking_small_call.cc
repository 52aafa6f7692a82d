#include "server/rpc/blocking_small_call.h"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include "server/rpc/event_stream.h"
#include "server/rpc/submit_job.h"

namespace gpupipe::rpc {
namespace {

// The stream's writer: the first outcome it is given (the whole job, or a status) is the
// call's; the handler's thread waits for it. Lives on that thread's stack: the stream drops its
// pointer in Detach, which the handler calls before returning, and every method sets the
// outcome and notifies under the lock, so once the handler holds the lock and sees it set the
// method touches nothing here any more.
class WaitingWriter final : public EventWriter {
 public:
  WaitingWriter(grpc::ServerContext* context, v1::CompleteJob* response)
      : context_(context), response_(response) {}

  void WriteEvent(const v1::JobEvent* /*event*/, bool /*more_follow*/) override {
    // As in SubmitSmallReactor: the engine refuses jobs whose events do not fit one message.
    Settle(grpc::Status(grpc::StatusCode::INTERNAL,
                        "the job's events did not fit the one message of SubmitSmall"),
           nullptr);
  }
  void FinishCall(const grpc::Status& status) override { Settle(status, nullptr); }
  void WriteLastAndFinish(v1::JobEvent* event, const grpc::Status& status) override {
    Settle(status, event);
  }
  void CancelCall() override { context_->TryCancel(); }

  // Waits for the outcome; while waiting, a client gone (cancelled, or past its deadline)
  // cancels `stream`, which settles the call with CANCELLED.
  grpc::Status Wait(EventStream* stream) {
    std::unique_lock<std::mutex> lock(mu_);
    while (!status_) {
      if (settled_.wait_for(lock, kCancelPollInterval) == std::cv_status::timeout &&
          !status_ && context_->IsCancelled()) {
        lock.unlock();
        stream->Cancel();
        lock.lock();
      }
    }
    return *status_;
  }

 private:
  void Settle(const grpc::Status& status, v1::JobEvent* event) {
    std::lock_guard<std::mutex> lock(mu_);
    if (status_) return;
    if (event != nullptr && status.ok()) *response_ = std::move(*event->mutable_complete());
    status_ = status;
    settled_.notify_all();
  }

  grpc::ServerContext* const context_;
  v1::CompleteJob* const response_;
  std::mutex mu_;
  std::condition_variable settled_;
  std::optional<grpc::Status> status_;
};

}  // namespace

grpc::Status ServeSmallJobHere(engine::Engine* engine, grpc::ServerContext* context,
                               const v1::SubmitRequest* request, v1::CompleteJob* response,
                               const absl::StatusOr<std::string>& caller, int max_queued_events,
                               UnreadResults* unread) {
  const auto received = std::chrono::steady_clock::now();
  WaitingWriter writer(context, response);
  auto stream = std::make_shared<EventStream>(&writer, static_cast<size_t>(max_queued_events));
  stream->HoldWholeJob();
  StartJobCall(engine, context, request, caller, received, max_queued_events,
               /*one_message=*/true, unread, stream);
  grpc::Status status = writer.Wait(stream.get());
  // The engine may hold the stream longer (a cancelled job stops at its next check); from now
  // on it writes nowhere.
  stream->Detach();
  return status;
}

}  // namespace gpupipe::rpc
