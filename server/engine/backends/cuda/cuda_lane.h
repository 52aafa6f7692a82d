// One CUDA lane's per-chunk verbs (LaneExecutor): chunk k runs in slot k % kSlots of its lane
// (lane_pool.h). Stage starts copying a pageable chunk input into pinned staging buffer
// k % kInputBuffers on the copy pool's threads (a pinned input is copied to the device straight
// from where it is), so the copy runs while the pipeline enqueues the chunk before it;
// Enqueue waits for that copy, then puts the copy in on the lane's copy-in stream, the plan's
// kernels (one by one, or as a cached graph) on its compute stream after the copy-in event,
// and the copy out on its copy-out stream after the compute event, so the copy in of chunk k+1,
// the kernels of chunk k and the copy out of chunk k-1 run at once. A job of one chunk has
// nothing to overlap and runs all three on the compute stream, with half the runtime calls; a
// small one (CudaLaunchDefaults::mapped_io_max_bytes) runs no copies at all: its kernels read
// the pinned staging buffer and write the slot's pinned output over the host link, which costs
// less than a copy's fixed latency at those sizes.
// Finish waits for the chunk's copy out on the thread that runs the job and reads its stage
// times from timing events.
//
// Thread safety: used by one job's worker thread at a time.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <atomic>
#include <chrono>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "kernels/cuda/device_caps.h"
#include "kernels/cuda/ops.h"
#include "server/engine/backends/backend.h"
#include "server/engine/backends/cuda/copy_pool.h"
#include "server/engine/backends/cuda/graph_cache.h"
#include "server/engine/backends/cuda/lane_pool.h"

namespace gpupipe::engine {

// How the backend launches a job's kernels, shared by the lanes and the plan description.
// Test builds only (CudaBackendOptions::inject_fault): which job of the backend's, counted
// over every lane, launches a device fault, and which.
struct FaultPlan {
  enum class Kind { kNone, kSticky, kLaunch };
  Kind kind = Kind::kNone;
  int64_t at_job = 0;
  std::atomic<int64_t> jobs{0};  // jobs begun so far
};

struct CudaLaunchDefaults {
  int device = 0;
  int multiprocessors = 0;
  int stages = 2;  // staged strategies' buffers when the job does not ask
  // The device's kernels::cuda::DeviceCaps: the level that chooses the kernels' paths, and the
  // shared memory a block may opt in to.
  int arch = 0;
  int max_smem_per_block = 0;
  // The largest one-chunk job (bytes in and bytes out, each) whose kernels read its staged
  // input and write its result in the lane's mapped host buffers themselves, with no copies
  // (CudaBackendOptions::mapped_io_max_bytes); 0: every job copies.
  int64_t mapped_io_max_bytes = 0;
  // The lanes' events put a waiting thread to sleep (CudaWait::kBlock).
  bool blocking_events = false;
  bool pdl() const { return arch >= kernels::cuda::kPdlArch; }
};

// The kernel library's launch configuration for `spec` on `stream`. `auto` launches build PDL
// kernels (launched one by one or, once the shape repeats on a lane, from a graph). On a
// device without sm_90 code (defaults.arch below 90) PDL modes launch without PDL (pdl as
// stream, graph-pdl as graph) and bulk staging stages with `pipeline`, the nearest strategy it
// has: the same results, reported by the labels below.
kernels::cuda::LaunchConfig LaunchConfigFor(const JobSpec& spec, cudaStream_t stream,
                                            const CudaLaunchDefaults& defaults);
// "direct", "<strategy>(stages=N)", or "auto" (each op resolves it from the kernel library's
// tuning table; the kernel names in the plan say what it chose), with "(bulk needs sm_90
// code)" where `requested` was bulk and `config` stages otherwise.
std::string StagingLabel(const kernels::cuda::LaunchConfig& config, Staging requested);
// The name of the mode `requested` (not auto) launches as, with "(pdl needs sm_90 code)"
// where that is not `requested`.
std::string LaunchLabel(LaunchMode requested, const CudaLaunchDefaults& defaults);

class CudaLane final : public LaneExecutor {
 public:
  // `lane` and `copier` must outlive this executor; `name` is the lane's name for timing.
  // `faults` (may be null) is shared by the backend's lanes.
  CudaLane(Lane& lane, std::string name, int64_t slot_bytes, CopyPool& copier, FaultPlan* faults,
           CudaLaunchDefaults defaults);

  int window() const override { return kSlots; }
  absl::Status Begin(const JobSpec& spec, const Plan& plan, const ChunkLayout& layout,
                     const JobInterrupt& interrupt, JobTiming* timing) override;
  absl::Status Stage(const Chunk& chunk, const InputChunk& input) override;
  absl::Status Enqueue(const Chunk& chunk) override;
  absl::Status Profile(const Chunk& chunk, JobTiming* timing) override;
  absl::StatusOr<bool> Ready(const Chunk& chunk) override;
  absl::StatusOr<const char*> Finish(const Chunk& chunk, JobTiming* timing) override;
  void SetDirectOutput(char* output) override { direct_output_ = output; }
  void End(const absl::Status& status, JobTiming* timing) override;

