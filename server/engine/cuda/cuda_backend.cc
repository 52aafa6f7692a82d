#include "server/engine/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/ops.h"
#include "server/engine/chunking.h"
#include "server/engine/cuda/graph_cache.h"
#include "server/engine/cuda/step_launcher.h"

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

// One stream plus everything a job needs on it, allocated once.
struct Lane {
  cudaStream_t stream = nullptr;
  int device_priority = 0;
  std::array<void*, 2> d_buffers{};
  void* d_workspace = nullptr;
  size_t workspace_bytes = 0;
  void* h_input = nullptr;   // pinned
  void* h_output = nullptr;  // pinned
  // Timing events: before H2D, after H2D, after the kernels, after D2H.
  std::array<cudaEvent_t, 4> events{};
  // With JobSpec::profile: one event after each kernel (the one before the first kernel is
  // events[1], the end of the H2D copy).
  std::vector<cudaEvent_t> kernel_events;
  std::unique_ptr<GraphCache> graphs;

  StepBuffers buffers() const {
    StepBuffers b;
    b.d_buffers[0] = d_buffers[0];
    b.d_buffers[1] = d_buffers[1];
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
        if (lane.stream) cudaStreamSynchronize(lane.stream);
        lane.graphs.reset();
        for (cudaEvent_t e : lane.events) if (e) cudaEventDestroy(e);
        for (cudaEvent_t e : lane.kernel_events) if (e) cudaEventDestroy(e);
        for (void* p : lane.d_buffers) if (p) cudaFree(p);
        if (lane.d_workspace) cudaFree(lane.d_workspace);
        if (lane.h_input) cudaFreeHost(lane.h_input);
        if (lane.h_output) cudaFreeHost(lane.h_output);
        if (lane.stream) cudaStreamDestroy(lane.stream);
      }
    }
    for (cudaStream_t s : idle_streams_) cudaStreamDestroy(s);
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
    return {Staging::kAuto, Staging::kDirect, Staging::kPipeline};
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

  absl::Status Run(const JobSpec& spec, const Plan& plan, InputSource& input,
                   Priority priority, int lane_index, const ChunkEmitter& emit,
                   JobTiming* timing) override {
    Lane& lane = lanes_[static_cast<int>(priority)][lane_index];
    if (plan.max_bytes > options_.max_input_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the job needs ", plan.max_bytes, " bytes for an intermediate result, over this "
          "server's buffers of ", options_.max_input_bytes, " bytes"));
    }
    GPUPIPE_CUDA_RETURN(cudaSetDevice(options_.device), "cudaSetDevice");
    LaunchMode launch = ResolveLaunch(spec.launch);
    kernels::cuda::LaunchConfig config = ConfigFor(spec, lane.stream);
    kernels::cuda::KernelProfile profile{lane.kernel_events.data(), kMaxProfiledKernels, 0};
    PlanDescription profiled;
    if (spec.profile) {
      profiled = DescribePlan(plan, config);
      if (profiled.kernels.size() > static_cast<size_t>(kMaxProfiledKernels)) {
        return absl::InvalidArgumentError(
            absl::StrCat("options.profile: the plan launches ", profiled.kernels.size(),
                         " kernels; at most ", kMaxProfiledKernels, " can be timed"));
      }
      config.profile = &profile;
    }
    if (spec.launch == LaunchMode::kAuto && !spec.profile &&
        lane.graphs->SeenBefore(PlanTopologyKey(plan, config))) {
      launch = LaunchMode::kGraphPdl;
    }
    const bool use_graph =
        !spec.profile && (launch == LaunchMode::kGraph || launch == LaunchMode::kGraphPdl);
    timing->stream = LaneName(priority, lane_index);
    timing->staging = StagingLabel(config);
    timing->launch = LaunchModeName(launch);
    if (spec.launch == LaunchMode::kAuto) absl::StrAppend(&timing->launch, " (auto)");
    if (spec.profile && launch != LaunchMode::kStream && launch != LaunchMode::kPdl) {
      // Events between kernels cannot be read back from inside a graph replay.
      timing->launch = absl::StrCat(LaunchModeName(launch), " (profiled as ",
                                    config.pdl ? "pdl" : "stream", ")");
    }

    // Pageable request bytes go through the lane's pinned buffer: one host copy buys a DMA at
    // full PCIe speed instead of the driver's slower staged pageable path.
    absl::StatusOr<const char*> input_bytes = input.WaitForBytes(input.size());
    if (!input_bytes.ok()) return input_bytes.status();
    std::memcpy(lane.h_input, *input_bytes, static_cast<size_t>(input.size()));
    GPUPIPE_CUDA_RETURN(cudaEventRecord(lane.events[0], lane.stream), "cudaEventRecord");
    GPUPIPE_CUDA_RETURN(cudaMemcpyAsync(lane.d_buffers[0], lane.h_input, input.size(),
                                        cudaMemcpyHostToDevice, lane.stream),
                        "copying the input to the device");
    GPUPIPE_CUDA_RETURN(cudaEventRecord(lane.events[1], lane.stream), "cudaEventRecord");

    const StepBuffers buffers = lane.buffers();
    int kernel_count = 0;
    if (use_graph) {
      absl::StatusOr<GraphCache::Lookup> graph = lane.graphs->Get(
          PlanTopologyKey(plan, config), PlanParamsKey(plan), lane.stream,
          [&] { return LaunchPlan(plan, buffers, config, &kernel_count); });
      if (!graph.ok()) return Abort(lane, graph.status());
      if (graph->outcome == GraphCache::Outcome::kHit) {
        kernel_count = static_cast<int>(DescribePlan(plan, config).kernels.size());
      }
      timing->graph = GraphOutcomeName(graph->outcome);
      GPUPIPE_CUDA_RETURN(cudaGraphLaunch(graph->exec, lane.stream), "cudaGraphLaunch");
    } else {
      for (size_t i = 0; i < plan.steps.size(); ++i) {
        if (cudaError_t err = LaunchStep(plan, i, buffers, config, &kernel_count);
            err != cudaSuccess) {
          return Abort(lane, CudaError(err, absl::StrCat("launching ",
                                                         StepKindName(plan.steps[i].kind), " (",
                                                         plan.steps[i].ops, ")")));
        }
      }
    }
    const int src = static_cast<int>(plan.steps.size() % 2);
    GPUPIPE_CUDA_RETURN(cudaEventRecord(lane.events[2], lane.stream), "cudaEventRecord");
    const int64_t output_bytes = plan.output_elements * DTypeSize(plan.output_dtype);
    GPUPIPE_CUDA_RETURN(cudaMemcpyAsync(lane.h_output, lane.d_buffers[src], output_bytes,
                                        cudaMemcpyDeviceToHost, lane.stream),
                        "copying the output to the host");
    GPUPIPE_CUDA_RETURN(cudaEventRecord(lane.events[3], lane.stream), "cudaEventRecord");
    // Blocks this lane's worker thread only; gRPC threads never wait on the GPU.
    GPUPIPE_CUDA_RETURN(cudaEventSynchronize(lane.events[3]), "running the job");

    float ms = 0;
    GPUPIPE_CUDA_RETURN(cudaEventElapsedTime(&ms, lane.events[0], lane.events[1]), "timing");
    timing->h2d_us = ms * 1000.0;
    GPUPIPE_CUDA_RETURN(cudaEventElapsedTime(&ms, lane.events[1], lane.events[2]), "timing");
    timing->compute_us = ms * 1000.0;
    GPUPIPE_CUDA_RETURN(cudaEventElapsedTime(&ms, lane.events[2], lane.events[3]), "timing");
    timing->d2h_us = ms * 1000.0;
    timing->kernels = kernel_count;
    if (spec.profile) {
      if (absl::Status s = ReadProfile(lane, plan, profiled, profile.used, timing); !s.ok()) {
        return s;
      }
    }
    timing->output_ready = std::chrono::steady_clock::now();

    if (!EmitInChunks(static_cast<const char*>(lane.h_output), output_bytes,
                      options_.max_chunk_bytes, emit)) {
      return absl::CancelledError("the client went away while the result was streamed");
    }
    return absl::OkStatus();
  }

 private:
  explicit CudaBackend(const CudaBackendOptions& options) : options_(options) {}

  // The launch mode a job's kernels are built for: `auto` runs PDL kernels, launched one by
  // one or, once the shape repeats, from a graph (see Run).
  static LaunchMode ResolveLaunch(LaunchMode mode) {
    return mode == LaunchMode::kAuto ? LaunchMode::kPdl : mode;
  }

  kernels::cuda::LaunchConfig ConfigFor(const JobSpec& spec, cudaStream_t stream) const {
    kernels::cuda::LaunchConfig config;
    config.stream = stream;
    config.staging = spec.staging == Staging::kDirect ? kernels::cuda::Staging::kDirect
                                                      : kernels::cuda::Staging::kPipeline;
    config.stages = spec.stages > 0 ? spec.stages : options_.default_stages;
    const LaunchMode launch = ResolveLaunch(spec.launch);
    config.pdl = launch == LaunchMode::kPdl || launch == LaunchMode::kGraphPdl;
    config.multiprocessors = device_.multiprocessors;
    return config;
  }

  static std::string StagingLabel(const kernels::cuda::LaunchConfig& config) {
    return config.staging == kernels::cuda::Staging::kDirect
               ? "direct"
               : absl::StrCat("pipeline(stages=", config.stages, ")");
  }

  // Per-kernel and per-step device times from the events recorded after every kernel.
  static absl::Status ReadProfile(const Lane& lane, const Plan& plan,
                                  const PlanDescription& kernels, int recorded,
                                  JobTiming* timing) {
    if (recorded != static_cast<int>(kernels.kernels.size())) {
      return absl::InternalError(absl::StrCat("profiling: ", recorded, " kernel events for ",
                                              kernels.kernels.size(), " planned kernels"));
    }
    timing->steps.clear();
    for (size_t i = 0; i < plan.steps.size(); ++i) {
      timing->steps.push_back({static_cast<int>(i), plan.steps[i].ops, 0, 0.0});
    }
    for (int k = 0; k < recorded; ++k) {
      float ms = 0;
      GPUPIPE_CUDA_RETURN(cudaEventElapsedTime(&ms, k == 0 ? lane.events[1]
                                                           : lane.kernel_events[k - 1],
                                               lane.kernel_events[k]),
                          "timing");
      const KernelDescription& d = kernels.kernels[k];
      timing->kernel_times.push_back({k, d.name, d.step, ms * 1000.0});
      JobTiming::Step& step = timing->steps[static_cast<size_t>(d.step)];
      ++step.kernels;
      step.device_us += ms * 1000.0;
    }
    return absl::OkStatus();
  }

  // A failed job leaves no work behind that could touch the lane's buffers under the next job.
  static absl::Status Abort(Lane& lane, absl::Status status) {
    cudaStreamSynchronize(lane.stream);
    cudaGetLastError();
    return status;
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

    const size_t buffer_bytes = static_cast<size_t>(options_.max_input_bytes);
    const size_t workspace_bytes = kernels::cuda::RowOpsWorkspaceBytes();
    for (int p = 0; p < kPriorityLevels; ++p) {
      lanes_[p].resize(options_.lanes_per_level);
      for (Lane& lane : lanes_[p]) {
        lane.device_priority = device_priority_[p];
        GPUPIPE_CUDA_RETURN(cudaStreamCreateWithPriority(&lane.stream, cudaStreamNonBlocking,
                                                         lane.device_priority),
                            "cudaStreamCreateWithPriority");
        for (void*& p_buf : lane.d_buffers) {
          GPUPIPE_CUDA_RETURN(cudaMalloc(&p_buf, buffer_bytes), "allocating lane buffers");
        }
        GPUPIPE_CUDA_RETURN(cudaMalloc(&lane.d_workspace, workspace_bytes), "allocating workspace");
        lane.workspace_bytes = workspace_bytes;
        GPUPIPE_CUDA_RETURN(cudaHostAlloc(&lane.h_input, buffer_bytes, cudaHostAllocDefault),
                            "allocating pinned staging");
        GPUPIPE_CUDA_RETURN(cudaHostAlloc(&lane.h_output, buffer_bytes, cudaHostAllocDefault),
                            "allocating pinned staging");
        for (cudaEvent_t& e : lane.events) {
          GPUPIPE_CUDA_RETURN(cudaEventCreateWithFlags(&e, cudaEventDefault), "cudaEventCreate");
        }
        lane.kernel_events.resize(kMaxProfiledKernels);
        for (cudaEvent_t& e : lane.kernel_events) {
          GPUPIPE_CUDA_RETURN(cudaEventCreateWithFlags(&e, cudaEventDefault), "cudaEventCreate");
        }
        lane.graphs = std::make_unique<GraphCache>(options_.graph_cache_capacity);
      }
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
    for (auto& level : lanes_) {
      for (Lane& lane : level) {
        void* d_a = lane.d_buffers[0];
        void* d_b = lane.d_buffers[1];
        // 4096 zeros of the widest element type.
        GPUPIPE_CUDA_RETURN(cudaMemsetAsync(d_a, 0, 4096 * sizeof(double), lane.stream), "warm-up");
        // Every element type's kernels, so no job pays for loading them.
        using kernels::ElementType;
        for (ElementType type : {ElementType::kFloat32, ElementType::kFloat64,
                                 ElementType::kFloat16, ElementType::kInt32}) {
          const bool is_float = kernels::IsFloatingPoint(type);
          for (auto staging : {kernels::cuda::Staging::kDirect, kernels::cuda::Staging::kPipeline}) {
            kernels::cuda::LaunchConfig config;
            config.stream = lane.stream;
            config.staging = staging;
            config.stages = options_.default_stages;
            config.multiprocessors = device_.multiprocessors;
            GPUPIPE_CUDA_RETURN(kernels::cuda::Elementwise(d_a, type, d_b, 4096, program, config),
                                "warm-up");
            GPUPIPE_CUDA_RETURN(kernels::cuda::RowReduce(d_a, type, d_b, 4, 1024,
                                                         kernels::RowReduceKind::kSum, program,
                                                         lane.d_workspace, lane.workspace_bytes,
                                                         config),
                                "warm-up");
            GPUPIPE_CUDA_RETURN(kernels::cuda::RowArgmax(d_a, type, static_cast<int64_t*>(d_b),
                                                         4, 1024, program, lane.d_workspace,
                                                         lane.workspace_bytes, config),
                                "warm-up");
            if (!is_float) continue;
            GPUPIPE_CUDA_RETURN(kernels::cuda::RowNormalize(
                                    d_a, type, d_b, 4, 1024, kernels::RowNormalizeKind::kStandardize,
                                    program, lane.d_workspace, lane.workspace_bytes, config),
                                "warm-up");
            GPUPIPE_CUDA_RETURN(kernels::cuda::RowSoftmax(d_a, type, d_b, 4, 1024, program,
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
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const CudaBackendOptions& options) {
  return CudaBackend::Create(options);
}

}  // namespace gpupipe::engine
