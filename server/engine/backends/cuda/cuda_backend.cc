#include "server/engine/backends/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <array>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/cuda/device_caps.h"
#include "kernels/cuda/ops.h"
#include "server/engine/backends/cuda/copy_pool.h"
#include "server/engine/backends/cuda/cuda_lane.h"
#include "server/engine/backends/cuda/cuda_status.h"
#include "server/engine/backends/cuda/ipc_memory.h"
#include "server/engine/backends/cuda/lane_pool.h"
#include "server/engine/backends/cuda/step_launcher.h"
#include "server/engine/backends/cuda/warmup.h"

namespace gpupipe::engine {
namespace {

std::string VersionString(int v) { return absl::StrCat(v / 1000, ".", (v % 1000) / 10); }

// The runtime reports cudaErrorInsufficientDriver both when no driver is loaded at all and when
// the driver is older than the CUDA runtime linked into this build needs. The first is a machine
// without a GPU: UNAVAILABLE, so that --backend auto falls back to the CPU. The second is a
// deployment error the operator must fix; the runtime's major version names the driver branch to
// install (README, "Deploy").
absl::Status InsufficientDriverError() {
  int driver = 0;
  cudaDriverGetVersion(&driver);
  cudaGetLastError();
  if (driver <= 0) {
    return absl::UnavailableError(
        "no usable CUDA device: no NVIDIA driver is loaded (libcuda.so.1 was not found)");
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "the NVIDIA driver supports CUDA ", VersionString(driver),
      ", but this build of gpupiped uses CUDA ", VersionString(CUDART_VERSION),
      ": install a driver for CUDA ", CUDART_VERSION / 1000,
      " or newer (README, \"Deploy\"), or run a build made with an older CUDA toolkit"));
}

// The device's capabilities, or why this build cannot run on it.
absl::StatusOr<kernels::cuda::DeviceCaps> QueryCaps(int device, const cudaDeviceProp& prop) {
  kernels::cuda::DeviceCaps caps;
  const cudaError_t err = kernels::cuda::QueryDeviceCaps(device, &caps);
  if (err == cudaErrorInsufficientDriver || err == cudaErrorUnsupportedPtxVersion) {
    return InsufficientDriverError();
  }
  if (err != cudaSuccess) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this build's kernels cannot run on CUDA device ", device, " (", prop.name, ", ",
        kernels::cuda::ArchName(prop.major * 10 + prop.minor), "): ", cudaGetErrorName(err),
        "; it carries code for ", kernels::cuda::BuiltCudaArchitectures(),
        " (CMake's CUDA architectures): rebuild with CMAKE_CUDA_ARCHITECTURES including ",
        prop.major * 10 + prop.minor, ", or with PTX of an architecture at most that"));
  }
  return caps;
}

// Device.kernel_code: which code of the fat binary the driver loaded. SASS older than its
// device runs as it is (sm_80 SASS on an sm_86); PTX older than the SASS it became was
// compiled for the device, by the driver when the build has no SASS for it.
std::string KernelCode(const kernels::cuda::DeviceCaps& caps) {
  using kernels::cuda::ArchName;
  if (caps.ptx_arch < caps.binary_arch) {
    return absl::StrCat("compute_", caps.ptx_arch, " PTX, compiled for ",
                        ArchName(caps.binary_arch));
  }
  return absl::StrCat(ArchName(caps.binary_arch), " SASS");
}

unsigned ScheduleFlag(CudaWait wait) {
  switch (wait) {
    case CudaWait::kSpin: return cudaDeviceScheduleSpin;
    case CudaWait::kYield: return cudaDeviceScheduleYield;
    case CudaWait::kBlock: return cudaDeviceScheduleBlockingSync;
    case CudaWait::kAuto: break;
  }
  return cudaDeviceScheduleAuto;
}

// As gpupiped --cuda-wait spells it (DeviceDescription::wait).
const char* WaitName(CudaWait wait) {
  switch (wait) {
    case CudaWait::kSpin: return "spin";
    case CudaWait::kYield: return "yield";
    case CudaWait::kBlock: return "block";
    case CudaWait::kAuto: break;
  }
  return "auto";
}