 private:
  // How a chunk of `plan` in slot `slot` launches: the mode, and whether as a cached graph
  // under `topology` (the slot, since a graph holds the slot's buffer addresses, and the
  // plan's shape, prefixed by `scope`: what else the graph holds). `auto` turns to a graph
  // once the topology was seen before on this lane.
  struct LaunchChoice {
    LaunchMode mode = LaunchMode::kAuto;
    bool graph = false;
    std::string topology;
  };
  LaunchChoice ChooseLaunch(const Plan& plan, int slot, const char* scope,
                           const kernels::cuda::LaunchConfig& config);
  // Replays the lane's cached graph of `choice.topology` and `plan`'s parameters on the compute
  // stream, capturing `enqueue` (which puts the work on it and counts its kernels) the first
  // time: true once launched; false where the work did not make a graph, and the caller
  // enqueues it as it is; an error of `enqueue` itself or of the launch.
  absl::StatusOr<bool> LaunchCachedGraph(const LaunchChoice& choice, const Plan& plan,
                                         absl::FunctionRef<absl::Status(int* kernels)> enqueue);
  // Counts a replayed graph's kernels and outcome for the job's timing.
  void NoteGraph(const GraphCache::Lookup& graph);
  // Enqueues the chunk's kernels on the compute stream, one by one or as a cached graph.
  absl::Status LaunchChunk(const Chunk& chunk, int slot);
  // kSplitRowResize piece: its elementwise step if any, then its resize step with the lane's
  // split-row state. Always launched one by one: the pieces' carry, counts and windows are
  // per-piece arguments the graph cache does not key on.
  absl::Status LaunchSplitRowPiece(const Chunk& chunk, int slot);
  // What the job's timing reports as its launch mode.
  void DescribeLaunch(JobTiming* timing) const;
  struct StagedChunk;
  // Waits for a staged chunk's host copy, if it has one in flight, and counts its time.
  void WaitForStaging(StagedChunk& chunk);
  // A one-chunk job's copy in, kernels and copy out, all on the compute stream; a repeated one
  // whose copies use only the lane's own host buffers, as one cached graph.
  absl::Status EnqueueOnOneStream(const Chunk& chunk, int slot, const StagedChunk& input);
  // Whether a one-stream chunk whose result is bound for its slot's pinned buffer runs on
  // mapped host memory: small enough, its input staged in the lane's pinned buffer (not a
  // region's), a plan whose kernels may (RunsOnMappedHostMemory) and a staging the job left to
  // the lane (auto: a job that names one gets it on device memory, as it asked).
  bool RunsMapped(const Chunk& chunk, const StagedChunk& input) const;
  // A one-stream chunk's kernels on mapped host memory, between two timing events (times[2],
  // times[3]); a repeated one as one cached graph, except with blocking events under `auto`.
  absl::Status EnqueueMapped(const Chunk& chunk, int slot, const StagedChunk& input);
  // Where slot `slot`'s result of `chunk` lands; noted for Finish.
  char* OutputOf(const Chunk& chunk, int slot);
  // The event that ends a slot's chunk: d2h_done after its copy out, or for a one-stream job
  // its last timing event (times[5] after its copy out, times[3] after its kernels where it
  // ran on mapped memory).
  cudaEvent_t DoneEvent(const Slot& slot) const;

  Lane& lane_;
  const std::string name_;
  const int64_t slot_bytes_;
  CopyPool& copier_;
  FaultPlan* const faults_;
  const CudaLaunchDefaults defaults_;
  // The lane's profiling events, as the kernel library takes them.
  std::array<cudaEvent_t, kMaxProfiledKernels> kernel_events_{};

  // The job on the lane.
  const JobSpec* spec_ = nullptr;
  const ChunkLayout* layout_ = nullptr;
  JobTiming* timing_ = nullptr;
  kernels::cuda::LaunchConfig config_{};
  kernels::cuda::KernelProfile profile_{};
  // A staged chunk, from Stage to Enqueue; chunk k uses entry k % 2, since chunk k+1 may be
  // staged before chunk k is enqueued.
  struct StagedChunk {
    const char* source = nullptr;   // the bytes its copy in reads
    StagedInput* staged = nullptr;  // the staging buffer it fills, if any
    bool copying = false;           // `copy` is in flight
    CopyPool::Pending copy;
    std::chrono::steady_clock::time_point copy_start;
  };
  std::array<StagedChunk, 2> staging_;
  // When the last staging copy counted so far finished (JobTiming::host_staging_us).
  std::chrono::steady_clock::time_point staging_busy_until_;
  // Page-locked memory for the whole output (a registered region), or null: a kRows chunk's
  // copy out goes straight to its place there instead of the slot's buffer.
  char* direct_output_ = nullptr;
  // Where each slot's chunk result lands (its buffer or its place in direct_output_).
  std::array<const char*, kSlots> results_{};
  int kernels_ = 0;
  int64_t job_number_ = 0;  // this job's number among the backend's (FaultPlan)
  int64_t graph_chunks_ = 0;
  std::string last_graph_;
  LaunchMode first_launch_ = LaunchMode::kAuto;
  // The job is one chunk, not profiled: it runs on the compute stream alone.
  bool one_stream_ = false;
  // That chunk runs on mapped host memory (EnqueueMapped): no copies, and only the kernels'
  // two timing events.
  bool mapped_ = false;
};

}  // namespace gpupipe::engine
