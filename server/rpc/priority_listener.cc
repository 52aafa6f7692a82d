#include "server/rpc/priority_listener.h"

#include <chrono>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/rpc/event_stream.h"
#include "server/rpc/status_mapping.h"

namespace gpupipe::rpc {

// SubmitSmall through the async API; Submit and Run refused on gRPC's sync threads.
class PriorityListener::Service final
    : public v1::JobService::WithAsyncMethod_SubmitSmall<v1::JobService::Service> {
 public:
  grpc::Status Submit(grpc::ServerContext* context, const v1::SubmitRequest* /*request*/,
                      grpc::ServerWriter<v1::JobEvent>* /*writer*/) override {
    return OnlySubmitSmall(context);
  }
  grpc::Status Run(grpc::ServerContext* context,
                   grpc::ServerReaderWriter<v1::JobEvent, v1::RunRequest>* /*stream*/) override {
    return OnlySubmitSmall(context);
  }

 private:
  static grpc::Status OnlySubmitSmall(grpc::ServerContext* context) {
    context->AddTrailingMetadata(kAcceptedMetadataKey, "0");
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "the priority listener takes SubmitSmall only (a job whose result fits "
                        "one message): send Submit and Run to the daemon's main address");
  }
};

// One SubmitSmall call, from its request to its end. Deletes itself once its start (the
// requested tag's handling), its finish operation and its done notification are all over, or
// at once where the request never came (at shutdown). The three may come on different threads
// in any order: gRPC starts the done notification before it hands out the requested tag, so a
// call cancelled while it waited in gRPC's queue can be done before it is started. The
// EventStream is its writer's, as a reactor's is.
class PriorityListener::Call final : public EventWriter {
 public:
  // What the queue gives back: which operation of which call.
  struct Tag {
    Call* call;
  };

  explicit Call(PriorityListener* listener)
      : listener_(listener),
        live_(listener),
        responder_(&context_),
        stream_(std::make_shared<EventStream>(
            this, static_cast<size_t>(listener->jobs_->max_queued_events()))) {
    stream_->HoldWholeJob();
    // Before the call starts: the queue then says when the call is over, cancelled or not.
    context_.AsyncNotifyWhenDone(&done_tag_);
    listener_->service_->RequestSubmitSmall(&context_, &request_, &responder_,
                                            listener_->cq_.get(), listener_->cq_.get(),
                                            &requested_tag_);
  }