class CudaBackend final : public Backend {
 public:
  static absl::StatusOr<std::unique_ptr<Backend>> Create(const CudaBackendOptions& options) {
    int count = 0;
    if (cudaError_t err = cudaGetDeviceCount(&count); err != cudaSuccess) {
      cudaGetLastError();
      if (err == cudaErrorInsufficientDriver) return InsufficientDriverError();
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

  // Every mode is accepted on every device: staging and launch modes choose how, never what,
  // so a job written for a fleet runs on each of its GPUs. Where the device lacks what a mode
  // needs (DeviceCaps), the lane runs the nearest mode it has and the job's Timing says so
  // (LaunchConfigFor).
  std::vector<Staging> stagings() const override {
    return {Staging::kAuto,           Staging::kDirect,     Staging::kPipeline,
            Staging::kPipelineThread, Staging::kPrimitives, Staging::kBulk};
  }
  std::vector<LaunchMode> launch_modes() const override {
    return {LaunchMode::kAuto, LaunchMode::kStream, LaunchMode::kPdl, LaunchMode::kGraph,
            LaunchMode::kGraphPdl};
  }

  PlanDescription Describe(const JobSpec& spec, const Plan& plan) const override {
    const kernels::cuda::LaunchConfig config = LaunchConfigFor(spec, nullptr, launch_defaults_);
    PlanDescription d = DescribePlan(plan, config);
    d.launch = spec.launch != LaunchMode::kAuto ? LaunchLabel(spec.launch, launch_defaults_)
               : caps_.pdl() ? "auto (pdl; graph-pdl once the shape repeats on a lane)"
                             : "auto (stream; graph once the shape repeats on a lane)";
    d.staging = StagingLabel(config, spec.staging);
    return d;
  }

  GraphCacheStats graph_cache_stats() const override {
    GraphCacheStats stats;
    for (const auto& level : pool_->lanes()) {
      for (const Lane& lane : level) lane.graphs->AddStats(&stats);
    }
    return stats;
  }

  std::string MemorySummary() const override {
    if (options_.mapped_io_max_bytes <= 0) return pool_->memory_summary();
    return absl::StrFormat(
        "%s; one-chunk jobs of at most %.1f KiB in and out whose pipeline allows it run "
        "without copies, on the mapped pinned buffers",
        pool_->memory_summary(), static_cast<double>(options_.mapped_io_max_bytes) / 1024.0);
  }

  absl::Status DeviceStatus() const override { return StickyCudaError(); }

  int64_t default_chunk_bytes() const override { return pool_->slot_bytes(); }
  int64_t chunk_capacity_bytes() const override { return pool_->slot_bytes(); }

  absl::StatusOr<HostBlock> AllocateInputMemory(int64_t bytes) override {
    GPUPIPE_CUDA_RETURN(cudaSetDevice(options_.device), "cudaSetDevice");
    void* block = nullptr;
    if (cudaError_t err = cudaHostAlloc(&block, static_cast<size_t>(bytes), cudaHostAllocDefault);
        err != cudaSuccess) {
      cudaGetLastError();
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot page-lock ", bytes, " bytes for input rings (gpupiped "
                       "--input-ring-total-mib): ", cudaGetErrorName(err)));
    }
    return HostBlock{static_cast<char*>(block), /*pinned=*/true,
                     [](char* p) { cudaFreeHost(p); }};
  }

  absl::StatusOr<HostPin> PinHostMemory(char* data, int64_t bytes) override {
    GPUPIPE_CUDA_RETURN(cudaSetDevice(options_.device), "cudaSetDevice");
    if (cudaError_t err =
            cudaHostRegister(data, static_cast<size_t>(bytes), cudaHostRegisterDefault);
        err != cudaSuccess) {
      cudaGetLastError();
      return absl::ResourceExhaustedError(absl::StrCat("cannot page-lock the region's ", bytes,
                                                       " bytes: ", cudaGetErrorName(err), " (",
                                                       cudaGetErrorString(err), ")"));
    }
    return HostPin{/*pinned=*/true, [data, device = options_.device] {
                     cudaSetDevice(device);
                     cudaHostUnregister(data);
                     cudaGetLastError();
                   }};
  }

  absl::StatusOr<DeviceMapping> OpenCudaIpc(const std::string& handle) override {
    return OpenIpcMemory(options_.device, handle);
  }

  absl::Status CopyDeviceMemory(char* to, const char* from, int64_t bytes) override {
    GPUPIPE_CUDA_RETURN(cudaSetDevice(options_.device), "cudaSetDevice");
    GPUPIPE_CUDA_RETURN(cudaMemcpy(to, from, static_cast<size_t>(bytes), cudaMemcpyDefault),
                        "copying a region's bytes");
    return absl::OkStatus();
  }

  LaneExecutor& lane(Priority priority, int lane) override {
    return *lanes_[static_cast<int>(priority)][static_cast<size_t>(lane)];
  }

 private:
  explicit CudaBackend(const CudaBackendOptions& options)
      : options_(options), copier_(std::make_unique<CopyPool>(options.host_copy_threads,
                                            options.streaming_host_copies)) {}

  absl::Status Init() {
    if (!options_.inject_fault.empty()) {
#if GPUPIPE_FAULT_INJECTION
      faults_.kind = options_.inject_fault == "sticky" ? FaultPlan::Kind::kSticky
                     : options_.inject_fault == "launch" ? FaultPlan::Kind::kLaunch
                                                         : FaultPlan::Kind::kNone;
      if (faults_.kind == FaultPlan::Kind::kNone || options_.inject_fault_at_job < 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "inject_fault: expected sticky or launch at a job >= 1, got '", options_.inject_fault,
            "' at ", options_.inject_fault_at_job));
      }
      faults_.at_job = options_.inject_fault_at_job;
#else
      return absl::InvalidArgumentError("this build has no fault injection (a test build has)");
#endif
    }
    GPUPIPE_CUDA_RETURN(cudaSetDevice(options_.device), "cudaSetDevice");
    if (options_.wait != CudaWait::kAuto) {
      // Only the schedule bits; the device's primary context takes them whether or not it is
      // initialized yet.
      unsigned flags = 0;
      GPUPIPE_CUDA_RETURN(cudaGetDeviceFlags(&flags), "cudaGetDeviceFlags");
      flags &= ~static_cast<unsigned>(cudaDeviceScheduleMask);
      flags |= ScheduleFlag(options_.wait);
      GPUPIPE_CUDA_RETURN(cudaSetDeviceFlags(flags), "cudaSetDeviceFlags");
    }
    cudaDeviceProp prop{};
    GPUPIPE_CUDA_RETURN(cudaGetDeviceProperties(&prop, options_.device),
                        "cudaGetDeviceProperties");
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
    absl::StatusOr<kernels::cuda::DeviceCaps> caps = QueryCaps(options_.device, prop);
    if (!caps.ok()) return caps.status();
    caps_ = *caps;
    device_.kernel_code = KernelCode(caps_);
    if (caps_.bulk_copy()) device_.features.push_back("bulk-copy");
    if (caps_.pdl()) device_.features.push_back("pdl");
    device_.wait = WaitName(options_.wait);

