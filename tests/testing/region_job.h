// Runs an engine job whose input and output go through registered regions (shared-memory
// objects this process creates), for tests that compare it with the inline path.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>

#include "client/shared_memory.h"
#include "server/engine/engine.h"
#include "tests/testing/recording_sink.h"

namespace gpupipe::testing {

// A shared-memory object registered with `engine` for `client`; unregistered and removed at
// the end of its scope.
class TestRegion {
 public:
  TestRegion(engine::Engine& engine, int64_t bytes, std::string client = "")
      : engine_(engine), client_(std::move(client)) {
    absl::StatusOr<std::unique_ptr<client::SharedMemory>> shm =
        client::SharedMemory::Create(bytes, "gpupipe-test");
    EXPECT_TRUE(shm.ok()) << shm.status();
    if (!shm.ok()) return;
    shm_ = *std::move(shm);
    absl::StatusOr<engine::RegionInfo> info = engine.RegisterRegion(client_, shm_->name(), 0);
    EXPECT_TRUE(info.ok()) << info.status();
    if (info.ok()) info_ = *info;
  }
  ~TestRegion() {
    if (!info_.id.empty()) engine_.UnregisterRegion(client_, info_.id).IgnoreError();
  }

  const std::string& id() const { return info_.id; }
  const engine::RegionInfo& info() const { return info_; }
  client::SharedMemory& shm() { return *shm_; }
  char* data() { return shm_->data(); }

 private:
  engine::Engine& engine_;
  std::string client_;
  std::unique_ptr<client::SharedMemory> shm_;
  engine::RegionInfo info_;
};

struct RegionJobResult {
  absl::Status status;
  std::string output;
  std::shared_ptr<RecordingSink> sink;
};

// Bytes of the output that the job's Accepted event announced.
inline int64_t OutputBytes(const RecordingSink& sink) {
  int64_t n = 1;
  for (int64_t d : sink.info().output_shape) n *= d;
  return n * engine::DTypeSize(sink.info().output_dtype);
}

// Runs `spec` on `input` the usual way (inline bytes in, result chunks out): what a region job
// must match. `status` is the refusal or the job's end.
inline RegionJobResult RunInline(engine::Engine& engine, const engine::JobSpec& spec,
                                 const std::string& input) {
  RegionJobResult result;
  result.sink = std::make_shared<RecordingSink>();
  std::string bytes = input;
  result.status = engine.Submit(spec, bytes, result.sink);
  if (!result.status.ok()) return result;
  EXPECT_TRUE(result.sink->WaitDone(std::chrono::seconds(120)));
  result.status = result.sink->status();
  result.output = result.sink->output();
  return result;
}

// Runs `spec` on `input` with the input in one region and the output in another (each where
// asked), and returns the output bytes (from the region or from the chunks).
inline RegionJobResult RunThroughRegions(engine::Engine& engine, const engine::JobSpec& spec,
                                         const std::string& input, bool input_region,
                                         bool output_region, int64_t output_bytes) {
  RegionJobResult result;
  result.sink = std::make_shared<RecordingSink>();
  TestRegion in(engine, static_cast<int64_t>(input.size()) + 64, spec.client);
  TestRegion out(engine, output_bytes + 128, spec.client);
  engine::JobRegions regions;
  std::string inline_input;
  if (input_region) {
    // At an odd offset, so that nothing relies on alignment.
    std::memcpy(in.data() + 3, input.data(), input.size());
    regions.input = engine::RegionSlice{in.id(), 3, 0};
  } else {
    inline_input = input;
  }
  if (output_region) regions.output = engine::RegionSlice{out.id(), 5, 0};
  result.status = engine.Submit(spec, inline_input, regions, result.sink);
  if (!result.status.ok()) return result;
  EXPECT_TRUE(result.sink->WaitDone(std::chrono::seconds(60)));
  result.status = result.sink->status();
  result.output = output_region ? std::string(out.data() + 5, static_cast<size_t>(output_bytes))
                                : result.sink->output();
  if (output_region) EXPECT_EQ(result.sink->chunks(), 0);
  return result;
}

}  // namespace gpupipe::testing