  // A tag of this call came back from the queue.
  void Completed(const Tag* tag, bool ok) {
    if (tag == &requested_tag_) {
      if (!ok) {  // the server is shutting down: no call came
        delete this;
        return;
      }
      listener_->Post();
      Begin();
      bool cancelled = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        begun_ = true;
        cancelled = cancelled_before_begun_;
      }
      if (cancelled) stream_->Cancel();
      Release();
      return;
    }
    // A client that went away (or past its deadline) stops its job; one that went before the
    // call began is stopped once it has (above).
    if (tag == &done_tag_ && context_.IsCancelled()) {
      bool begun = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        begun = begun_;
        if (!begun) cancelled_before_begun_ = true;
      }
      if (begun) stream_->Cancel();
    }
    Release();
  }

  // ---- EventWriter (engine threads, or this call's) ----
  void WriteEvent(const v1::JobEvent* /*event*/, bool /*more_follow*/) override {
    // As in SubmitSmallReactor: the engine refuses jobs whose events do not fit one message.
    Finish(grpc::Status(grpc::StatusCode::INTERNAL,
                        "the job's events did not fit the one message of SubmitSmall"));
  }
  void FinishCall(const grpc::Status& status) override { Finish(status); }
  void WriteLastAndFinish(v1::JobEvent* event, const grpc::Status& status) override {
    if (status.ok()) response_ = std::move(*event->mutable_complete());
    Finish(status);
  }
  void CancelCall() override { context_.TryCancel(); }

 private:
  void Begin() {
    const auto received = std::chrono::steady_clock::now();
    const int in_progress = ++listener_->in_progress_;
    listener_->jobs_->BeginListenerCall();
    if (in_progress > listener_->options_.max_calls) {
      const absl::Status full = absl::ResourceExhaustedError(absl::StrCat(
          "the priority listener has ", listener_->options_.max_calls,
          " calls in progress; try again shortly (gpupiped --priority-max-calls)"));
      listener_->jobs_->RefuseListenerCall(&context_, full, stream_);
      return;
    }
    listener_->jobs_->StartListenerCall(&context_, &request_, listener_->options_.lowest,
                                        "the priority listener", received, stream_);
  }

  void Finish(const grpc::Status& status) {
    if (status.ok()) {
      responder_.Finish(response_, status, &finish_tag_);
    } else {
      responder_.FinishWithError(status, &finish_tag_);
    }
  }

  void Release() {
    if (--pending_ == 0) End();
  }

  void End() {
    stream_->Detach();
    listener_->jobs_->EndListenerCall();
    --listener_->in_progress_;
    delete this;
  }

  // Counts the listener's calls alive, requested or in progress: Stop waits for none.
  class Live {
   public:
    explicit Live(PriorityListener* listener) : listener_(listener) {
      std::lock_guard<std::mutex> lock(listener_->live_mu_);
      ++listener_->live_;
    }
    ~Live() {
      std::lock_guard<std::mutex> lock(listener_->live_mu_);
      if (--listener_->live_ == 0) listener_->none_live_.notify_all();
    }

   private:
    PriorityListener* const listener_;
  };

  PriorityListener* const listener_;
  const Live live_;
  grpc::ServerContext context_;
  v1::SubmitRequest request_;
  v1::CompleteJob response_;
  grpc::ServerAsyncResponseWriter<v1::CompleteJob> responder_;
  // Made before the call starts, so that a cancellation always finds it.
  const std::shared_ptr<EventStream> stream_;
  // The start, the finish operation and the done notification: the call ends when all three
  // are over.
  std::atomic<int> pending_{3};
  std::mutex mu_;
  bool begun_ = false;                  // Begin returned
  bool cancelled_before_begun_ = false;  // the done notification came first, cancelled
  Tag requested_tag_{this}, finish_tag_{this}, done_tag_{this};
};

PriorityListener::PriorityListener(JobServiceImpl* jobs, PriorityListenerOptions options,
                                   grpc::ServerBuilder* builder)
    : jobs_(jobs), options_(options), service_(std::make_unique<Service>()) {
  builder->RegisterService(service_.get());
  cq_ = builder->AddCompletionQueue();
}

PriorityListener::~PriorityListener() { Stop(); }

void PriorityListener::Start() {
  started_ = true;
  // One call waits at a time; each call that comes posts the next at once.
  Post();
  for (int i = 0; i < options_.threads; ++i) threads_.emplace_back([this] { Poll(); });
}

void PriorityListener::Post() {
  std::lock_guard<std::mutex> lock(post_mu_);
  if (!stopping_) new Call(this);
}

void PriorityListener::Poll() {
  void* tag = nullptr;
  bool ok = false;
  while (cq_->Next(&tag, &ok)) {
    const auto* call_tag = static_cast<const Call::Tag*>(tag);
    call_tag->call->Completed(call_tag, ok);
  }
}

void PriorityListener::Stop() {
  {
    std::lock_guard<std::mutex> lock(post_mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  if (started_) {
    // The server is shut down, so every call ends promptly (cancelled where it had not); but a
    // call still to end starts its finish operation on the queue, which must then still be up.
    std::unique_lock<std::mutex> lock(live_mu_);
    none_live_.wait(lock, [&] { return live_ == 0; });
  }
  cq_->Shutdown();
  if (!started_) {
    void* tag = nullptr;
    bool ok = false;
    while (cq_->Next(&tag, &ok)) {
    }
  }
  for (std::thread& t : threads_) t.join();
}

}  // namespace gpupipe::rpc
