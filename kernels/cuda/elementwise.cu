// Elementwise op: entry points and dispatch. Two families of load loops over the same math:
//  - staged (kPipeline, kPipelineThread, kPrimitives, kBulk): a persistent grid; each block
//    streams its tiles global -> shared through the strategy's `stages` buffers
//    (detail/pipeline_staging.cuh), then applies the program from shared memory;
//  - kDirect: a grid-stride loop of float4 register loads, several in flight per thread.
// Both are memory-bound; the program is interpreted from the kernel parameters, one
// instruction at a time over a register array of 4 to 16 values per thread (ApplyEwN).
// PDL: each block waits for the previous kernel of the stream before its first global access
// (d_out may be what that kernel is still reading), and triggers its dependent after its last
// store is issued.
#include <algorithm>
#include <cstdint>

#include "kernels/cuda/detail/launch.cuh"
#include "kernels/cuda/detail/pipeline_staging.cuh"
#include "kernels/cuda/detail/row_access.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/tuning/staging_table.h"

namespace gpupipe::kernels::cuda {
namespace {

using detail::ApplyEw4;
using detail::StoreFloat4;

constexpr int kEwThreads = 256;
// float4 per program dispatch in the staged consumer (see ApplyEwN): a rank's vectors of a tile
// are taken in groups of this many, then one at a time.
constexpr int kEwStagedGroup = 4;
static_assert(kEwThreads * kMaxStages * detail::kStagingVecBytes <= detail::kStagingBudgetBytes,
              "every stage count keeps at least one vector per thread per tile");
// Persistent-grid sizes: blocks per SM for each strategy.
constexpr int kEwPipelineBlocksPerSm = 4;
constexpr int kEwDirectBlocksPerSm = 8;
// Independent float4 loads in flight per thread in the direct path; the program runs over all
// 4 * kEwDirectUnroll values at once.
constexpr int kEwDirectUnroll = 4;

// ---- entry points ----------------------------------------------------------------------------
// d_in and d_out may alias (in place): every element is read before it is written, by the same
// block, and no element is read twice. Hence no here.

template <Staging S>
__global__ void __launch_bounds__(kEwThreads)
    EwStagedKernel(const float* d_in, float* d_out, int64_t n, EwProgram program, bool out_vec,
                   int stages) {
  __shared__ detail::StagingSmem smem;
  const detail::TileGeometry g = detail::StagedGeometry(S, kEwThreads, stages);
  const int64_t tile_floats = 4 * g.tile_vecs();
  // Tile t goes to block t % gridDim.x. Tiles start at multiples of the tile size (a multiple of
  // 16 bytes) from d_in, which is 16-byte aligned, as the staged copies require.
  const int64_t full_tiles = n / tile_floats;
  const int64_t count =
      blockIdx.x < full_tiles ? (full_tiles - 1 - blockIdx.x) / gridDim.x + 1 : 0;

  // Independent prologue: the strategy's shared-memory barriers.
  detail::StagerFor<S> stager(smem, g);
  detail::WaitForPrimaryGrids();

  stager.ForEach(
      reinterpret_cast<const uint4*>(d_in), blockIdx.x, gridDim.x, count,
      [&](int64_t tile, const uint4* s_tile, int rank) {
        const float4* s4 = reinterpret_cast<const float4*>(s_tile);
        float* dst = d_out + tile * tile_floats + 4 * rank;
        int u = 0;
        for (; u + kEwStagedGroup <= g.vecs_per_rank; u += kEwStagedGroup) {
          float4 q[kEwStagedGroup];
#pragma unroll
          for (int j = 0; j < kEwStagedGroup; ++j) q[j] = s4[rank + (u + j) * g.ranks];
          detail::ApplyEwVec(program, q);
#pragma unroll
          for (int j = 0; j < kEwStagedGroup; ++j) {
            StoreFloat4(dst + 4 * static_cast<int64_t>(u + j) * g.ranks, q[j], out_vec);
          }
        }
        for (; u < g.vecs_per_rank; ++u) {
          StoreFloat4(dst + 4 * static_cast<int64_t>(u) * g.ranks,
                      ApplyEw4(program, s4[rank + u * g.ranks]), out_vec);
        }
      });
  stager.Quit();

  // Ragged end (< one tile): plain bounds-checked loads, by the block next in the tile order.
  if (blockIdx.x == full_tiles % gridDim.x) {
    for (int64_t i = full_tiles * tile_floats + threadIdx.x; i < n; i += blockDim.x) {
      d_out[i] = ApplyEw(program, __ldcg(d_in + i));
    }
  }
  detail::AllowDependentGrids();
}

__global__ void __launch_bounds__(kEwThreads)
    EwDirectKernel(const float* d_in, float* d_out, int64_t n, EwProgram program, bool out_vec) {
  const float4* in4 = reinterpret_cast<const float4*>(d_in);
  const int64_t nvec = n / 4;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  detail::WaitForPrimaryGrids();

  int64_t v = tid;
  for (; v + (kEwDirectUnroll - 1) * stride < nvec; v += kEwDirectUnroll * stride) {
    float4 q[kEwDirectUnroll];
#pragma unroll
    for (int u = 0; u < kEwDirectUnroll; ++u) q[u] = __ldcg(in4 + v + u * stride);
    detail::ApplyEwVec(program, q);
#pragma unroll
    for (int u = 0; u < kEwDirectUnroll; ++u) {
      StoreFloat4(d_out + 4 * (v + u * stride), q[u], out_vec);
    }
  }
  for (; v < nvec; v += stride) {
    StoreFloat4(d_out + 4 * v, ApplyEw4(program, __ldcg(in4 + v)), out_vec);
  }

  // n % 4 trailing elements; the grid always has at least 3 threads.
  const int64_t i = 4 * nvec + tid;
  if (i < n) d_out[i] = ApplyEw(program, __ldcg(d_in + i));
  detail::AllowDependentGrids();
}

// ---- dispatch --------------------------------------------------------------------------------

const char* EwKernelName(Staging staging) {
  switch (staging) {
    case Staging::kDirect: return "elementwise.direct";
    case Staging::kPipeline: return "elementwise.pipeline";
    case Staging::kPipelineThread: return "elementwise.pipeline-thread";
    case Staging::kPrimitives: return "elementwise.primitives";
    case Staging::kBulk: return "elementwise.bulk";
    case Staging::kAuto: break;
  }
  return "elementwise.?";
}

template <Staging S>
cudaError_t LaunchStaged(const float* d_in, float* d_out, int64_t n, const EwProgram& program,
                         bool out_vec, int stages, detail::Launcher& launch) {
  const detail::TileGeometry g = detail::StagedGeometry(S, kEwThreads, stages);
  const int64_t full_tiles = n / (4 * g.tile_vecs());
  const int64_t cap =
      static_cast<int64_t>(launch.config().multiprocessors) * kEwPipelineBlocksPerSm;
  const int64_t grid = std::max<int64_t>(1, std::min(full_tiles, cap));
  return launch(EwKernelName(S), EwStagedKernel<S>, grid, kEwThreads, d_in, d_out, n, program,
                out_vec, stages);
}

// The one sizing/dispatch path, for launching and for describing. n >= 1, arguments valid.
cudaError_t DispatchElementwise(const float* d_in, float* d_out, int64_t n,
                                const EwProgram& program, bool out_vec,
                                detail::Launcher& launch) {
  const LaunchConfig& config = launch.config();
  const tuning::StagingChoice choice =
      tuning::ResolveStaging(config, tuning::StagingFamily::kElementwise,
                             ElementType::kFloat32, 1, n);
  switch (choice.staging) {
    case Staging::kPipeline:
      return LaunchStaged<Staging::kPipeline>(d_in, d_out, n, program, out_vec, choice.stages,
                                              launch);
    case Staging::kPipelineThread:
      return LaunchStaged<Staging::kPipelineThread>(d_in, d_out, n, program, out_vec,
                                                    choice.stages, launch);
    case Staging::kPrimitives:
      return LaunchStaged<Staging::kPrimitives>(d_in, d_out, n, program, out_vec, choice.stages,
                                                launch);
    case Staging::kBulk:
      return LaunchStaged<Staging::kBulk>(d_in, d_out, n, program, out_vec, choice.stages,
                                          launch);
    case Staging::kDirect:
    case Staging::kAuto: break;
  }
  const int64_t wanted = detail::CeilDiv(detail::CeilDiv(n, 4), kEwThreads * kEwDirectUnroll);
  const int64_t cap = static_cast<int64_t>(config.multiprocessors) * kEwDirectBlocksPerSm;
  const int64_t grid = std::max<int64_t>(1, std::min(wanted, cap));
  return launch(EwKernelName(Staging::kDirect), EwDirectKernel, grid, kEwThreads, d_in, d_out,
                n, program, out_vec);
}

}  // namespace

cudaError_t Elementwise(const float* d_in, float* d_out, int64_t n, const EwProgram& program,
                        const LaunchConfig& config, int* kernels) {
  detail::Launcher launch(config, kernels);
  if (const cudaError_t err = detail::ValidateConfig(config); err != cudaSuccess) return err;
  if (n < 0 || detail::ValidateProgram(program) != cudaSuccess) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  if (d_in == nullptr || d_out == nullptr || !detail::IsAligned(d_in, 16)) {
    return cudaErrorInvalidValue;
  }
  // d_out carries no alignment promise; fall back to scalar stores when it is not 16-byte
  // aligned.
  const bool out_vec = detail::IsAligned(d_out, 16);
  return DispatchElementwise(d_in, d_out, n, program, out_vec, launch);
}

std::vector<KernelLaunchInfo> DescribeElementwise(int64_t n, const LaunchConfig& config) {
  std::vector<KernelLaunchInfo> out;
  if (detail::ValidateShapeConfig(config) != cudaSuccess || n <= 0) return out;
  detail::Launcher launch(config, &out);
  (void)DispatchElementwise(nullptr, nullptr, n, EwProgram{}, true, launch);
  return out;
}

}  // namespace gpupipe::kernels::cuda
