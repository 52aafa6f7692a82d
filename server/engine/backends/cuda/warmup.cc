#include "server/engine/backends/cuda/warmup.h"

#include <algorithm>

#include "kernels/cuda/ops.h"
#include "server/engine/backends/cuda/cuda_status.h"

namespace gpupipe::engine {
namespace {

absl::Status WarmUpLane(const Lane& lane, int64_t slot_bytes, int stages,
                        const kernels::cuda::DeviceCaps& caps) {
  namespace cuda = kernels::cuda;
  using kernels::ElementType;
  kernels::EwProgram program;
  program.Append({kernels::EwOpcode::kAffine, 1.0, 0.0});
  // Zeros of the widest element type; 4 rows of n / 4.
  const int64_t n = std::min<int64_t>(4096, slot_bytes / 8);
  void* d_a = lane.slots[0].d_buffers[0];
  void* d_b = lane.slots[0].d_buffers[1];
  cudaStream_t stream = lane.stream();
  GPUPIPE_CUDA_RETURN(cudaMemsetAsync(d_a, 0, n * sizeof(double), stream), "warm-up");
  for (ElementType type : {ElementType::kFloat32, ElementType::kFloat64, ElementType::kFloat16,
                           ElementType::kInt32}) {
    const bool is_float = kernels::IsFloatingPoint(type);
    for (cuda::Staging staging : {cuda::Staging::kDirect, cuda::Staging::kPipeline,
                                  cuda::Staging::kPipelineThread, cuda::Staging::kPrimitives,
                                  cuda::Staging::kBulk}) {
      if (staging == cuda::Staging::kBulk && !caps.bulk_copy()) continue;
      cuda::LaunchConfig config;
      config.stream = stream;
      config.staging = staging;
      config.stages = stages;
      config.pdl = caps.pdl();
      config.multiprocessors = caps.multiprocessors;
      config.arch = caps.feature_arch();
      config.max_smem_per_block = caps.max_smem_per_block;
      void* ws = lane.d_workspace;
      const size_t ws_bytes = lane.workspace_bytes;
      GPUPIPE_CUDA_RETURN(cuda::Elementwise(d_a, type, d_b, n, program, config), "warm-up");
      GPUPIPE_CUDA_RETURN(cuda::RowReduce(d_a, type, d_b, 4, n / 4, kernels::RowReduceKind::kSum,
                                          program, ws, ws_bytes, config),
                          "warm-up");
      GPUPIPE_CUDA_RETURN(cuda::RowArgmax(d_a, type, static_cast<int64_t*>(d_b), 4, n / 4,
                                          program, ws, ws_bytes, config),
                          "warm-up");
      if (!is_float) continue;
      GPUPIPE_CUDA_RETURN(
          cuda::RowNormalize(d_a, type, d_b, 4, n / 4, kernels::RowNormalizeKind::kStandardize,
                             program, ws, ws_bytes, config),
          "warm-up");
      GPUPIPE_CUDA_RETURN(
          cuda::RowSoftmax(d_a, type, d_b, 4, n / 4, program, ws, ws_bytes, config), "warm-up");
    }
  }
  GPUPIPE_CUDA_RETURN(cudaStreamSynchronize(stream), "warm-up");
  return absl::OkStatus();
}

}  // namespace

absl::Status WarmUpLanes(LanePool& pool, int stages, const kernels::cuda::DeviceCaps& caps) {
  for (const auto& level : pool.lanes()) {
    for (const Lane& lane : level) {
      if (absl::Status s = WarmUpLane(lane, pool.slot_bytes(), stages, caps); !s.ok()) {
        return s;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace gpupipe::engine
