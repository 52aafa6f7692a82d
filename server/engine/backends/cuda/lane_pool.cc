#include "server/engine/backends/cuda/lane_pool.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/engine/backends/cuda/cuda_status.h"

namespace gpupipe::engine {
namespace {

// Device and pinned sub-allocations are aligned for every kernel's vector loads.
constexpr size_t kAlignment = 256;
// Smallest chunk slot worth running (below it per-chunk overheads dominate).
constexpr int64_t kMinSlotBytes = int64_t{64} << 10;

size_t AlignUp(size_t v) { return (v + kAlignment - 1) / kAlignment * kAlignment; }

absl::Status NewStream(UniqueStream* stream, int priority) {
  cudaStream_t s = nullptr;
  GPUPIPE_CUDA_RETURN(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, priority),
                      "cudaStreamCreateWithPriority");
  stream->reset(s);
  return absl::OkStatus();
}

// Timing events record when; ordering events (cudaEventDisableTiming) only order streams.
absl::Status NewEvent(UniqueEvent* event, bool timing, bool blocking_sync) {
  cudaEvent_t e = nullptr;
  const unsigned flags = (timing ? cudaEventDefault : cudaEventDisableTiming) |
                         (blocking_sync ? cudaEventBlockingSync : 0u);
  GPUPIPE_CUDA_RETURN(cudaEventCreateWithFlags(&e, flags), "cudaEventCreateWithFlags");
  event->reset(e);
  return absl::OkStatus();
}

}  // namespace

StepBuffers Lane::buffers(int slot) const {
  StepBuffers b;
  b.d_buffers[0] = slots[slot].d_buffers[0];
  b.d_buffers[1] = slots[slot].d_buffers[1];
  b.d_workspace = d_workspace;
  b.workspace_bytes = workspace_bytes;
  return b;
}

absl::StatusOr<std::unique_ptr<LanePool>> LanePool::Create(const LanePoolOptions& options) {
  std::unique_ptr<LanePool> pool(new LanePool());
  GPUPIPE_CUDA_RETURN(cudaSetDevice(options.device), "cudaSetDevice");
  for (int p = 0; p < kPriorityLevels; ++p) {
    pool->lanes_[p].resize(static_cast<size_t>(options.lanes_per_level));
    for (Lane& lane : pool->lanes_[p]) {
      if (absl::Status s = pool->CreateLane(lane, options.device_priority[p], options); !s.ok()) {
        return s;
      }
    }
  }
  if (absl::Status s = pool->Allocate(options); !s.ok()) return s;
  return pool;
}

LanePool::~LanePool() {
  for (auto& level : lanes_) {
    for (Lane& lane : level) {
      for (cudaStream_t s : {lane.stream(), lane.h2d_stream(), lane.d2h_stream()}) {
        if (s != nullptr) cudaStreamSynchronize(s);
      }
    }
  }
}

absl::Status LanePool::CreateLane(Lane& lane, int device_priority,
                                  const LanePoolOptions& options) {
  lane.device_priority = device_priority;
  const bool blocking = options.blocking_sync;
  if (absl::Status s = NewStream(&lane.compute, device_priority); !s.ok()) return s;
  if (options.copy_streams) {
    if (absl::Status s = NewStream(&lane.copy_in, device_priority); !s.ok()) return s;
    if (absl::Status s = NewStream(&lane.copy_out, device_priority); !s.ok()) return s;
  }
  for (Slot& slot : lane.slots) {
    for (UniqueEvent* e : {&slot.h2d_done, &slot.compute_done, &slot.d2h_done}) {
      if (absl::Status s = NewEvent(e, /*timing=*/false, blocking); !s.ok()) return s;
    }
    for (UniqueEvent& e : slot.times) {
      if (absl::Status s = NewEvent(&e, /*timing=*/true, blocking); !s.ok()) return s;
    }
  }
  for (StagedInput& in : lane.inputs) {
    if (absl::Status s = NewEvent(&in.copied, /*timing=*/false, blocking); !s.ok()) return s;
  }
  if (absl::Status s = NewEvent(&lane.job_start, /*timing=*/true, blocking); !s.ok()) return s;
  for (UniqueEvent& e : lane.kernel_events) {
    if (absl::Status s = NewEvent(&e, /*timing=*/true, blocking); !s.ok()) return s;
  }
  lane.graphs = std::make_unique<GraphCache>(options.graph_cache_capacity);
  return absl::OkStatus();
}

