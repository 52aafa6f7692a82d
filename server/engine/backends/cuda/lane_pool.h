// The CUDA backend's lanes and everything they run in, allocated once at start and owned
// through RAII handles: per lane a compute stream and two copy streams at the lane's priority,
// three chunk slots (two device buffers, a pinned output buffer and their events each), four
// pinned input staging buffers, a workspace, the split-row state, profiling events and a graph
// cache. Every lane's device buffers are sub-ranges of one device arena (one cudaMalloc) and
// every pinned buffer of one pinned block (one cudaHostAlloc, mapped into the device's address
// space where LanePoolOptions::map_staging asks, so that kernels may read the staged inputs
// and write the outputs there themselves), so running a job allocates nothing.
//
// Thread safety: the pool is immutable after Create; a lane is used by one job at a time.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cuda/histogram.h"
#include "server/engine/backends/cuda/graph_cache.h"
#include "server/engine/backends/cuda/step_launcher.h"
#include "server/engine/job/types.h"

namespace gpupipe::engine {

struct StreamDestroyer {
  void operator()(cudaStream_t s) const { cudaStreamDestroy(s); }
};
struct EventDestroyer {
  void operator()(cudaEvent_t e) const { cudaEventDestroy(e); }
};
struct DeviceFreer {
  void operator()(void* p) const { cudaFree(p); }
};
struct PinnedFreer {
  void operator()(void* p) const { cudaFreeHost(p); }
};
using UniqueStream = std::unique_ptr<CUstream_st, StreamDestroyer>;
using UniqueEvent = std::unique_ptr<CUevent_st, EventDestroyer>;
using DeviceMemory = std::unique_ptr<void, DeviceFreer>;
using PinnedMemory = std::unique_ptr<void, PinnedFreer>;

// Chunk slots per lane: chunk k uses slot k % 3, so the copy in of chunk k+1, the kernels of
// chunk k and the copy out of chunk k-1 each have their own buffers.
inline constexpr int kSlots = 3;
// Pinned input staging buffers per lane: one more than the slots, so that the host copy of
// chunk k+2's pageable input (a pipeline stage of its own, about as long as its DMA) runs while
// the three slots hold chunks k-1..k+1 in flight.
inline constexpr int kInputBuffers = kSlots + 1;
// Kernels one profiled chunk may launch (their events are allocated per lane at start).
inline constexpr int kMaxProfiledKernels = 256;
// What a row split into pieces keeps on the device between its pieces: cumsum's carry or the
// histogram's counts (at most kHistogramMaxBins int64s).
inline constexpr size_t kSplitStateBytes =
    static_cast<size_t>(kernels::cuda::kHistogramMaxBins) * sizeof(int64_t);

// One chunk's buffers and events.
struct Slot {
  std::array<void*, 2> d_buffers{};  // ping-pong between the plan's steps
  void* h_output = nullptr;          // pinned
  void* d_output_mapped = nullptr;   // h_output as the device addresses it; null unmapped
  // Cross-stream order (cudaEventDisableTiming): copy in -> kernels -> copy out.
  UniqueEvent h2d_done;
  UniqueEvent compute_done;
  UniqueEvent d2h_done;
  // Timing events around each stage: h2d start/end, compute start/end, d2h start/end.
  std::array<UniqueEvent, 6> times;
};

// A pinned buffer that stages a pageable chunk input for its DMA; chunk k uses buffer
// k % kInputBuffers. `copied` is recorded after the DMA that read it.
struct StagedInput {
  void* h_input = nullptr;
  const void* d_input_mapped = nullptr;  // h_input as the device addresses it; null unmapped
  UniqueEvent copied;  // cudaEventDisableTiming
};

struct Lane {
  int device_priority = 0;
  UniqueStream compute;  // kernels
  // Copy streams at the lane's priority, so a high-priority job's copies are not queued behind
  // a low-priority job's; none without copy streams (copies then run on `compute`).
  UniqueStream copy_in;
  UniqueStream copy_out;
  std::array<Slot, kSlots> slots;
  std::array<StagedInput, kInputBuffers> inputs;
  void* d_workspace = nullptr;
  size_t workspace_bytes = 0;
  void* d_split_state = nullptr;  // kSplitStateBytes
  UniqueEvent job_start;          // timing: the start of the job's first copy
  // With JobSpec::profile: one event after each kernel of a chunk (the one before its first
  // kernel is the slot's compute start).
  std::array<UniqueEvent, kMaxProfiledKernels> kernel_events;
  std::unique_ptr<GraphCache> graphs;

  cudaStream_t stream() const { return compute.get(); }
  cudaStream_t h2d_stream() const { return copy_in ? copy_in.get() : compute.get(); }
  cudaStream_t d2h_stream() const { return copy_out ? copy_out.get() : compute.get(); }
  StepBuffers buffers(int slot) const;
};

struct LanePoolOptions {
  int device = 0;
  // The device stream priority of each API priority level.
  std::array<int, kPriorityLevels> device_priority{};
  int lanes_per_level = 2;
  bool copy_streams = true;
  // Bytes of each chunk buffer wanted, and the device memory all lanes may take: slots shrink
  // to fit the budget (down to a minimum that is still worth running).
  int64_t chunk_bytes = int64_t{16} << 20;
  int64_t device_budget_bytes = 0;
  // The memory line names how the budget was given ("budget 2048.0 MiB = 25% of 140.0 GiB").
  std::string budget_description;
  size_t workspace_bytes = 0;
  int graph_cache_capacity = 32;
  // Events a thread waits on put it to sleep until the device interrupts instead of polling
  // (CudaWait::kBlock): cudaEventSynchronize busy-waits on an event created without
  // cudaEventBlockingSync, as the runtime API documents.
  bool blocking_sync = false;
  // Map the pinned block into the device's address space (Slot::d_output_mapped,
  // StagedInput::d_input_mapped), for jobs whose kernels read and write it themselves.
  bool map_staging = false;
};

class LanePool {
 public:
  // RESOURCE_EXHAUSTED when the budget leaves a lane too little; INTERNAL on CUDA errors.
  static absl::StatusOr<std::unique_ptr<LanePool>> Create(const LanePoolOptions& options);
  // Waits for every lane's streams; the handles then free the rest.
  ~LanePool();
  LanePool(const LanePool&) = delete;
  LanePool& operator=(const LanePool&) = delete;

  Lane& lane(Priority priority, int index) {
    return lanes_[static_cast<size_t>(priority)][static_cast<size_t>(index)];
  }
  const std::array<std::vector<Lane>, kPriorityLevels>& lanes() const { return lanes_; }
  // Bytes of each chunk buffer.
  int64_t slot_bytes() const { return slot_bytes_; }
  // One line saying what was allocated, for the daemon's start-up log.
  const std::string& memory_summary() const { return memory_summary_; }

 private:
  LanePool() = default;
  absl::Status CreateLane(Lane& lane, int device_priority, const LanePoolOptions& options);
  absl::Status Allocate(const LanePoolOptions& options);

  // Declared before the lanes, so that they outlive the lanes' streams.
  DeviceMemory arena_;    // every lane's chunk buffers, workspace and split-row state
  PinnedMemory staging_;  // every lane's pinned staging and output buffers
  std::array<std::vector<Lane>, kPriorityLevels> lanes_;
  int64_t slot_bytes_ = 0;
  std::string memory_summary_;
};

}  // namespace gpupipe::engine
