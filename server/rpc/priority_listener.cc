#include "server/rpc/priority_listener.h"

#include <grpcpp/impl/server_builder_option.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/thread_name.h"
#include "server/rpc/event_stream.h"
#include "server/rpc/status_mapping.h"

namespace gpupipe::rpc {
namespace {

// A JobService method's name as gRPC gives it to a call: "/gpupipe.v1.JobService/<method>".
std::string JobServiceMethod(absl::string_view method) {
  return absl::StrCat("/", v1::JobService::service_full_name(), "/", method);
}

}  // namespace

// The one method the listener serves, SubmitSmall, through the async API. A service of its own
// rather than the generated JobService's, whose other methods gRPC would serve on sync threads
// of its own, which a flood of them could exhaust: every other method reaches the generic
// service instead, whose calls the listener refuses on its own threads (Refusal).
class PriorityListener::Service final : public grpc::Service {
 public:
  Service() : path_(JobServiceMethod("SubmitSmall")) {
    AddMethod(new grpc::internal::RpcServiceMethod(
        path_.c_str(), grpc::internal::RpcMethod::NORMAL_RPC, /*handler=*/nullptr));
    MarkMethodAsync(0);
  }

  void RequestSubmitSmall(grpc::ServerContext* context, v1::SubmitRequest* request,
                          grpc::ServerAsyncResponseWriter<v1::CompleteJob>* responder,
                          grpc::ServerCompletionQueue* cq, void* tag) {
    RequestAsyncUnary(0, context, request, responder, cq, cq, tag);
  }

 private:
  const std::string path_;  // the method's name, which gRPC keeps a pointer to
};

namespace {

// Takes the builder's plugins away before it builds the server. They add services of their own,
// such as reflection's, a sync-API one: its calls would run on gRPC's threads, not the
// listener's, and belong on the main address anyway. (The health service is no plugin: it
// stays, on gRPC's callback threads.)
class WithoutPlugins final : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments* /*args*/) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    plugins->clear();
  }
};

}  // namespace

// One of the listener's calls, as the completion queue's tags name it.
class PriorityListener::Handler {
 public:
  struct Tag {
    Handler* handler;
  };

  virtual ~Handler() = default;
  // A tag of this call came back from the queue.
  virtual void Completed(const Tag* tag, bool ok) = 0;
};

// Counts the listener's calls alive, requested or in progress: Stop waits for none.
class PriorityListener::Live {
 public:
  explicit Live(PriorityListener* listener) : listener_(listener) {
    std::lock_guard<std::mutex> lock(listener_->live_mu_);
    ++listener_->live_;
  }
  ~Live() {
    std::lock_guard<std::mutex> lock(listener_->live_mu_);
    if (--listener_->live_ == 0) listener_->none_live_.notify_all();
  }
  Live(const Live&) = delete;
  Live& operator=(const Live&) = delete;

 private:
  PriorityListener* const listener_;
};

// A call of any other method, refused as soon as it comes, without reading its messages:
// Submit and Run with FAILED_PRECONDITION, anything else with UNIMPLEMENTED, all marked as not
// accepted. Deletes itself once its status is sent, or at once where no call came (shutdown).
class PriorityListener::Refusal final : public Handler {
 public:
  explicit Refusal(PriorityListener* listener)
      : listener_(listener), live_(listener), stream_(&context_) {
    listener_->generic_.RequestCall(&context_, &stream_, listener_->cq_.get(),
                                    listener_->cq_.get(), &requested_tag_);
  }

  void Completed(const Tag* tag, bool ok) override {
    if (tag == &requested_tag_ && ok) {
      listener_->PostRefusal();
      context_.AddTrailingMetadata(kAcceptedMetadataKey, "0");
      stream_.Finish(StatusFor(context_.method()), &finish_tag_);
      return;
    }
    delete this;  // the status went (or the client did), or no call came
  }

