// A job's input read from, and its output written into, a registered host region
// (region.h): the byte source and sink the chunk pipeline uses instead of message bytes.
//
// Input: where the region is page-locked or on the device and nothing on the host reads the
// input (the lane copies each chunk straight from the region), chunks point into the region.
// Otherwise each chunk is first copied out (Region::CopyOut: GuardedCopy, or the device's
// copy) into memory of the job's own (at most kCopiedChunks at once), so that a client
// shrinking its object fails the job, not the daemon.
//
// Output: the sink writes each result chunk into the region (Region::CopyIn), and offers a
// page-locked or device region to the lane as the place to write results directly
// (JobSink::DirectOutput), in which case the chunks it receives are already in place. The
// job's other events go to the inner sink; no result chunk does.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "server/engine/job/job_sink.h"
#include "server/engine/pipeline/input_source.h"
#include "server/engine/regions/region.h"

namespace gpupipe::engine {

// `length` bytes of `region` from `offset` (checked by the caller). `direct`: chunks may
// point into the region (it is page-locked or on the device, and only a device reads it).
std::shared_ptr<InputSource> RegionInput(std::shared_ptr<Region> region, int64_t offset,
                                         int64_t length, bool direct);

class RegionOutputSink final : public JobSink {
 public:
  // The output's bytes go to `region` from `offset` (the caller checked that they fit).
  RegionOutputSink(std::shared_ptr<JobSink> inner, std::shared_ptr<Region> region, int64_t offset)
      : inner_(std::move(inner)), region_(std::move(region)), offset_(offset) {}

  void OnAccepted(const AcceptedInfo& info) override { inner_->OnAccepted(info); }
  void OnPlan(const PlanDescription& plan) override { inner_->OnPlan(plan); }
  absl::Status OnChunk(int64_t offset, const char* data, int64_t size) override;
  void OnTiming(const JobTiming& timing) override { inner_->OnTiming(timing); }
  void OnDone(const absl::Status& status) override { inner_->OnDone(status); }
  absl::Status ReaderStatus() const override { return inner_->ReaderStatus(); }
  char* DirectOutput() const override {
    return region_->pinned() || region_->device() ? region_->data() + offset_ : nullptr;
  }

 private:
  const std::shared_ptr<JobSink> inner_;
  const std::shared_ptr<Region> region_;
  const int64_t offset_;
};

}  // namespace gpupipe::engine
