#include "server/engine/backends/cuda/cuda_lane.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "server/engine/backends/cuda/cuda_status.h"
#if GPUPIPE_FAULT_INJECTION
#include "kernels/cuda/fault_injection.h"
#endif
#include "server/engine/backends/cuda/graph_cache.h"
#include "server/engine/backends/cuda/step_launcher.h"

namespace gpupipe::engine {
namespace {

// `auto` launches a shape's first job on a lane with PDL and every later one as a cached graph
// with PDL edges: replaying graph-pdl was the fastest mode in every case of
// bench/results/planner-h200.md, while a capture costs a one-off shape more than it saves. A
// device without PDL (`pdl` false) gets the same without it: stream, then graph. Explicit PDL
// modes never reach a lane there (CudaBackend::launch_modes).
LaunchMode ResolveLaunch(LaunchMode mode, bool pdl) {
  switch (mode) {
    case LaunchMode::kAuto:
    case LaunchMode::kPdl: return pdl ? LaunchMode::kPdl : LaunchMode::kStream;
    case LaunchMode::kGraphPdl: return pdl ? LaunchMode::kGraphPdl : LaunchMode::kGraph;
    default: return mode;
  }
}

constexpr char kNeedsSm90[] = " (pdl needs sm_90 code)";
LaunchMode RepeatedShapeLaunch(bool pdl) {
  return pdl ? LaunchMode::kGraphPdl : LaunchMode::kGraph;
}

kernels::cuda::Staging KernelStaging(Staging staging) {
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

}  // namespace

kernels::cuda::LaunchConfig LaunchConfigFor(const JobSpec& spec, cudaStream_t stream,
                                            const CudaLaunchDefaults& defaults) {
  kernels::cuda::LaunchConfig config;
  config.stream = stream;
  config.staging = KernelStaging(spec.staging);
  if (config.staging == kernels::cuda::Staging::kBulk &&
      defaults.arch < kernels::cuda::kBulkCopyArch) {
    config.staging = kernels::cuda::Staging::kPipeline;
  }
  config.stages = spec.stages > 0 ? spec.stages : defaults.stages;
  const LaunchMode launch = ResolveLaunch(spec.launch, defaults.pdl());
  config.pdl = launch == LaunchMode::kPdl || launch == LaunchMode::kGraphPdl;
  config.multiprocessors = defaults.multiprocessors;
  config.arch = defaults.arch;
  config.max_smem_per_block = defaults.max_smem_per_block;
  return config;
}

std::string StagingLabel(const kernels::cuda::LaunchConfig& config, Staging requested) {
  switch (config.staging) {
    case kernels::cuda::Staging::kDirect:
    case kernels::cuda::Staging::kAuto: return kernels::cuda::StagingName(config.staging);
    default: break;
  }
  return absl::StrCat(kernels::cuda::StagingName(config.staging), "(stages=", config.stages, ")",
                      requested == Staging::kBulk && config.staging != kernels::cuda::Staging::kBulk
                          ? " (bulk needs sm_90 code)"
                          : "");
}

std::string LaunchLabel(LaunchMode requested, const CudaLaunchDefaults& defaults) {
  const LaunchMode launch = ResolveLaunch(requested, defaults.pdl());
  return absl::StrCat(LaunchModeName(launch), launch != requested ? kNeedsSm90 : "");
}

CudaLane::CudaLane(Lane& lane, std::string name, int64_t slot_bytes, CopyPool& copier,
                   FaultPlan* faults, CudaLaunchDefaults defaults)
    : lane_(lane),
      name_(std::move(name)),
      slot_bytes_(slot_bytes),
      copier_(copier),
      faults_(faults),
      defaults_(defaults) {
  for (size_t i = 0; i < kernel_events_.size(); ++i) {
    kernel_events_[i] = lane_.kernel_events[i].get();
  }
}

absl::Status CudaLane::Begin(const JobSpec& spec, const Plan& plan, const ChunkLayout& layout,
                             const JobInterrupt& /*interrupt*/, JobTiming* timing) {
  spec_ = &spec;
  layout_ = &layout;
  timing_ = timing;
  config_ = LaunchConfigFor(spec, lane_.stream(), defaults_);
  kernels_ = 0;
  graph_chunks_ = 0;
  last_graph_.clear();
  first_launch_ = LaunchMode::kAuto;
  mapped_ = false;
  staging_busy_until_ = {};
  job_number_ = faults_ != nullptr ? ++faults_->jobs : 0;
  timing->stream = name_;
  timing->staging = StagingLabel(config_, spec.staging);
  GPUPIPE_CUDA_RETURN(cudaSetDevice(defaults_.device), "cudaSetDevice");
  if (spec.profile && layout.chunk_count > 0) {
    const size_t kernels = DescribePlan(ChunkAt(plan, layout, 0).plan, config_).kernels.size();
    if (kernels > static_cast<size_t>(kMaxProfiledKernels)) {
      return absl::InvalidArgumentError(
          absl::StrCat("options.profile: the plan launches ", kernels,
                       " kernels per chunk; at most ", kMaxProfiledKernels, " can be timed"));
    }
  }
  one_stream_ = layout.chunk_count == 1 && !spec.profile &&
                layout.mode != ChunkLayout::Mode::kSplitRowResize;
  // A one-stream job's clock starts at its copy in (Enqueue).
  if (!one_stream_) {
    GPUPIPE_CUDA_RETURN(cudaEventRecord(lane_.job_start.get(), lane_.h2d_stream()),
                        "cudaEventRecord");
  }
  return absl::OkStatus();
}

// A staging copy this small takes less time on the lane's own thread than handing it to a
// helper and waiting for it would (two thread wake-ups); a small job is one such chunk, with
// nothing for its copy to overlap.
constexpr size_t kInlineStagingBytes = size_t{64} << 10;

absl::Status CudaLane::Stage(const Chunk& chunk, const InputChunk& input) {
  if (chunk.plan.max_bytes > slot_bytes_) {
    return absl::InternalError(absl::StrCat("chunk ", chunk.index, " needs ",
                                            chunk.plan.max_bytes, " bytes, over the slot's ",
                                            slot_bytes_));
  }
  StagedChunk& next = staging_[chunk.index % 2];
  next.source = input.data;
  next.staged = nullptr;
  if (input.pinned || input.device) return absl::OkStatus();
  // Pageable bytes go through pinned staging: one host copy buys a DMA at full PCIe speed
  // instead of the driver's slower staged pageable path. The copy runs on the pool's threads
  // while this thread enqueues the chunk before and hands over finished ones.
  StagedInput& staged = lane_.inputs[chunk.index % kInputBuffers];
  // A job starts on a lane whose earlier work has finished (Finish waited for every chunk's
  // copy out, which follows its copy in, or for the kernels that read the buffer mapped; End
  // waits for the streams of a failed job), so only a buffer this job already used may still
  // be read by a DMA.
  if (chunk.index >= kInputBuffers) {
    GPUPIPE_CUDA_RETURN(cudaEventSynchronize(staged.copied.get()), "running the job");
  }
  next.copy_start = std::chrono::steady_clock::now();
  const size_t bytes = static_cast<size_t>(input.range.size());
  if (bytes <= kInlineStagingBytes) {
    std::memcpy(staged.h_input, input.data, bytes);
    timing_->host_staging_us += std::chrono::duration<double, std::micro>(
                                    std::chrono::steady_clock::now() - next.copy_start)
                                    .count();
  } else {
    copier_.CopyAsync(staged.h_input, input.data, bytes, &next.copy);
    next.copying = true;
  }
  next.source = static_cast<const char*>(staged.h_input);
  next.staged = &staged;
  return absl::OkStatus();
}

void CudaLane::WaitForStaging(StagedChunk& chunk) {
  if (!chunk.copying) return;
  chunk.copy.Wait();
  chunk.copying = false;
  // Staging copies of consecutive chunks overlap: count the time any of them ran, once.
  const auto from = std::max(chunk.copy_start, staging_busy_until_);
  if (chunk.copy.finished() > from) {
    timing_->host_staging_us +=
        std::chrono::duration<double, std::micro>(chunk.copy.finished() - from).count();
    staging_busy_until_ = chunk.copy.finished();
  }
}

absl::Status CudaLane::Enqueue(const Chunk& chunk) {
  const int s = static_cast<int>(chunk.index % kSlots);
  Slot& slot = lane_.slots[s];
  StagedChunk& input = staging_[chunk.index % 2];
  WaitForStaging(input);
#if GPUPIPE_FAULT_INJECTION
  if (chunk.index == 0 && faults_ != nullptr && faults_->kind != FaultPlan::Kind::kNone &&
      job_number_ == faults_->at_job) {
    GPUPIPE_CUDA_RETURN(kernels::cuda::LaunchFault(faults_->kind == FaultPlan::Kind::kSticky
                                                       ? kernels::cuda::FaultKind::kStickyIllegalAddress
                                                       : kernels::cuda::FaultKind::kLaunchConfiguration,
                                                   lane_.stream()),
                        "launching the injected fault");
  }
#endif
  if (one_stream_) return EnqueueOnOneStream(chunk, s, input);
  const cudaStream_t h2d = lane_.h2d_stream();
  const cudaStream_t compute = lane_.stream();
  const cudaStream_t d2h = lane_.d2h_stream();
  const int64_t in_bytes = chunk.in_elements * layout_->in_itemsize;
  GPUPIPE_CUDA_RETURN(cudaEventRecord(slot.times[0].get(), h2d), "cudaEventRecord");
  // cudaMemcpyDefault: the source is page-locked host memory or, for a device region, device
  // memory (unified addressing tells them apart).
  GPUPIPE_CUDA_RETURN(
      cudaMemcpyAsync(slot.d_buffers[0], input.source, in_bytes, cudaMemcpyDefault, h2d),
      "copying a chunk of the input to the device");
  GPUPIPE_CUDA_RETURN(cudaEventRecord(slot.times[1].get(), h2d), "cudaEventRecord");
  GPUPIPE_CUDA_RETURN(cudaEventRecord(slot.h2d_done.get(), h2d), "cudaEventRecord");
  if (input.staged != nullptr) {
    GPUPIPE_CUDA_RETURN(cudaEventRecord(input.staged->copied.get(), h2d), "cudaEventRecord");
  }

  GPUPIPE_CUDA_RETURN(cudaStreamWaitEvent(compute, slot.h2d_done.get(), 0),
                      "cudaStreamWaitEvent");
  GPUPIPE_CUDA_RETURN(cudaEventRecord(slot.times[2].get(), compute), "cudaEventRecord");
  if (absl::Status st = LaunchChunk(chunk, s); !st.ok()) return st;
  GPUPIPE_CUDA_RETURN(cudaEventRecord(slot.times[3].get(), compute), "cudaEventRecord");
  GPUPIPE_CUDA_RETURN(cudaEventRecord(slot.compute_done.get(), compute), "cudaEventRecord");

  const int src = static_cast<int>(chunk.plan.steps.size() % 2);
  const int64_t out_bytes = chunk.out_elements * layout_->out_itemsize;
  GPUPIPE_CUDA_RETURN(cudaStreamWaitEvent(d2h, slot.compute_done.get(), 0),
                      "cudaStreamWaitEvent");
  GPUPIPE_CUDA_RETURN(cudaEventRecord(slot.times[4].get(), d2h), "cudaEventRecord");
  char* out = OutputOf(chunk, s);
  GPUPIPE_CUDA_RETURN(cudaMemcpyAsync(out, slot.d_buffers[src], out_bytes, cudaMemcpyDefault, d2h),
                      "copying a chunk of the output to the host");
  GPUPIPE_CUDA_RETURN(cudaEventRecord(slot.times[5].get(), d2h), "cudaEventRecord");
  GPUPIPE_CUDA_RETURN(cudaEventRecord(slot.d2h_done.get(), d2h), "cudaEventRecord");
  return absl::OkStatus();
}

char* CudaLane::OutputOf(const Chunk& chunk, int s) {
  // Results of whole rows go straight to their place in a registered output region (host or
  // device); split rows are combined on the host first, from the slot's buffer.
  char* out = static_cast<char*>(lane_.slots[s].h_output);
  if (direct_output_ != nullptr && layout_->mode == ChunkLayout::Mode::kRows) {
    out = direct_output_ + chunk.out_offset * layout_->out_itemsize;
  }
  results_[static_cast<size_t>(s)] = out;
  return out;
}

absl::Status CudaLane::EnqueueOnOneStream(const Chunk& chunk, int s, const StagedChunk& input) {
  // One chunk has nothing to overlap its copies with, so they go on the compute stream in
  // order with the kernels: no cross-stream events, and each stage boundary is one timing
  // event (times[0] copy in starts, [2] kernels start, [3] kernels end, [5] copy out ends).
  Slot& slot = lane_.slots[s];
  const cudaStream_t stream = lane_.stream();
  const int64_t in_bytes = chunk.in_elements * layout_->in_itemsize;
  const int64_t out_bytes = chunk.out_elements * layout_->out_itemsize;
  const int src = static_cast<int>(chunk.plan.steps.size() % 2);
  char* out = OutputOf(chunk, s);
  if (out == slot.h_output && RunsMapped(chunk, input)) return EnqueueMapped(chunk, s, input);
  // Copies, timing events and kernels, in stream order; `record_flags` is
  // cudaEventRecordExternal under capture, so the events stay readable after each replay.
  auto whole_job = [&](unsigned record_flags,
                       absl::FunctionRef<absl::Status()> kernels) -> absl::Status {
    GPUPIPE_CUDA_RETURN(cudaEventRecordWithFlags(slot.times[0].get(), stream, record_flags),
                        "cudaEventRecord");
    GPUPIPE_CUDA_RETURN(
        cudaMemcpyAsync(slot.d_buffers[0], input.source, in_bytes, cudaMemcpyDefault, stream),
        "copying a chunk of the input to the device");
    GPUPIPE_CUDA_RETURN(cudaEventRecordWithFlags(slot.times[2].get(), stream, record_flags),
                        "cudaEventRecord");
    if (absl::Status st = kernels(); !st.ok()) return st;
    GPUPIPE_CUDA_RETURN(cudaEventRecordWithFlags(slot.times[3].get(), stream, record_flags),
                        "cudaEventRecord");
    GPUPIPE_CUDA_RETURN(
        cudaMemcpyAsync(out, slot.d_buffers[src], out_bytes, cudaMemcpyDefault, stream),
        "copying a chunk of the output to the host");
    GPUPIPE_CUDA_RETURN(cudaEventRecordWithFlags(slot.times[5].get(), stream, record_flags),
                        "cudaEventRecord");
    return absl::OkStatus();
  };
  // A repeated job whose copies start and end in the lane's own host buffers (its input staged
  // into pinned memory, its result into the slot's) replays all of it as one graph: one
  // runtime call instead of seven, the host time a small job is made of.
  if (input.staged != nullptr && out == slot.h_output && !spec_->profile &&
      layout_->mode != ChunkLayout::Mode::kSplitRowResize) {
    const LaunchChoice choice = ChooseLaunch(chunk.plan, s, "job;", config_);
    if (choice.graph) {
      absl::StatusOr<bool> replayed = LaunchCachedGraph(choice, chunk.plan, [&](int* kernels) {
        return whole_job(cudaEventRecordExternal, [&] {
          if (cudaError_t err = LaunchPlan(chunk.plan, lane_.buffers(s), config_, kernels);
              err != cudaSuccess) {
            return CudaError(err, "launching the plan");
          }
          return absl::OkStatus();
        });
      });
      if (!replayed.ok()) return replayed.status();
      if (*replayed) return absl::OkStatus();
      // The job's work enqueued fine but did not make a graph with its copies: it runs as a
      // job whose copies stay outside (a sticky device error fails it there too).
    }
  }
  return whole_job(cudaEventRecordDefault, [&] { return LaunchChunk(chunk, s); });
}

bool CudaLane::RunsMapped(const Chunk& chunk, const StagedChunk& input) const {
  const int64_t limit = defaults_.mapped_io_max_bytes;
  return one_stream_ && limit > 0 && input.staged != nullptr &&
         input.staged->d_input_mapped != nullptr &&
         chunk.in_elements * layout_->in_itemsize <= limit &&
         chunk.out_elements * layout_->out_itemsize <= limit &&
         spec_->staging == Staging::kAuto && RunsOnMappedHostMemory(chunk.plan);
}

absl::Status CudaLane::EnqueueMapped(const Chunk& chunk, int s, const StagedChunk& input) {
  Slot& slot = lane_.slots[s];
  const cudaStream_t stream = lane_.stream();
  // Plain loads and stores: the one way every kernel of such a plan reads and writes host
  // memory (RunsOnMappedHostMemory).
  kernels::cuda::LaunchConfig config = config_;
  config.staging = kernels::cuda::Staging::kDirect;
  StepBuffers buffers = lane_.buffers(s);
  buffers.input = input.staged->d_input_mapped;
  buffers.output = slot.d_output_mapped;
  mapped_ = true;
  timing_->staging = "direct (mapped host memory)";
  // The kernels between the two timing events, in stream order; `record_flags` is
  // cudaEventRecordExternal under capture, so the events stay readable after each replay.
  const auto run = [&](unsigned record_flags, int* kernels) -> absl::Status {
    GPUPIPE_CUDA_RETURN(cudaEventRecordWithFlags(slot.times[2].get(), stream, record_flags),
                        "cudaEventRecord");
    if (cudaError_t err = LaunchPlan(chunk.plan, buffers, config, kernels); err != cudaSuccess) {
      return CudaError(err, "launching the plan");
    }
    GPUPIPE_CUDA_RETURN(cudaEventRecordWithFlags(slot.times[3].get(), stream, record_flags),
                        "cudaEventRecord");
    return absl::OkStatus();
  };
  LaunchChoice choice = ChooseLaunch(chunk.plan, s, "mapped;", config);
  // With blocking-sync events (--cuda-wait block) a replay of these few nodes costs more than
  // the three calls it replaces (bench/service/experiments/launch_shapes.cu), so `auto` keeps
  // launching them one by one there; an explicit graph mode still gets its graph.
  if (defaults_.blocking_events && spec_->launch == LaunchMode::kAuto) choice.graph = false;
  if (choice.graph) {
    absl::StatusOr<bool> replayed = LaunchCachedGraph(
        choice, chunk.plan, [&](int* kernels) { return run(cudaEventRecordExternal, kernels); });
    if (!replayed.ok()) return replayed.status();
    if (*replayed) return absl::OkStatus();
    // The kernels enqueued fine but did not make a graph: they run one by one.
  }
  first_launch_ = config.pdl ? LaunchMode::kPdl : LaunchMode::kStream;
  return run(cudaEventRecordDefault, &kernels_);
}

cudaEvent_t CudaLane::DoneEvent(const Slot& slot) const {
  if (mapped_) return slot.times[3].get();
  return one_stream_ ? slot.times[5].get() : slot.d2h_done.get();
}

CudaLane::LaunchChoice CudaLane::ChooseLaunch(const Plan& plan, int s, const char* scope,
                                              const kernels::cuda::LaunchConfig& config) {
  LaunchChoice choice;
  choice.mode = ResolveLaunch(spec_->launch, defaults_.pdl());
  choice.topology = absl::StrCat(scope, "slot", s, ";", PlanTopologyKey(plan, config));
  if (spec_->launch == LaunchMode::kAuto && !spec_->profile &&
      lane_.graphs->SeenBefore(choice.topology)) {
    choice.mode = RepeatedShapeLaunch(defaults_.pdl());
  }
  choice.graph = !spec_->profile &&
                 (choice.mode == LaunchMode::kGraph || choice.mode == LaunchMode::kGraphPdl);
  return choice;
}

absl::StatusOr<bool> CudaLane::LaunchCachedGraph(
    const LaunchChoice& choice, const Plan& plan,
    absl::FunctionRef<absl::Status(int* kernels)> enqueue) {
  const cudaStream_t stream = lane_.stream();
  absl::Status captured = absl::OkStatus();
  absl::StatusOr<GraphCache::Lookup> graph =
      lane_.graphs->Get(choice.topology, PlanParamsKey(plan), stream, [&](int* kernels) {
        captured = enqueue(kernels);
        return captured.ok() ? cudaSuccess : cudaErrorStreamCaptureInvalidated;
      });
  if (!captured.ok()) return captured;
  if (!graph.ok()) {
    // Keep the failed capture's error out of the one-by-one launches that follow.
    (void)cudaGetLastError();
    return false;
  }
  first_launch_ = choice.mode;
  NoteGraph(*graph);
  GPUPIPE_CUDA_RETURN(cudaGraphLaunch(graph->exec, stream), "cudaGraphLaunch");
  return true;
}

void CudaLane::NoteGraph(const GraphCache::Lookup& graph) {
  kernels_ += graph.kernels;
  last_graph_ = GraphOutcomeName(graph.outcome);
  ++graph_chunks_;
}

absl::Status CudaLane::LaunchChunk(const Chunk& chunk, int s) {
  if (layout_->mode == ChunkLayout::Mode::kSplitRowResize) return LaunchSplitRowPiece(chunk, s);
  const Plan& plan = chunk.plan;
  kernels::cuda::LaunchConfig config = config_;
  const LaunchChoice choice = ChooseLaunch(plan, s, "", config);
  if (chunk.index == 0) first_launch_ = choice.mode;
  const StepBuffers buffers = lane_.buffers(s);
  if (spec_->profile) {
    profile_ = kernels::cuda::KernelProfile{kernel_events_.data(), kMaxProfiledKernels, 0};
    config.profile = &profile_;
  }
  if (choice.graph) {
    absl::StatusOr<GraphCache::Lookup> graph =
        lane_.graphs->Get(choice.topology, PlanParamsKey(plan), lane_.stream(),
                          [&](int* kernels) { return LaunchPlan(plan, buffers, config, kernels); });
    if (!graph.ok()) return graph.status();
    NoteGraph(*graph);
    GPUPIPE_CUDA_RETURN(cudaGraphLaunch(graph->exec, lane_.stream()), "cudaGraphLaunch");
    return absl::OkStatus();
  }
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    if (cudaError_t err = LaunchStep(plan, i, buffers, config, &kernels_); err != cudaSuccess) {
      return CudaError(err, absl::StrCat("launching ", StepKindName(plan.steps[i].kind), " (",
                                         plan.steps[i].ops, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status CudaLane::LaunchSplitRowPiece(const Chunk& chunk, int s) {
  const Plan& plan = chunk.plan;
  const PlanStep& step = plan.steps.back();
  const cudaStream_t stream = lane_.stream();
  if (chunk.index == 0) first_launch_ = config_.pdl ? LaunchMode::kPdl : LaunchMode::kStream;
  const StepBuffers buffers = lane_.buffers(s);
  const size_t last = plan.steps.size() - 1;
  if (last == 1) {
    if (cudaError_t err = LaunchStep(plan, 0, buffers, config_, &kernels_); err != cudaSuccess) {
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
  // Stream order keeps one row's state from the next row's: the histogram's counts are copied
  // into the slot (the piece's result) on this stream before the next row's first piece
  // zeroes them.
  if (chunk.piece == 0 && state_bytes > 0) {
    GPUPIPE_CUDA_RETURN(cudaMemsetAsync(lane_.d_split_state, 0, state_bytes, stream),
                        "zeroing the split-row state");
  }
  void* d_out = buffers.d_buffers[1 - last % 2];
  if (cudaError_t err = LaunchRowResizePiece(chunk, buffers.d_buffers[last % 2], d_out,
                                             lane_.d_split_state, buffers, config_, &kernels_);
      err != cudaSuccess) {
    return CudaError(err, absl::StrCat("launching ", StepKindName(step.kind), " (", step.ops,
                                       ") on piece ", chunk.piece, " of row ", chunk.row));
  }
  if (step.kind == StepKind::kRowHistogram && chunk.last_piece) {
    GPUPIPE_CUDA_RETURN(cudaMemcpyAsync(d_out, lane_.d_split_state, state_bytes,
                                        cudaMemcpyDeviceToDevice, stream),
                        "copying a row's counts into its result");
  }
  return absl::OkStatus();
}

// Per-kernel and per-step device times of one chunk, from the events recorded after every
// kernel; summed over the chunks (kernels of later chunks add to the entry of the same index
// and name). Profiling waits for each chunk's kernels, so profiled jobs do not overlap.
absl::Status CudaLane::Profile(const Chunk& chunk, JobTiming* timing) {
  if (layout_->mode == ChunkLayout::Mode::kSplitRowResize) return absl::OkStatus();
  const int s = static_cast<int>(chunk.index % kSlots);
  const PlanDescription kernels = DescribePlan(chunk.plan, config_);
  const int recorded = profile_.used;
  if (recorded != static_cast<int>(kernels.kernels.size())) {
    return absl::InternalError(absl::StrCat("profiling: ", recorded, " kernel events for ",
                                            kernels.kernels.size(), " planned kernels"));
  }
  GPUPIPE_CUDA_RETURN(cudaEventSynchronize(lane_.slots[s].compute_done.get()),
                      "running the job");
  if (timing->steps.empty()) {
    for (size_t i = 0; i < chunk.plan.steps.size(); ++i) {
      timing->steps.push_back({static_cast<int>(i), chunk.plan.steps[i].ops, 0, 0.0});
    }
  }
  for (int k = 0; k < recorded; ++k) {
    float ms = 0;
    GPUPIPE_CUDA_RETURN(
        cudaEventElapsedTime(&ms, k == 0 ? lane_.slots[s].times[2].get() : kernel_events_[k - 1],
                             kernel_events_[k]),
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

absl::StatusOr<bool> CudaLane::Ready(const Chunk& chunk) {
  const cudaError_t q = cudaEventQuery(DoneEvent(lane_.slots[chunk.index % kSlots]));
  if (q == cudaErrorNotReady) {
    // Not an error; keep it out of this thread's last-error state, which launchers that check
    // cudaGetLastError() would otherwise report.
    (void)cudaGetLastError();
    return false;
  }
  if (q != cudaSuccess) return CudaError(q, "running the job");
  return true;
}

absl::StatusOr<const char*> CudaLane::Finish(const Chunk& chunk, JobTiming* timing) {
  const Slot& slot = lane_.slots[chunk.index % kSlots];
  GPUPIPE_CUDA_RETURN(cudaEventSynchronize(DoneEvent(slot)), "running the job");
  std::array<double, 6> at{};
  if (mapped_) {
    // No copies: the kernels' interval is the whole of it.
    float ms = 0;
    GPUPIPE_CUDA_RETURN(
        cudaEventElapsedTime(&ms, slot.times[2].get(), slot.times[3].get()), "timing");
    at[3] = at[4] = at[5] = ms * 1000.0;
  } else if (one_stream_) {
    // Stages follow each other on one stream: three intervals give all six times.
    const std::array<int, 4> marks = {0, 2, 3, 5};
    for (size_t i = 1; i < marks.size(); ++i) {
      float ms = 0;
      GPUPIPE_CUDA_RETURN(cudaEventElapsedTime(&ms, slot.times[marks[i - 1]].get(),
                                               slot.times[marks[i]].get()),
                          "timing");
      at[marks[i]] = at[marks[i - 1]] + ms * 1000.0;
    }
    at[1] = at[2];
    at[4] = at[3];
  } else {
    for (int i = 0; i < 6; ++i) {
      float ms = 0;
      GPUPIPE_CUDA_RETURN(cudaEventElapsedTime(&ms, lane_.job_start.get(), slot.times[i].get()),
                          "timing");
      at[i] = ms * 1000.0;
    }
  }
  timing->h2d_us += at[1] - at[0];
  timing->compute_us += at[3] - at[2];
  timing->d2h_us += at[5] - at[4];
  if (spec_->timeline) {
    const int k = static_cast<int>(chunk.index);
    timing->timeline.push_back({"h2d", "h2d", k, at[0], at[1]});
    timing->timeline.push_back({"compute", "compute", k, at[2], at[3]});
    timing->timeline.push_back({"d2h", "d2h", k, at[4], at[5]});
  }
  return results_[static_cast<size_t>(chunk.index % kSlots)];
}

void CudaLane::End(const absl::Status& status, JobTiming* timing) {
  direct_output_ = nullptr;
  // A chunk staged and never enqueued (the job failed) may still be copying from its input,
  // which the job releases next.
  for (StagedChunk& chunk : staging_) WaitForStaging(chunk);
  if (!status.ok()) {
    // No work may be left that could touch the lane's buffers under the next job.
    for (cudaStream_t s : {lane_.h2d_stream(), lane_.stream(), lane_.d2h_stream()}) {
      cudaStreamSynchronize(s);
    }
    cudaGetLastError();
    return;
  }
  DescribeLaunch(timing);
}

void CudaLane::DescribeLaunch(JobTiming* timing) const {
  timing->kernels = kernels_;
  timing->launch = LaunchModeName(first_launch_);
  if (spec_->launch != LaunchMode::kAuto &&
      ResolveLaunch(spec_->launch, defaults_.pdl()) != spec_->launch) {
    absl::StrAppend(&timing->launch, kNeedsSm90);
  }
  if (spec_->launch == LaunchMode::kAuto) {
    if (graph_chunks_ > 0 && graph_chunks_ < layout_->chunk_count) {
      absl::StrAppend(&timing->launch, " (auto; ",
                      LaunchModeName(RepeatedShapeLaunch(defaults_.pdl())), " for ", graph_chunks_,
                      " of ", layout_->chunk_count, " chunks)");
    } else {
      absl::StrAppend(&timing->launch, " (auto)");
    }
  }
  if (spec_->profile && first_launch_ != LaunchMode::kStream &&
      first_launch_ != LaunchMode::kPdl) {
    // Events between kernels cannot be read back from inside a graph replay.
    timing->launch = absl::StrCat(LaunchModeName(first_launch_), " (profiled as ",
                                  config_.pdl ? "pdl" : "stream", ")");
  }
  timing->graph = last_graph_;
}

}  // namespace gpupipe::engine
