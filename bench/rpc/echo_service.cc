#include "echo_service.h"

#include <deque>
#include <mutex>
#include <string>

namespace gpupipe::bench {
namespace {

// Echoed messages waiting for their write, in duplex mode: reading pauses beyond this, the same
// bound as the job service's event queue (JobServiceOptions::max_queued_events).
constexpr size_t kWindow = 4;
// Chunk size of the sequential mode's answer: the job service's result chunks.
constexpr size_t kChunkBytes = (size_t{1} << 20) - 4096;

class EchoReactor final : public grpc::ServerBidiReactor<v1::RunRequest, v1::JobEvent> {
 public:
  EchoReactor() {
    reading_ = true;
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    reading_ = false;
    if (!ok) {
      read_closed_ = true;
    } else if (request_.has_spec()) {
      sequential_ = request_.spec().client_tag() == "sequential";
      int64_t bytes = 4;
      for (int64_t d : request_.spec().input().shape()) bytes *= d;
      if (sequential_) stored_.reserve(static_cast<size_t>(bytes));
    } else if (sequential_) {
      stored_.append(request_.data());
    } else {
      v1::JobEvent event;
      event.mutable_chunk()->set_offset(offset_);
      offset_ += static_cast<int64_t>(request_.data().size());
      *event.mutable_chunk()->mutable_data() = std::move(*request_.mutable_data());
      queue_.push_back(std::move(event));
    }
    MaybeRead();
    MaybeWrite();
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    writing_ = false;
    if (!ok) {
      broken_ = true;
    }
    MaybeRead();
    MaybeWrite();
  }

  void OnDone() override { delete this; }

 private:
  void MaybeRead() {
    if (reading_ || read_closed_ || finished_ || broken_) return;
    if (!sequential_ && queue_.size() >= kWindow) return;
    reading_ = true;
    request_.Clear();
    StartRead(&request_);
  }

  void MaybeWrite() {
    if (writing_ || finished_) return;
    if (broken_) {
      finished_ = true;
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "write failed"));
      return;
    }
    if (!queue_.empty()) {
      in_flight_ = std::move(queue_.front());
      queue_.pop_front();
      writing_ = true;
      StartWrite(&in_flight_);
      return;
    }
    if (sequential_ && read_closed_ && sent_ < stored_.size()) {
      const size_t n = std::min(kChunkBytes, stored_.size() - sent_);
      in_flight_.Clear();
      in_flight_.mutable_chunk()->set_offset(static_cast<int64_t>(sent_));
      in_flight_.mutable_chunk()->set_data(stored_.data() + sent_, n);
      sent_ += n;
      writing_ = true;
      StartWrite(&in_flight_);
      return;
    }
    if (read_closed_ && !reading_) {
      finished_ = true;
      Finish(grpc::Status::OK);
    }
  }

  // Reactions may run concurrently (a read and a write completing); recursive in case gRPC
  // runs a reaction inline from a Start call.
  std::recursive_mutex mu_;
  v1::RunRequest request_;
  v1::JobEvent in_flight_;
  std::deque<v1::JobEvent> queue_;
  std::string stored_;
  size_t sent_ = 0;
  int64_t offset_ = 0;
  bool sequential_ = false;
  bool reading_ = false;
  bool writing_ = false;
  bool read_closed_ = false;
  bool finished_ = false;
  bool broken_ = false;
};

}  // namespace

grpc::ServerBidiReactor<v1::RunRequest, v1::JobEvent>* EchoService::Stream(
    grpc::CallbackServerContext* /*context*/) {
  return new EchoReactor();
}

}  // namespace gpupipe::bench