 private:
  static grpc::Status StatusFor(const std::string& method) {
    static const std::string* const submit = new std::string(JobServiceMethod("Submit"));
    static const std::string* const run = new std::string(JobServiceMethod("Run"));
    if (method == *submit || method == *run) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "the priority listener takes SubmitSmall only (a job whose result fits "
                          "one message): send Submit and Run to the daemon's main address");
    }
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                        absl::StrCat("the priority listener takes SubmitSmall only: send ", method,
                                     " to the daemon's main address"));
  }

  PriorityListener* const listener_;
  const Live live_;
  grpc::GenericServerContext context_;
  grpc::GenericServerAsyncReaderWriter stream_;
  Tag requested_tag_{this}, finish_tag_{this};
};

// One SubmitSmall call, from its request to its end. Deletes itself once its start (the
// requested tag's handling), its finish operation and its done notification are all over, or
// at once where the request never came (at shutdown). The three may come on different threads
// in any order: gRPC starts the done notification before it hands out the requested tag, so a
// call cancelled while it waited in gRPC's queue can be done before it is started. The
// EventStream is its writer's, as a reactor's is.
class PriorityListener::Call final : public Handler, public EventWriter {
 public:
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
                                            listener_->cq_.get(), &requested_tag_);
  }

  void Completed(const Tag* tag, bool ok) override {
    if (tag == &requested_tag_) {
      if (!ok) {  // the server is shutting down: no call came
        delete this;
        return;
      }
      listener_->PostCall();
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
    listener_->jobs_->BeginListenerCall();
    // The token first: a call without a valid one is refused for that (StartListenerCall)
    // and takes none of the places, so that callers without a token cannot fill them.
    const absl::StatusOr<std::string> caller = listener_->jobs_->Authenticate(context_);
    if (caller.ok()) {
      holds_place_ = true;
      if (++listener_->in_progress_ > listener_->options_.max_calls) {
        const absl::Status full = absl::ResourceExhaustedError(absl::StrCat(
            "the priority listener has ", listener_->options_.max_calls,
            " calls in progress; try again shortly (gpupiped --priority-max-calls)"));
        listener_->jobs_->RefuseListenerCall(&context_, full, stream_);
        return;
      }
    }
    listener_->jobs_->StartListenerCall(&context_, &request_, caller, listener_->options_.lowest,
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
    if (holds_place_) --listener_->in_progress_;
    delete this;
  }

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
  bool holds_place_ = false;  // a caller with a valid token: one of the max_calls places
  bool cancelled_before_begun_ = false;  // the done notification came first, cancelled
  Tag requested_tag_{this}, finish_tag_{this}, done_tag_{this};
};

PriorityListener::PriorityListener(JobServiceImpl* jobs, PriorityListenerOptions options,
                                   grpc::ServerBuilder* builder)
    : jobs_(jobs), options_(options), service_(std::make_unique<Service>()) {
  builder->RegisterService(service_.get());
  builder->RegisterAsyncGenericService(&generic_);
  builder->SetOption(std::make_unique<WithoutPlugins>());
  cq_ = builder->AddCompletionQueue();
}

PriorityListener::~PriorityListener() { Stop(); }

void PriorityListener::Start() {
  started_ = true;
  // One call of each kind waits at a time; each call that comes posts the next at once.
  PostCall();
  PostRefusal();
  for (int i = 0; i < options_.threads; ++i) threads_.emplace_back([this] { Poll(); });
}

void PriorityListener::PostCall() {
  std::lock_guard<std::mutex> lock(post_mu_);
  if (!stopping_) new Call(this);
}

void PriorityListener::PostRefusal() {
  std::lock_guard<std::mutex> lock(post_mu_);
  if (!stopping_) new Refusal(this);
}

void PriorityListener::Poll() {
  NameThisThread("gp-priority");
  void* tag = nullptr;
  bool ok = false;
  while (cq_->Next(&tag, &ok)) {
    const auto* handler_tag = static_cast<const Handler::Tag*>(tag);
    handler_tag->handler->Completed(handler_tag, ok);
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