    // Numerically lower is higher priority; greatest <= least.
    device_priority_[static_cast<int>(Priority::kLow)] = least;
    device_priority_[static_cast<int>(Priority::kNormal)] = least + (greatest - least) / 2;
    device_priority_[static_cast<int>(Priority::kHigh)] = greatest;
    launch_defaults_ = {options_.device,      device_.multiprocessors,
                        options_.default_stages, caps_.feature_arch(),
                        caps_.max_smem_per_block, options_.mapped_io_max_bytes,
                        options_.wait == CudaWait::kBlock};

    LanePoolOptions pool;
    pool.device = options_.device;
    pool.device_priority = device_priority_;
    pool.lanes_per_level = options_.lanes_per_level;
    pool.copy_streams = options_.copy_streams;
    pool.chunk_bytes = options_.chunk_bytes;
    pool.device_budget_bytes =
        options_.device_memory_bytes > 0
            ? options_.device_memory_bytes
            : static_cast<int64_t>(options_.device_memory_fraction *
                                   static_cast<double>(device_.memory_bytes));
    pool.budget_description = absl::StrFormat(
        "budget %.1f MiB%s", static_cast<double>(pool.device_budget_bytes) / double(1 << 20),
        options_.device_memory_bytes > 0
            ? ""
            : absl::StrFormat(" = %.0f%% of %.1f GiB", options_.device_memory_fraction * 100,
                              static_cast<double>(device_.memory_bytes) / double(1 << 30)));
    pool.workspace_bytes = kernels::cuda::RowOpsWorkspaceBytes();
    pool.graph_cache_capacity = options_.graph_cache_capacity;
    pool.blocking_sync = options_.wait == CudaWait::kBlock;
    pool.map_staging = options_.mapped_io_max_bytes > 0;
    absl::StatusOr<std::unique_ptr<LanePool>> lanes = LanePool::Create(pool);
    if (!lanes.ok()) return lanes.status();
    pool_ = *std::move(lanes);
    for (int p = 0; p < kPriorityLevels; ++p) {
      for (int i = 0; i < options_.lanes_per_level; ++i) {
        lanes_[p].push_back(std::make_unique<CudaLane>(
            pool_->lane(static_cast<Priority>(p), i), LaneName(static_cast<Priority>(p), i),
            pool_->slot_bytes(), *copier_, &faults_, launch_defaults_));
      }
    }
    return WarmUpLanes(*pool_, options_.default_stages, caps_);
  }

  CudaBackendOptions options_;
  DeviceDescription device_;
  kernels::cuda::DeviceCaps caps_;
  std::array<int, kPriorityLevels> device_priority_{};
  CudaLaunchDefaults launch_defaults_;
  std::unique_ptr<CopyPool> copier_;  // stages pageable inputs into pinned memory
  FaultPlan faults_;                   // test builds: a device fault on purpose
  std::unique_ptr<LanePool> pool_;
  // Declared after the pool: the executors refer to its lanes.
  std::array<std::vector<std::unique_ptr<CudaLane>>, kPriorityLevels> lanes_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const CudaBackendOptions& options) {
  return CudaBackend::Create(options);
}

}  // namespace gpupipe::engine