absl::Status LanePool::Allocate(const LanePoolOptions& options) {
  const int lanes = kPriorityLevels * options.lanes_per_level;
  const int64_t budget = options.device_budget_bytes;
  const int64_t per_lane = budget / lanes;
  const int64_t lane_fixed =
      static_cast<int64_t>(AlignUp(options.workspace_bytes) + kSplitStateBytes);
  const int64_t fit = (per_lane - lane_fixed) / (2 * kSlots) /
                      static_cast<int64_t>(kAlignment) * static_cast<int64_t>(kAlignment);
  slot_bytes_ =
      std::min<int64_t>(static_cast<int64_t>(AlignUp(static_cast<size_t>(options.chunk_bytes))),
                        fit);
  if (slot_bytes_ < kMinSlotBytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "--device-memory: ", budget, " bytes leave ", std::max<int64_t>(per_lane, 0),
        " bytes to each of ", lanes, " lanes; a lane needs at least ",
        2 * kSlots * kMinSlotBytes + lane_fixed, " (", kSlots, " chunk slots of 2 buffers of ",
        kMinSlotBytes, " bytes, its workspace and its split-row state)"));
  }
  const size_t slot = static_cast<size_t>(slot_bytes_);
  const size_t lane_device = 2 * kSlots * slot + static_cast<size_t>(lane_fixed);
  const size_t device_bytes = lane_device * static_cast<size_t>(lanes);
  const size_t pinned_bytes = (kInputBuffers + kSlots) * slot * static_cast<size_t>(lanes);
  void* d_arena = nullptr;
  GPUPIPE_CUDA_RETURN(cudaMalloc(&d_arena, device_bytes), "allocating the device arena");
  arena_.reset(d_arena);
  void* h_staging = nullptr;
  GPUPIPE_CUDA_RETURN(
      cudaHostAlloc(&h_staging, pinned_bytes,
                    options.map_staging ? cudaHostAllocMapped : cudaHostAllocDefault),
      "allocating pinned staging");
  staging_.reset(h_staging);
  void* d_staging = nullptr;
  if (options.map_staging) {
    GPUPIPE_CUDA_RETURN(cudaHostGetDevicePointer(&d_staging, h_staging, 0),
                        "mapping pinned staging");
  }
  // Where the device sees a pinned buffer (the same address wherever addressing is unified),
  // or null where the block is not mapped.
  const auto mapped = [&](void* h) -> char* {
    if (d_staging == nullptr) return nullptr;
    return static_cast<char*>(d_staging) + (static_cast<char*>(h) - static_cast<char*>(h_staging));
  };

  char* d_next = static_cast<char*>(d_arena);
  char* h_next = static_cast<char*>(h_staging);
  for (auto& level : lanes_) {
    for (Lane& lane : level) {
      for (Slot& s : lane.slots) {
        for (void*& b : s.d_buffers) {
          b = d_next;
          d_next += slot;
        }
        s.h_output = h_next;
        s.d_output_mapped = mapped(h_next);
        h_next += slot;
      }
      for (StagedInput& in : lane.inputs) {
        in.h_input = h_next;
        in.d_input_mapped = mapped(h_next);
        h_next += slot;
      }
      lane.d_workspace = d_next;
      lane.workspace_bytes = options.workspace_bytes;
      d_next += AlignUp(options.workspace_bytes);
      lane.d_split_state = d_next;
      d_next += kSplitStateBytes;
    }
  }
  const auto mib = [](double b) { return b / double(1 << 20); };
  memory_summary_ = absl::StrFormat(
      "memory: device arena %.1f MiB (%d lanes x %d chunk slots x 2 buffers x %.1f MiB + "
      "%.1f MiB workspace and split-row state; %s), pinned host staging %.1f MiB (%d lanes x "
      "(%d in + %d out) x %.1f MiB)",
      mib(device_bytes), lanes, kSlots, mib(slot), mib(lane_fixed), options.budget_description,
      mib(pinned_bytes), lanes, kInputBuffers, kSlots, mib(slot));
  return absl::OkStatus();
}

}  // namespace gpupipe::engine
