// The events of a job whose Run is split over several calls (RunRequest.stripes), dealt to the
// calls' EventStreams: Accepted and Done to every call, Plan and Timing to call 0, and the
// result's chunks round-robin, chunk n (in offset order) to call n % count, which is the order
// the client reads them back in. A chunk waits for room on its own call only, so a slow call
// holds the job as a slow reader of a single call does, and no longer than the stall watch
// allows.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "server/engine/job/job_sink.h"
#include "server/rpc/event_stream.h"

namespace gpupipe::rpc {

class FanOutSink final : public engine::JobSink {
 public:
  // `streams`: one per call, by stripe index; none null.
  explicit FanOutSink(std::vector<std::shared_ptr<EventStream>> streams)
      : streams_(std::move(streams)) {}

  void OnAccepted(const engine::AcceptedInfo& info) override;
  void OnPlan(const engine::PlanDescription& plan) override;
  // The engine emits chunks one at a time, in offset order.
  absl::Status OnChunk(int64_t offset, const char* data, int64_t size) override;
  void OnTiming(const engine::JobTiming& timing) override;
  void OnDone(const absl::Status& status) override;
  // The first call whose reader is gone makes the whole job's reader gone.
  absl::Status ReaderStatus() const override;

 private:
  const std::vector<std::shared_ptr<EventStream>> streams_;
  std::atomic<uint64_t> chunks_{0};
};

}  // namespace gpupipe::rpc
