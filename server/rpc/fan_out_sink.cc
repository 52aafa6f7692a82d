#include "server/rpc/fan_out_sink.h"

namespace gpupipe::rpc {

void FanOutSink::OnAccepted(const engine::AcceptedInfo& info) {
  for (const std::shared_ptr<EventStream>& stream : streams_) stream->OnAccepted(info);
}

void FanOutSink::OnPlan(const engine::PlanDescription& plan) { streams_.front()->OnPlan(plan); }

absl::Status FanOutSink::OnChunk(int64_t offset, const char* data, int64_t size) {
  const uint64_t n = chunks_.fetch_add(1, std::memory_order_relaxed);
  return streams_[n % streams_.size()]->OnChunk(offset, data, size);
}

void FanOutSink::OnTiming(const engine::JobTiming& timing) { streams_.front()->OnTiming(timing); }

void FanOutSink::OnDone(const absl::Status& status) {
  for (const std::shared_ptr<EventStream>& stream : streams_) stream->OnDone(status);
}

absl::Status FanOutSink::ReaderStatus() const {
  for (const std::shared_ptr<EventStream>& stream : streams_) {
    if (absl::Status gone = stream->ReaderStatus(); !gone.ok()) return gone;
  }
  return absl::OkStatus();
}

}  // namespace gpupipe::rpc
