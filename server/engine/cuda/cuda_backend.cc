#include "server/engine/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <array>
#include <chrono>
#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/cuda/histogram.h"
#include "kernels/cuda/ops.h"
#include "server/engine/chunk_plan.h"
#include "server/engine/chunking.h"
#include "server/engine/copy_pool.h"
#include "server/engine/host_block_pool.h"
#include "server/engine/priority_gate.h"
#include "server/engine/cuda/graph_cache.h"
#include "server/engine/cuda/step_launcher.h"
#include "server/engine/split_row_merge.h"

namespace gpupipe::engine {
namespace {

absl::Status CudaError(cudaError_t err, const std::string& what) {
  return absl::InternalError(
      absl::StrCat(what, ": ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")"));
}

#define GPUPIPE_CUDA_RETURN(expr, what)                       \
  do {                                                        \
    if (cudaError_t err_ = (expr); err_ != cudaSuccess) {     \
      return CudaError(err_, what);                           \
    }                                                         \
  } while (0)

std::string VersionString(int v) { return absl::StrCat(v / 1000, ".", (v % 1000) / 10); }

// Chunk slots per lane: chunk k uses slot k % 3, so the copy in of chunk k+1, the kernels of
// chunk k and the copy out of chunk k-1 each have their own buffers.
constexpr int kSlots = 3;
// Pinned input buffers per lane: one more than the slots, so that the host copy of chunk k+2's
// input into pinned memory (a fourth pipeline stage, about as long as its DMA) runs while the
// three slots hold chunks k-1..k+1 in flight. With one input buffer per slot the host copy
// could only start once the slot's previous chunk had left, which left the copy engine idle
// for a host copy's time on every chunk (the engine benchmark's overlap span was 1.38 x the
// longest stage).
constexpr int kInputBuffers = kSlots + 1;
// How often a held job (HoldForHigherPriority) checks the gate again and hands over finished
// chunks: short against a held chunk's worth of work, long enough not to busy a core.
constexpr int64_t kHoldPollUs = 20;
// Device and pinned sub-allocations are aligned for every kernel's vector loads.
constexpr size_t kAlignment = 256;
// Smallest chunk slot worth running (below it per-chunk overheads dominate).
constexpr int64_t kMinSlotBytes = int64_t{64} << 10;

size_t AlignUp(size_t v) { return (v + kAlignment - 1) / kAlignment * kAlignment; }

// A lane's split-row state (chunk_plan.h, kSplitRowResize): what a row split into pieces keeps
// on the device between its pieces, outside the slots: cumsum's carry (8 bytes) or the
// histogram's counts (at most kHistogramMaxBins int64s: 512 KiB).
constexpr size_t kSplitStateBytes =
    static_cast<size_t>(kernels::cuda::kHistogramMaxBins) * sizeof(int64_t);

// One chunk's buffers and events.
struct Slot {
  std::array<void*, 2> d_buffers{};  // ping-pong between the plan's steps
  void* h_output = nullptr;          // pinned
  // Cross-stream order (cudaEventDisableTiming): copy in -> kernels -> copy out.
  cudaEvent_t h2d_done = nullptr;
  cudaEvent_t compute_done = nullptr;
  cudaEvent_t d2h_done = nullptr;
  // Timing events around each stage: h2d start/end, compute start/end, d2h start/end.
  std::array<cudaEvent_t, 6> times{};
};

// A pinned buffer that stages a chunk's input for its DMA; chunk k uses input buffer
// k % kInputBuffers. `copied` is recorded after the DMA that read it, so the buffer may be
// refilled once it has completed.
struct StagedInput {
  void* h_input = nullptr;
  cudaEvent_t copied = nullptr;  // cudaEventDisableTiming
};

// Streams and everything a job needs on them, allocated once.
struct Lane {
  cudaStream_t stream = nullptr;      // kernels
  cudaStream_t h2d_stream = nullptr;  // copies in (the compute stream without copy streams)
  cudaStream_t d2h_stream = nullptr;  // copies out
  int device_priority = 0;
  std::array<Slot, kSlots> slots;
  std::array<StagedInput, kInputBuffers> inputs;
  void* d_workspace = nullptr;
  size_t workspace_bytes = 0;
  void* d_split_state = nullptr;  // kSplitStateBytes
  cudaEvent_t job_start = nullptr;  // timing: the start of the job's first copy
  // With JobSpec::profile: one event after each kernel of a chunk (the one before its first
  // kernel is the slot's compute start).
  std::vector<cudaEvent_t> kernel_events;
  std::unique_ptr<GraphCache> graphs;

  StepBuffers buffers(int slot) const {
    StepBuffers b;
    b.d_buffers[0] = slots[slot].d_buffers[0];
    b.d_buffers[1] = slots[slot].d_buffers[1];
    b.d_workspace = d_workspace;
    b.workspace_bytes = workspace_bytes;
    return b;
  }
};

// `auto` launches a shape's first job on a lane with PDL and every later one as a cached
// graph with PDL edges. Replaying graph-pdl was the fastest mode in every case of
// bench/results/planner-h200.md (one row of 2^20: 11.8 us against 12.4 us with pdl and 14.7 us
// with stream; 1024 x 1024: 6.6 against 6.9 us; a chain of 16 softmaxes: 49.0 against 51.8
// and 66.7 us), while a capture costs a one-off shape more than it saves.
// Kernels one profiled job may launch (events are allocated per lane at start).
constexpr int kMaxProfiledKernels = 256;

class CudaBackend final : public Backend {
 public:
  ~CudaBackend() override {
    cudaSetDevice(options_.device);
    for (auto& level : lanes_) {
      for (Lane& lane : level) {
        for (cudaStream_t s : {lane.stream, lane.h2d_stream, lane.d2h_stream}) {
          if (s) cudaStreamSynchronize(s);
        }
        lane.graphs.reset();
        for (Slot& slot : lane.slots) {
          for (cudaEvent_t e : {slot.h2d_done, slot.compute_done, slot.d2h_done}) {
            if (e) cudaEventDestroy(e);
          }
          for (cudaEvent_t e : slot.times) if (e) cudaEventDestroy(e);
        }
        for (StagedInput& in : lane.inputs) {
          if (in.copied) cudaEventDestroy(in.copied);
        }
        if (lane.job_start) cudaEventDestroy(lane.job_start);
        for (cudaEvent_t e : lane.kernel_events) if (e) cudaEventDestroy(e);
        if (lane.h2d_stream && lane.h2d_stream != lane.stream) cudaStreamDestroy(lane.h2d_stream);
        if (lane.d2h_stream && lane.d2h_stream != lane.stream) cudaStreamDestroy(lane.d2h_stream);
        if (lane.stream) cudaStreamDestroy(lane.stream);
      }
    }
    for (cudaStream_t s : idle_streams_) cudaStreamDestroy(s);
    if (d_arena_) cudaFree(d_arena_);
    if (h_staging_) cudaFreeHost(h_staging_);
  }

  static absl::StatusOr<std::unique_ptr<Backend>> Create(const CudaBackendOptions& options) {
    int count = 0;
    if (cudaError_t err = cudaGetDeviceCount(&count); err != cudaSuccess) {
      cudaGetLastError();
      return absl::UnavailableError(absl::StrCat("no usable CUDA device: ", cudaGetErrorName(err),
                                                 " (", cudaGetErrorString(err), ")"));
    }
    if (options.device < 0 || options.device >= count) {
      return absl::UnavailableError(absl::StrCat("CUDA device ", options.device,
                                                 " does not exist (", count, " visible)"));
    }
    auto backend = std::unique_ptr<CudaBackend>(new CudaBackend(options));
    if (absl::Status s = backend->Init(); !s.ok()) return s;
    return std::unique_ptr<Backend>(std::move(backend));
  }

  std::string name() const override { return "cuda"; }
  std::optional<DeviceDescription> device() const override { return device_; }

  std::vector<PriorityLevel> levels() const override {
    std::vector<PriorityLevel> out;
    for (int p = 0; p < kPriorityLevels; ++p) {
      out.push_back({static_cast<Priority>(p), device_priority_[p], options_.lanes_per_level});
    }
    return out;
  }

  std::string LaneName(Priority priority, int lane) const override {
    return absl::StrCat(PriorityName(priority), "/", lane, " (device priority ",
                        device_priority_[static_cast<int>(priority)], ")");
  }

  std::vector<Staging> stagings() const override {
    return {Staging::kAuto,           Staging::kDirect,     Staging::kPipeline,
            Staging::kPipelineThread, Staging::kPrimitives, Staging::kBulk};
  }
  std::vector<LaunchMode> launch_modes() const override {
    return {LaunchMode::kAuto, LaunchMode::kStream, LaunchMode::kPdl, LaunchMode::kGraph,
            LaunchMode::kGraphPdl};
  }

  PlanDescription Describe(const JobSpec& spec, const Plan& plan) const override {
    const kernels::cuda::LaunchConfig config = ConfigFor(spec, nullptr);
    PlanDescription d = DescribePlan(plan, config);
    d.launch = spec.launch == LaunchMode::kAuto
                   ? "auto (pdl; graph-pdl once the shape repeats on a lane)"
                   : LaunchModeName(spec.launch);
    d.staging = StagingLabel(config);
    return d;
  }

  GraphCacheStats graph_cache_stats() const override {
    GraphCacheStats stats;
    for (const auto& level : lanes_) {
      for (const Lane& lane : level) lane.graphs->AddStats(&stats);
    }
    return stats;
  }

  std::string MemorySummary() const override { return memory_summary_; }

  std::shared_ptr<InputSource> NewInput(int64_t size) override {
    if (pinned_inputs_) {
      if (std::shared_ptr<InputSource> pinned = pinned_inputs_->NewInput(size)) return pinned;
    }
    return InputSource::Streaming(size);
  }

  absl::Status Run(const JobSpec& spec, const Plan& plan, InputSource& input,
                   Priority priority, int lane_index, const ChunkEmitter& emit,
                   JobTiming* timing) override {
    Lane& lane = lanes_[static_cast<int>(priority)][lane_index];
    absl::StatusOr<ChunkLayout> layout = LayoutFor(spec, plan, priority);
    if (!layout.ok()) return layout.status();
    GPUPIPE_CUDA_RETURN(cudaSetDevice(options_.device), "cudaSetDevice");
    timing->stream = LaneName(priority, lane_index);
    timing->chunks = static_cast<int>(layout->chunk_count);
    const PriorityGate::Running running = gate_.Enter(static_cast<int>(priority));
    ChunkRun run{spec, plan, *layout, input, lane, emit, timing, SplitRowCombiner(plan, *layout),
                 SplitRowResizeMerger(plan, *layout)};
    run.level = static_cast<int>(priority);
    run.config = ConfigFor(spec, lane.stream);
    timing->staging = StagingLabel(run.config);
    if (spec.profile && layout->chunk_count > 0) {
      const size_t kernels = DescribePlan(ChunkAt(plan, *layout, 0).plan, run.config).kernels.size();
      if (kernels > static_cast<size_t>(kMaxProfiledKernels)) {
        return absl::InvalidArgumentError(
            absl::StrCat("options.profile: the plan launches ", kernels,
                         " kernels per chunk; at most ", kMaxProfiledKernels, " can be timed"));
      }
    }
    absl::Status status = RunChunks(run);
    if (!status.ok()) return Abort(lane, status);
    DescribeLaunch(run);
    return absl::OkStatus();
  }

 private:
  explicit CudaBackend(const CudaBackendOptions& options)
      : options_(options), copier_(std::make_unique<CopyPool>(options.host_copy_threads)) {}

  // The job's chunks. Low-priority jobs run in chunks of at most low_priority_chunk_bytes, so
  // that a high-priority job arriving meanwhile waits behind short copies and small grids
  // (copy engines ignore stream priorities, and a kernel's resident blocks keep their SMs
  // until they finish) -- unless that cap would split rows the requested chunking keeps
  // whole, which would change the job's rounding.
  absl::StatusOr<ChunkLayout> LayoutFor(const JobSpec& spec, const Plan& plan,
                                        Priority priority) const {
    const int64_t requested = spec.chunk_bytes > 0 ? spec.chunk_bytes : slot_bytes_;
    absl::StatusOr<ChunkLayout> layout = MakeChunkLayout(spec, plan, requested, slot_bytes_);
    const int64_t cap = options_.low_priority_chunk_bytes;
    if (!layout.ok() || priority != Priority::kLow || cap <= 0 || requested <= cap) {
      return layout;
    }
    absl::StatusOr<ChunkLayout> capped = MakeChunkLayout(spec, plan, cap, slot_bytes_);
    // Either split layout splits rows (kSplitRow, kSplitRowResize).
    if (capped.ok() && (capped->mode == ChunkLayout::Mode::kRows ||
                        layout->mode != ChunkLayout::Mode::kRows)) {
      return capped;
    }
    return layout;
  }

  // The state of one job's pass through a lane's chunk pipeline.
  struct ChunkRun {
    const JobSpec& spec;
    const Plan& plan;
    const ChunkLayout& layout;
    InputSource& input;
    Lane& lane;
    const ChunkEmitter& emit;
    JobTiming* timing;
    SplitRowCombiner combiner;
    SplitRowResizeMerger merger;
    int level = 0;  // the job's priority (PriorityGate level)
    kernels::cuda::LaunchConfig config{};
    kernels::cuda::KernelProfile profile{};
    const char* input_bytes = nullptr;  // the job's whole input, valid up to the waited bytes
    std::deque<Chunk> in_flight;        // enqueued, result not yet emitted; oldest first
    int kernels = 0;
    int64_t graph_chunks = 0;
    std::string last_graph;
    LaunchMode first_launch = LaunchMode::kAuto;
  };

  // The pipeline: per chunk k in slot k % kSlots, the worker (1) waits for chunk k's input
  // bytes only (emitting every enqueued chunk first when they are not there yet) and copies
  // them into pinned input buffer k % kInputBuffers (free once chunk k - kInputBuffers' DMA
  // is done), (2) waits until the slot's previous chunk has been emitted, (3) enqueues H2D on
  // the copy-in stream, the plan's kernels
  // on the lane's stream after the H2D event, and D2H on the copy-out stream after the compute
  // event, then (4) emits every earlier chunk whose D2H has already completed. Results are
  // handed to the sink from this worker thread, never from a CUDA callback; only this lane's
  // worker waits on the GPU.
  absl::Status RunChunks(ChunkRun& run) {
    Lane& lane = run.lane;
    GPUPIPE_CUDA_RETURN(cudaEventRecord(lane.job_start, lane.h2d_stream), "cudaEventRecord");
    for (int64_t k = 0; k < run.layout.chunk_count; ++k) {
      Chunk chunk = ChunkAt(run.plan, run.layout, k);
      if (chunk.plan.max_bytes > slot_bytes_) {
        return absl::InternalError(absl::StrCat("chunk ", k, " needs ", chunk.plan.max_bytes,
                                                " bytes, over the slot's ", slot_bytes_));
      }
      const int s = static_cast<int>(k % kSlots);
      Slot& slot = lane.slots[s];
      const int64_t in_bytes = chunk.in_elements * run.layout.in_itemsize;
      const int64_t in_offset = chunk.in_offset * run.layout.in_itemsize;
      if (run.input.available() < in_offset + in_bytes) {
        // The upload is behind: hand over every chunk already enqueued before waiting for it,
        // so results keep streaming while the input arrives.
        while (!run.in_flight.empty()) {
          if (absl::Status st = FinishOldest(run); !st.ok()) return st;
        }
      }
      absl::StatusOr<const char*> bytes = run.input.WaitForBytes(in_offset + in_bytes);
      if (!bytes.ok()) return bytes.status();
      run.input_bytes = *bytes;
      // A pinned input is copied to the device straight from where it is. Pageable request
      // bytes go through pinned staging: one host copy buys a DMA at full PCIe speed instead
      // of the driver's slower staged pageable path. The copy runs while the slots' earlier
      // chunks are still in flight.
      const char* h2d_src = *bytes + in_offset;
      StagedInput* staged = nullptr;
      if (!run.input.pinned()) {
        staged = &lane.inputs[k % kInputBuffers];
        GPUPIPE_CUDA_RETURN(cudaEventSynchronize(staged->copied), "running the job");
        copier_->Copy(staged->h_input, h2d_src, static_cast<size_t>(in_bytes));
        h2d_src = static_cast<const char*>(staged->h_input);
      }
      while (run.in_flight.size() >= static_cast<size_t>(kSlots)) {
        if (absl::Status st = FinishOldest(run); !st.ok()) return st;
      }
      if (absl::Status st = HoldForHigherPriority(run); !st.ok()) return st;

      GPUPIPE_CUDA_RETURN(cudaEventRecord(slot.times[0], lane.h2d_stream), "cudaEventRecord");
      GPUPIPE_CUDA_RETURN(cudaMemcpyAsync(slot.d_buffers[0], h2d_src, in_bytes,
                                          cudaMemcpyHostToDevice, lane.h2d_stream),
                          "copying a chunk of the input to the device");
      GPUPIPE_CUDA_RETURN(cudaEventRecord(slot.times[1], lane.h2d_stream), "cudaEventRecord");
      GPUPIPE_CUDA_RETURN(cudaEventRecord(slot.h2d_done, lane.h2d_stream), "cudaEventRecord");
      if (staged) {
        GPUPIPE_CUDA_RETURN(cudaEventRecord(staged->copied, lane.h2d_stream),
                            "cudaEventRecord");
      }

      GPUPIPE_CUDA_RETURN(cudaStreamWaitEvent(lane.stream, slot.h2d_done, 0), "cudaStreamWaitEvent");
      GPUPIPE_CUDA_RETURN(cudaEventRecord(slot.times[2], lane.stream), "cudaEventRecord");
      if (absl::Status st = LaunchChunk(run, chunk, s); !st.ok()) return st;
      GPUPIPE_CUDA_RETURN(cudaEventRecord(slot.times[3], lane.stream), "cudaEventRecord");
      GPUPIPE_CUDA_RETURN(cudaEventRecord(slot.compute_done, lane.stream), "cudaEventRecord");
      if (run.spec.profile && run.layout.mode != ChunkLayout::Mode::kSplitRowResize) {
        if (absl::Status st = ReadProfile(run, chunk, s); !st.ok()) return st;
      }

      const int src = static_cast<int>(chunk.plan.steps.size() % 2);
      const int64_t out_bytes = chunk.out_elements * run.layout.out_itemsize;
      GPUPIPE_CUDA_RETURN(cudaStreamWaitEvent(lane.d2h_stream, slot.compute_done, 0),
                          "cudaStreamWaitEvent");
      GPUPIPE_CUDA_RETURN(cudaEventRecord(slot.times[4], lane.d2h_stream), "cudaEventRecord");
      GPUPIPE_CUDA_RETURN(cudaMemcpyAsync(slot.h_output, slot.d_buffers[src], out_bytes,
                                          cudaMemcpyDeviceToHost, lane.d2h_stream),
                          "copying a chunk of the output to the host");
      GPUPIPE_CUDA_RETURN(cudaEventRecord(slot.times[5], lane.d2h_stream), "cudaEventRecord");
      GPUPIPE_CUDA_RETURN(cudaEventRecord(slot.d2h_done, lane.d2h_stream), "cudaEventRecord");
      run.in_flight.push_back(std::move(chunk));

      if (absl::Status st = EmitFinished(run); !st.ok()) return st;
    }
    while (!run.in_flight.empty()) {
      if (absl::Status s = FinishOldest(run); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  // Hands over every chunk whose result is already on the host, oldest first, without waiting.
  absl::Status EmitFinished(ChunkRun& run) {
    while (!run.in_flight.empty()) {
      const Slot& oldest = run.lane.slots[run.in_flight.front().index % kSlots];
      const cudaError_t q = cudaEventQuery(oldest.d2h_done);
      if (q == cudaErrorNotReady) {
        // Not an error; keep it out of this thread's last-error state, which launchers that
        // check cudaGetLastError() would otherwise report.
        (void)cudaGetLastError();
        break;
      }
      if (q != cudaSuccess) return CudaError(q, "running the job");
      if (absl::Status st = FinishOldest(run); !st.ok()) return st;
    }
    return absl::OkStatus();
  }

  // Strict priority at chunk boundaries (PriorityGate): while a job of a higher priority runs,
  // holds this job's next chunk back, for at most options_.max_priority_hold_us, handing over
  // its finished chunks meanwhile. What it already enqueued keeps running.
  absl::Status HoldForHigherPriority(ChunkRun& run) {
    if (options_.max_priority_hold_us <= 0 || !gate_.HigherRunning(run.level)) {
      return absl::OkStatus();
    }
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::microseconds(options_.max_priority_hold_us);
    while (gate_.HigherRunning(run.level) && std::chrono::steady_clock::now() < until) {
      if (absl::Status st = EmitFinished(run); !st.ok()) return st;
      std::this_thread::sleep_for(std::chrono::microseconds(kHoldPollUs));
    }
    return absl::OkStatus();
  }

  // Enqueues chunk `chunk`'s kernels on the lane's stream, one by one or as a cached graph
  // (keyed by the slot, since a graph holds the slot's buffer addresses, and the chunk's shape).
  absl::Status LaunchChunk(ChunkRun& run, const Chunk& chunk, int s) {
    if (run.layout.mode == ChunkLayout::Mode::kSplitRowResize) {
      return LaunchSplitRowPiece(run, chunk, s);
    }
    Lane& lane = run.lane;
    const Plan& plan = chunk.plan;
    kernels::cuda::LaunchConfig config = run.config;
    LaunchMode launch = ResolveLaunch(run.spec.launch);
    const std::string topology = absl::StrCat("slot", s, ";", PlanTopologyKey(plan, config));
    if (run.spec.launch == LaunchMode::kAuto && !run.spec.profile &&
        lane.graphs->SeenBefore(topology)) {
      launch = LaunchMode::kGraphPdl;
    }
    if (chunk.index == 0) run.first_launch = launch;
    const bool use_graph =
        !run.spec.profile && (launch == LaunchMode::kGraph || launch == LaunchMode::kGraphPdl);
    const StepBuffers buffers = lane.buffers(s);
    if (run.spec.profile) {
      run.profile = kernels::cuda::KernelProfile{lane.kernel_events.data(), kMaxProfiledKernels, 0};
      config.profile = &run.profile;
    }
    if (use_graph) {
      int captured = 0;
      absl::StatusOr<GraphCache::Lookup> graph = lane.graphs->Get(
          topology, PlanParamsKey(plan), lane.stream,
          [&] { return LaunchPlan(plan, buffers, config, &captured); });
      if (!graph.ok()) return graph.status();
      run.kernels += static_cast<int>(DescribePlan(plan, config).kernels.size());
      run.last_graph = GraphOutcomeName(graph->outcome);
      ++run.graph_chunks;
      GPUPIPE_CUDA_RETURN(cudaGraphLaunch(graph->exec, lane.stream), "cudaGraphLaunch");
      return absl::OkStatus();
    }
    for (size_t i = 0; i < plan.steps.size(); ++i) {
      if (cudaError_t err = LaunchStep(plan, i, buffers, config, &run.kernels);
          err != cudaSuccess) {
        return CudaError(err, absl::StrCat("launching ", StepKindName(plan.steps[i].kind), " (",
                                           plan.steps[i].ops, ")"));
      }
    }
    return absl::OkStatus();
  }

  // Enqueues kSplitRowResize piece `chunk` (chunk_plan.h) on the lane's stream: its
  // elementwise step if any, then its resize step with the lane's split-row state, zeroed
  // for the row's first piece. Stream order keeps one row's state from the next row's: the
  // histogram's counts are copied into the slot (the piece's result) on this stream before
  // the next row's first piece zeroes them. Launched one by one (stream or PDL), never from a
  // graph: the pieces' carry, counts and windows are per-piece arguments the graph cache does
  // not key on.
  absl::Status LaunchSplitRowPiece(ChunkRun& run, const Chunk& chunk, int s) {
    Lane& lane = run.lane;
    const Plan& plan = chunk.plan;
    const PlanStep& step = plan.steps.back();
    if (chunk.index == 0) run.first_launch = run.config.pdl ? LaunchMode::kPdl : LaunchMode::kStream;
    const StepBuffers buffers = lane.buffers(s);
    const size_t last = plan.steps.size() - 1;
    if (last == 1) {
      if (cudaError_t err = LaunchStep(plan, 0, buffers, run.config, &run.kernels);
          err != cudaSuccess) {
        return CudaError(err, absl::StrCat("launching elementwise (", plan.steps[0].ops, ")"));
      }
    }
    const size_t state_bytes = step.kind == StepKind::kRowCumsum ? sizeof(int64_t)
                               : step.kind == StepKind::kRowHistogram
                                   ? static_cast<size_t>(step.op.bins) * sizeof(int64_t)
                                   : 0;
    if (state_bytes > kSplitStateBytes) {
      return absl::InternalError(absl::StrCat("split-row state of ", state_bytes,
                                              " bytes, over the lane's ", kSplitStateBytes));
    }
    if (chunk.piece == 0 && state_bytes > 0) {
      GPUPIPE_CUDA_RETURN(cudaMemsetAsync(lane.d_split_state, 0, state_bytes, lane.stream),
                          "zeroing the split-row state");
    }
    void* d_out = buffers.d_buffers[1 - last % 2];
    if (cudaError_t err = LaunchRowResizePiece(chunk, buffers.d_buffers[last % 2], d_out,
                                               lane.d_split_state, buffers, run.config,
                                               &run.kernels);
        err != cudaSuccess) {
      return CudaError(err, absl::StrCat("launching ", StepKindName(step.kind), " (", step.ops,
                                         ") on piece ", chunk.piece, " of row ", chunk.row));
    }
    if (step.kind == StepKind::kRowHistogram && chunk.last_piece) {
      GPUPIPE_CUDA_RETURN(cudaMemcpyAsync(d_out, lane.d_split_state, state_bytes,
                                          cudaMemcpyDeviceToDevice, lane.stream),
                          "copying a row's counts into its result");
    }
    return absl::OkStatus();
  }

  // Waits for the oldest in-flight chunk's copy out, reads its stage times, and emits its
  // result (or adds its partial to the row's combine).
  absl::Status FinishOldest(ChunkRun& run) {
    Lane& lane = run.lane;
    const Chunk& chunk = run.in_flight.front();
    const Slot& slot = lane.slots[chunk.index % kSlots];
    // Blocks this lane's worker thread only; gRPC threads never wait on the GPU.
    GPUPIPE_CUDA_RETURN(cudaEventSynchronize(slot.d2h_done), "running the job");
    std::array<double, 6> at{};
    for (int i = 0; i < 6; ++i) {
      float ms = 0;
      GPUPIPE_CUDA_RETURN(cudaEventElapsedTime(&ms, lane.job_start, slot.times[i]), "timing");
      at[i] = ms * 1000.0;
    }
    JobTiming* timing = run.timing;
    timing->h2d_us += at[1] - at[0];
    timing->compute_us += at[3] - at[2];
    timing->d2h_us += at[5] - at[4];
    if (run.spec.timeline) {
      const int k = static_cast<int>(chunk.index);
      timing->timeline.push_back({"h2d", "h2d", k, at[0], at[1]});
      timing->timeline.push_back({"compute", "compute", k, at[2], at[3]});
      timing->timeline.push_back({"d2h", "d2h", k, at[4], at[5]});
    }
    if (chunk.index == run.layout.chunk_count - 1) {
      timing->output_ready = std::chrono::steady_clock::now();  // the last result byte is here
    }
    bool delivered = true;
    const auto* result = static_cast<const char*>(slot.h_output);
    if (run.layout.mode == ChunkLayout::Mode::kSplitRow) {
      run.combiner.Add(chunk, result, run.input_bytes);
      if (chunk.last_piece) {
        const std::string row = run.combiner.Finish(chunk);
        delivered = run.emit(chunk.out_offset * run.layout.out_itemsize, row.data(),
                             static_cast<int64_t>(row.size()));
      }
    } else if (run.layout.mode == ChunkLayout::Mode::kSplitRowResize) {
      absl::StatusOr<SplitRowEmission> out = run.merger.Add(chunk, result);
      if (!out.ok()) return out.status();
      delivered = EmitInChunks(out->data, out->size, options_.max_chunk_bytes, run.emit,
                               out->offset);
    } else {
      delivered = EmitInChunks(result, chunk.out_elements * run.layout.out_itemsize,
                               options_.max_chunk_bytes, run.emit,
                               chunk.out_offset * run.layout.out_itemsize);
    }
    run.in_flight.pop_front();
    if (!delivered) {
      return absl::CancelledError("the client went away while the result was streamed");
    }
    return absl::OkStatus();
  }

  // What the job's timing reports as its launch mode.
  void DescribeLaunch(const ChunkRun& run) const {
    JobTiming* timing = run.timing;
    timing->kernels = run.kernels;
    timing->launch = LaunchModeName(run.first_launch);
    if (run.spec.launch == LaunchMode::kAuto) {
      if (run.graph_chunks > 0 && run.graph_chunks < run.layout.chunk_count) {
        absl::StrAppend(&timing->launch, " (auto; graph-pdl for ", run.graph_chunks, " of ",
                        run.layout.chunk_count, " chunks)");
      } else {
        absl::StrAppend(&timing->launch, " (auto)");
      }
    }
    if (run.spec.profile && run.first_launch != LaunchMode::kStream &&
        run.first_launch != LaunchMode::kPdl) {
      // Events between kernels cannot be read back from inside a graph replay.
      timing->launch = absl::StrCat(LaunchModeName(run.first_launch), " (profiled as ",
                                    run.config.pdl ? "pdl" : "stream", ")");
    }
    timing->graph = run.last_graph;
  }

  // The launch mode a job's kernels are built for: `auto` runs PDL kernels, launched one by
  // one or, once the shape repeats, from a graph (see LaunchChunk).
  static LaunchMode ResolveLaunch(LaunchMode mode) {
    return mode == LaunchMode::kAuto ? LaunchMode::kPdl : mode;
  }

  kernels::cuda::LaunchConfig ConfigFor(const JobSpec& spec, cudaStream_t stream) const {
    kernels::cuda::LaunchConfig config;
    config.stream = stream;
    config.staging = KernelStaging(spec.staging);
    config.stages = spec.stages > 0 ? spec.stages : options_.default_stages;
    const LaunchMode launch = ResolveLaunch(spec.launch);
    config.pdl = launch == LaunchMode::kPdl || launch == LaunchMode::kGraphPdl;
    config.multiprocessors = device_.multiprocessors;
    return config;
  }

  static kernels::cuda::Staging KernelStaging(Staging staging) {
    switch (staging) {
      case Staging::kDirect: return kernels::cuda::Staging::kDirect;
      case Staging::kPipeline: return kernels::cuda::Staging::kPipeline;
      case Staging::kPipelineThread: return kernels::cuda::Staging::kPipelineThread;
      case Staging::kPrimitives: return kernels::cuda::Staging::kPrimitives;
      case Staging::kBulk: return kernels::cuda::Staging::kBulk;
      case Staging::kAuto: break;
    }
    return kernels::cuda::Staging::kAuto;
  }

  // "direct", "<strategy>(stages=N)", or "auto" (each op resolves it from the kernel library's
  // tuning table; the kernel names in the plan say what it chose).
  static std::string StagingLabel(const kernels::cuda::LaunchConfig& config) {
    switch (config.staging) {
      case kernels::cuda::Staging::kDirect:
      case kernels::cuda::Staging::kAuto: return kernels::cuda::StagingName(config.staging);
      default: break;
    }
    return absl::StrCat(kernels::cuda::StagingName(config.staging), "(stages=", config.stages,
                        ")");
  }

  // Per-kernel and per-step device times of one chunk, from the events recorded after every
  // kernel; summed over the chunks (kernels of later chunks add to the entry of the same index
  // and name). Profiling waits for each chunk's kernels, so profiled jobs do not overlap.
  static absl::Status ReadProfile(ChunkRun& run, const Chunk& chunk, int s) {
    const Lane& lane = run.lane;
    const PlanDescription kernels = DescribePlan(chunk.plan, run.config);
    const int recorded = run.profile.used;
    if (recorded != static_cast<int>(kernels.kernels.size())) {
      return absl::InternalError(absl::StrCat("profiling: ", recorded, " kernel events for ",
                                              kernels.kernels.size(), " planned kernels"));
    }
    GPUPIPE_CUDA_RETURN(cudaEventSynchronize(lane.slots[s].compute_done), "running the job");
    JobTiming* timing = run.timing;
    if (timing->steps.empty()) {
      for (size_t i = 0; i < run.plan.steps.size(); ++i) {
        timing->steps.push_back({static_cast<int>(i), run.plan.steps[i].ops, 0, 0.0});
      }
    }
    for (int k = 0; k < recorded; ++k) {
      float ms = 0;
      GPUPIPE_CUDA_RETURN(cudaEventElapsedTime(&ms, k == 0 ? lane.slots[s].times[2]
                                                           : lane.kernel_events[k - 1],
                                               lane.kernel_events[k]),
                          "timing");
      const KernelDescription& d = kernels.kernels[k];
      const size_t index = static_cast<size_t>(k);
      if (index < timing->kernel_times.size() && timing->kernel_times[index].name == d.name) {
        timing->kernel_times[index].device_us += ms * 1000.0;
      } else {
        timing->kernel_times.push_back(
            {static_cast<int>(timing->kernel_times.size()), d.name, d.step, ms * 1000.0});
      }
      JobTiming::Step& step = timing->steps[static_cast<size_t>(d.step)];
      if (chunk.index == 0) ++step.kernels;
      step.device_us += ms * 1000.0;
    }
    return absl::OkStatus();
  }

  // A failed job leaves no work behind that could touch the lane's buffers under the next job.
  static absl::Status Abort(Lane& lane, absl::Status status) {
    for (cudaStream_t s : {lane.h2d_stream, lane.stream, lane.d2h_stream}) {
      cudaStreamSynchronize(s);
    }
    cudaGetLastError();
    return status;
  }

  // Sizes the chunk slots within the device memory budget and allocates the arena and the
  // pinned staging block, once.
  absl::Status AllocateMemory(int lanes, size_t workspace_bytes) {
    const int64_t budget =
        options_.device_memory_bytes > 0
            ? options_.device_memory_bytes
            : static_cast<int64_t>(options_.device_memory_fraction *
                                   static_cast<double>(device_.memory_bytes));
    const int64_t per_lane = budget / lanes;
    const int64_t lane_fixed = static_cast<int64_t>(AlignUp(workspace_bytes) + kSplitStateBytes);
    const int64_t fit = (per_lane - lane_fixed) /
                        (2 * kSlots) / static_cast<int64_t>(kAlignment) *
                        static_cast<int64_t>(kAlignment);
    slot_bytes_ = std::min<int64_t>(static_cast<int64_t>(AlignUp(options_.chunk_bytes)), fit);
    if (slot_bytes_ < kMinSlotBytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "--device-memory: ", budget, " bytes leave ", std::max<int64_t>(per_lane, 0),
          " bytes to each of ", lanes, " lanes; a lane needs at least ",
          2 * kSlots * kMinSlotBytes + lane_fixed,
          " (", kSlots, " chunk slots of 2 buffers of ", kMinSlotBytes,
          " bytes, its workspace and its split-row state)"));
    }
    const size_t slot = static_cast<size_t>(slot_bytes_);
    const size_t lane_device = 2 * kSlots * slot + static_cast<size_t>(lane_fixed);
    const size_t device_bytes = lane_device * static_cast<size_t>(lanes);
    const size_t pinned_bytes = (kInputBuffers + kSlots) * slot * static_cast<size_t>(lanes);
    GPUPIPE_CUDA_RETURN(cudaMalloc(&d_arena_, device_bytes), "allocating the device arena");
    GPUPIPE_CUDA_RETURN(cudaHostAlloc(&h_staging_, pinned_bytes, cudaHostAllocDefault),
                        "allocating pinned staging");
    if (options_.pinned_input_bytes > 0) {
      void* block = nullptr;
      GPUPIPE_CUDA_RETURN(cudaHostAlloc(&block, static_cast<size_t>(options_.pinned_input_bytes),
                                        cudaHostAllocDefault),
                          "allocating the pinned input pool (--pinned-input-mib)");
      pinned_inputs_ = std::make_shared<HostBlockPool>(
          static_cast<char*>(block), options_.pinned_input_bytes, /*pinned=*/true,
          [](char* p) { cudaFreeHost(p); });
    }
    char* d_next = static_cast<char*>(d_arena_);
    char* h_next = static_cast<char*>(h_staging_);
    for (auto& level : lanes_) {
      for (Lane& lane : level) {
        for (Slot& s : lane.slots) {
          for (void*& b : s.d_buffers) { b = d_next; d_next += slot; }
          s.h_output = h_next; h_next += slot;
        }
        for (StagedInput& in : lane.inputs) { in.h_input = h_next; h_next += slot; }
        lane.d_workspace = d_next;
        lane.workspace_bytes = workspace_bytes;
        d_next += AlignUp(workspace_bytes);
        lane.d_split_state = d_next;
        d_next += kSplitStateBytes;
      }
    }
    const auto mib = [](double b) { return b / double(1 << 20); };
    memory_summary_ = absl::StrFormat(
        "memory: device arena %.1f MiB (%d lanes x %d chunk slots x 2 buffers x %.1f MiB + "
        "%.1f MiB workspace and split-row state; budget %.1f MiB%s), pinned host staging %.1f "
        "MiB (%d lanes x (%d in + %d out) x %.1f MiB)",
        mib(device_bytes), lanes, kSlots, mib(slot), mib(lane_fixed), mib(budget),
        options_.device_memory_bytes > 0
            ? ""
            : absl::StrFormat(" = %.0f%% of %.1f GiB", options_.device_memory_fraction * 100,
                              device_.memory_bytes / double(1 << 30))
                  .c_str(),
        mib(pinned_bytes), lanes, kInputBuffers, kSlots, mib(slot));
    if (pinned_inputs_) {
      absl::StrAppend(&memory_summary_,
                      absl::StrFormat(", pinned input pool %.1f MiB",
                                      mib(static_cast<double>(options_.pinned_input_bytes))));
    }
    return absl::OkStatus();
  }

  absl::Status Init() {
    GPUPIPE_CUDA_RETURN(cudaSetDevice(options_.device), "cudaSetDevice");
    cudaDeviceProp prop{};
    GPUPIPE_CUDA_RETURN(cudaGetDeviceProperties(&prop, options_.device), "cudaGetDeviceProperties");
    int least = 0, greatest = 0;
    GPUPIPE_CUDA_RETURN(cudaDeviceGetStreamPriorityRange(&least, &greatest),
                        "cudaDeviceGetStreamPriorityRange");
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    device_.name = prop.name;
    device_.ordinal = options_.device;
    device_.multiprocessors = prop.multiProcessorCount;
    device_.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
    device_.compute_capability = absl::StrCat(prop.major, ".", prop.minor);
    device_.least_stream_priority = least;
    device_.greatest_stream_priority = greatest;
    device_.driver_version = VersionString(driver);
    device_.runtime_version = VersionString(runtime);

    // Numerically lower is higher priority; greatest <= least.
    device_priority_[static_cast<int>(Priority::kLow)] = least;
    device_priority_[static_cast<int>(Priority::kNormal)] = least + (greatest - least) / 2;
    device_priority_[static_cast<int>(Priority::kHigh)] = greatest;

    const auto new_stream = [](cudaStream_t* s, int priority) {
      return cudaStreamCreateWithPriority(s, cudaStreamNonBlocking, priority);
    };
    const auto order_event = [](cudaEvent_t* e) {
      return cudaEventCreateWithFlags(e, cudaEventDisableTiming);
    };
    for (int p = 0; p < kPriorityLevels; ++p) {
      lanes_[p].resize(options_.lanes_per_level);
      for (Lane& lane : lanes_[p]) {
        lane.device_priority = device_priority_[p];
        GPUPIPE_CUDA_RETURN(new_stream(&lane.stream, lane.device_priority),
                            "cudaStreamCreateWithPriority");
        lane.h2d_stream = lane.stream;
        lane.d2h_stream = lane.stream;
        if (options_.copy_streams) {
          // Copy streams at the lane's priority: a high-priority job's copies are not queued
          // behind a low-priority job's.
          GPUPIPE_CUDA_RETURN(new_stream(&lane.h2d_stream, lane.device_priority),
                              "cudaStreamCreateWithPriority");
          GPUPIPE_CUDA_RETURN(new_stream(&lane.d2h_stream, lane.device_priority),
                              "cudaStreamCreateWithPriority");
        }
        for (Slot& slot : lane.slots) {
          GPUPIPE_CUDA_RETURN(order_event(&slot.h2d_done), "cudaEventCreate");
          GPUPIPE_CUDA_RETURN(order_event(&slot.compute_done), "cudaEventCreate");
          GPUPIPE_CUDA_RETURN(order_event(&slot.d2h_done), "cudaEventCreate");
          for (cudaEvent_t& e : slot.times) {
            GPUPIPE_CUDA_RETURN(cudaEventCreateWithFlags(&e, cudaEventDefault), "cudaEventCreate");
          }
        }
        for (StagedInput& in : lane.inputs) {
          GPUPIPE_CUDA_RETURN(order_event(&in.copied), "cudaEventCreate");
        }
        GPUPIPE_CUDA_RETURN(cudaEventCreateWithFlags(&lane.job_start, cudaEventDefault),
                            "cudaEventCreate");
        lane.kernel_events.resize(kMaxProfiledKernels);
        for (cudaEvent_t& e : lane.kernel_events) {
          GPUPIPE_CUDA_RETURN(cudaEventCreateWithFlags(&e, cudaEventDefault), "cudaEventCreate");
        }
        lane.graphs = std::make_unique<GraphCache>(options_.graph_cache_capacity);
      }
    }
    if (absl::Status s = AllocateMemory(kPriorityLevels * options_.lanes_per_level,
                                        kernels::cuda::RowOpsWorkspaceBytes());
        !s.ok()) {
      return s;
    }
    // The pool covers every device level, also those no API level maps to yet.
    for (int level = greatest; level <= least; ++level) {
      bool mapped = false;
      for (int p : device_priority_) mapped |= (p == level);
      if (mapped) continue;
      for (int i = 0; i < options_.idle_streams_per_level; ++i) {
        cudaStream_t s = nullptr;
        GPUPIPE_CUDA_RETURN(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, level),
                            "cudaStreamCreateWithPriority");
        idle_streams_.push_back(s);
      }
    }
    return Warmup();
  }

  // Launches every kernel family once on every lane and waits, so that module loading and
  // other first-launch costs are paid at start and never by a job.
  absl::Status Warmup() {
    kernels::EwProgram program;
    program.Append({kernels::EwOpcode::kAffine, 1.0, 0.0});
    // Zeros of the widest element type; 4 rows of n / 4.
    const int64_t n = std::min<int64_t>(4096, slot_bytes_ / 8);
    for (auto& level : lanes_) {
      for (Lane& lane : level) {
        void* d_a = lane.slots[0].d_buffers[0];
        void* d_b = lane.slots[0].d_buffers[1];
        GPUPIPE_CUDA_RETURN(cudaMemsetAsync(d_a, 0, n * sizeof(double), lane.stream), "warm-up");
        // Every staging strategy of every element type's kernels (one small launch of each
        // family), so no job pays for loading them.
        using kernels::ElementType;
        for (ElementType type : {ElementType::kFloat32, ElementType::kFloat64,
                                 ElementType::kFloat16, ElementType::kInt32}) {
          const bool is_float = kernels::IsFloatingPoint(type);
          for (auto staging :
               {kernels::cuda::Staging::kDirect, kernels::cuda::Staging::kPipeline,
                kernels::cuda::Staging::kPipelineThread, kernels::cuda::Staging::kPrimitives,
                kernels::cuda::Staging::kBulk}) {
            kernels::cuda::LaunchConfig config;
            config.stream = lane.stream;
            config.staging = staging;
            config.stages = options_.default_stages;
            config.multiprocessors = device_.multiprocessors;
            GPUPIPE_CUDA_RETURN(kernels::cuda::Elementwise(d_a, type, d_b, n, program, config),
                                "warm-up");
            GPUPIPE_CUDA_RETURN(kernels::cuda::RowReduce(d_a, type, d_b, 4, n / 4,
                                                         kernels::RowReduceKind::kSum, program,
                                                         lane.d_workspace, lane.workspace_bytes,
                                                         config),
                                "warm-up");
            GPUPIPE_CUDA_RETURN(kernels::cuda::RowArgmax(d_a, type, static_cast<int64_t*>(d_b),
                                                         4, n / 4, program, lane.d_workspace,
                                                         lane.workspace_bytes, config),
                                "warm-up");
            if (!is_float) continue;
            GPUPIPE_CUDA_RETURN(kernels::cuda::RowNormalize(
                                    d_a, type, d_b, 4, n / 4, kernels::RowNormalizeKind::kStandardize,
                                    program, lane.d_workspace, lane.workspace_bytes, config),
                                "warm-up");
            GPUPIPE_CUDA_RETURN(kernels::cuda::RowSoftmax(d_a, type, d_b, 4, n / 4, program,
                                                          lane.d_workspace, lane.workspace_bytes,
                                                          config),
                                "warm-up");
          }
        }
        GPUPIPE_CUDA_RETURN(cudaStreamSynchronize(lane.stream), "warm-up");
      }
    }
    return absl::OkStatus();
  }

  CudaBackendOptions options_;
  DeviceDescription device_;
  std::array<int, kPriorityLevels> device_priority_{};
  std::array<std::vector<Lane>, kPriorityLevels> lanes_;
  std::vector<cudaStream_t> idle_streams_;
  void* d_arena_ = nullptr;    // every lane's chunk buffers and workspace
  void* h_staging_ = nullptr;  // every lane's pinned staging
  int64_t slot_bytes_ = 0;     // bytes of each chunk buffer
  std::string memory_summary_;
  std::unique_ptr<CopyPool> copier_;  // stages inputs into pinned memory
  PriorityGate gate_{kPriorityLevels};
  // Pinned memory for job inputs (NewInput); held by the sources it lends, so it outlives them.
  std::shared_ptr<HostBlockPool> pinned_inputs_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const CudaBackendOptions& options) {
  return CudaBackend::Create(options);
}

}  // namespace gpupipe::engine
