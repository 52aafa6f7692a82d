// Elementwise op: entry points and dispatch. Two staging strategies over the same math:
//  - kPipeline: a persistent grid; each block streams its tiles global -> shared through a
//    block-scoped cuda::pipeline of `stages` buffers (cp.async), then applies the program from
//    shared memory;
//  - kDirect: a grid-stride loop of float4 register loads, several in flight per thread.
// Both are memory-bound; the program is interpreted from the kernel parameters, one
// instruction at a time over a register array of 4 to 16 values per thread (ApplyEwN).
// PDL: each block waits for the previous kernel of the stream before its first global access
// (d_out may be what that kernel is still reading), and triggers its dependent after its last
// store is issued.
#include <cooperative_groups.h>
#include <cuda/pipeline>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/detail/launch.cuh"
#include "kernels/cuda/detail/pipeline_staging.cuh"
#include "kernels/cuda/detail/row_access.cuh"
#include "kernels/cuda/ops.h"

// pipeline_shared_state has a (trivial, defaulted) constructor; the pipeline initializes its
// barriers itself in make_pipeline, so the missing dynamic initialization is intended.
#pragma nv_diag_suppress static_var_with_dynamic_init

namespace gpupipe::kernels::cuda {
namespace {

namespace cg = cooperative_groups;
using detail::ApplyEw4;
using detail::StoreFloat4;

constexpr int kEwThreads = 256;
// Shared-memory staging budget of one pipeline block, split into `stages` tiles: fewer stages
// mean bigger tiles, so every stage count keeps about the same bytes in flight per block, and
// each thread takes several float4 per tile (the program's dispatch is paid per group of
// values, see ApplyEwN). At most 32 KiB, so 4 blocks still fit an SM's shared memory.
constexpr int kEwPipelineBudgetFloats = 8192;
template <int Stages>
constexpr int EwVecsPerThread() {
  // float4 per thread per tile: 4 (stages 1-2: 16 KiB tiles), 2 (3-4: 8 KiB), 1 (5-8: 4 KiB).
  return Stages <= 2 ? 4 : Stages <= 4 ? 2 : 1;
}
template <int Stages>
constexpr int EwTileFloats() {
  return kEwThreads * 4 * EwVecsPerThread<Stages>();
}
static_assert(2 * EwTileFloats<2>() <= kEwPipelineBudgetFloats &&
                  4 * EwTileFloats<4>() <= kEwPipelineBudgetFloats &&
                  8 * EwTileFloats<8>() <= kEwPipelineBudgetFloats,
              "every stage count stays within the shared-memory budget");
// Persistent-grid sizes: blocks per SM for each strategy.
constexpr int kEwPipelineBlocksPerSm = 4;
constexpr int kEwDirectBlocksPerSm = 8;
// Independent float4 loads in flight per thread in the direct path; the program runs over all
// 4 * kEwDirectUnroll values at once.
constexpr int kEwDirectUnroll = 4;

// ---- entry points ----------------------------------------------------------------------------
// d_in and d_out may alias (in place): every element is read before it is written, by the same
// block, and no element is read twice. Hence no here.

template <int Stages>
__global__ void __launch_bounds__(kEwThreads)
    EwPipelineKernel(const float* d_in, float* d_out, int64_t n, EwProgram program,
                     bool out_vec) {
  __shared__ ::cuda::pipeline_shared_state<::cuda::thread_scope_block, Stages> state;
  constexpr int kVecs = EwVecsPerThread<Stages>();
  constexpr int kTileFloats = EwTileFloats<Stages>();
  __shared__ alignas(16) float tiles[Stages][kTileFloats];

  const cg::thread_block block = cg::this_thread_block();
  // Independent prologue: the pipeline's shared-memory barriers.
  auto pipe = ::cuda::make_pipeline(block, &state);
  detail::WaitForPrimaryGrids();

  // Tile t goes to block t % gridDim.x. Tiles start at multiples of 4 KiB from d_in, which is
  // 16-byte aligned, as the 16-byte cp.async requires.
  const int64_t full_tiles = n / kTileFloats;
  const int64_t count =
      blockIdx.x < full_tiles ? (full_tiles - 1 - blockIdx.x) / gridDim.x + 1 : 0;

  // Thread t takes float4 number t + u * kEwThreads of the tile: conflict-free shared reads
  // and coalesced global stores.
  detail::ForEachStagedTile<Stages, kTileFloats>(
      block, pipe, tiles, d_in, blockIdx.x, gridDim.x, count,
      [&](int64_t tile, const float* s_tile) {
        float4 q[kVecs];
#pragma unroll
        for (int u = 0; u < kVecs; ++u) {
          q[u] = reinterpret_cast<const float4*>(s_tile)[threadIdx.x + u * kEwThreads];
        }
        detail::ApplyEwVec(program, q);
        float* dst = d_out + tile * kTileFloats + 4 * threadIdx.x;
#pragma unroll
        for (int u = 0; u < kVecs; ++u) StoreFloat4(dst + 4 * u * kEwThreads, q[u], out_vec);
      });

  // Ragged end (< one tile): plain bounds-checked loads, by the block next in the tile order.
  if (blockIdx.x == full_tiles % gridDim.x) {
    for (int64_t i = full_tiles * kTileFloats + threadIdx.x; i < n; i += blockDim.x) {
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

template <int Stages>
cudaError_t LaunchPipeline(const float* d_in, float* d_out, int64_t n, const EwProgram& program,
                           bool out_vec, detail::Launcher& launch) {
  const int64_t full_tiles = n / EwTileFloats<Stages>();
  const int64_t cap =
      static_cast<int64_t>(launch.config().multiprocessors) * kEwPipelineBlocksPerSm;
  const int64_t grid = std::max<int64_t>(1, std::min(full_tiles, cap));
  return launch("elementwise.pipeline", EwPipelineKernel<Stages>, grid, kEwThreads, d_in, d_out,
                n, program, out_vec);
}

// The one sizing/dispatch path, for launching and for describing. n >= 1, arguments valid.
cudaError_t DispatchElementwise(const float* d_in, float* d_out, int64_t n,
                                const EwProgram& program, bool out_vec,
                                detail::Launcher& launch) {
  const LaunchConfig& config = launch.config();
  if (config.staging == Staging::kDirect) {
    const int64_t wanted = detail::CeilDiv(detail::CeilDiv(n, 4), kEwThreads * kEwDirectUnroll);
    const int64_t cap = static_cast<int64_t>(config.multiprocessors) * kEwDirectBlocksPerSm;
    const int64_t grid = std::max<int64_t>(1, std::min(wanted, cap));
    return launch("elementwise.direct", EwDirectKernel, grid, kEwThreads, d_in, d_out, n,
                  program, out_vec);
  }
  switch (config.stages) {
    case 1: return LaunchPipeline<1>(d_in, d_out, n, program, out_vec, launch);
    case 2: return LaunchPipeline<2>(d_in, d_out, n, program, out_vec, launch);
    case 3: return LaunchPipeline<3>(d_in, d_out, n, program, out_vec, launch);
    case 4: return LaunchPipeline<4>(d_in, d_out, n, program, out_vec, launch);
    case 5: return LaunchPipeline<5>(d_in, d_out, n, program, out_vec, launch);
    case 6: return LaunchPipeline<6>(d_in, d_out, n, program, out_vec, launch);
    case 7: return LaunchPipeline<7>(d_in, d_out, n, program, out_vec, launch);
    case 8: return LaunchPipeline<8>(d_in, d_out, n, program, out_vec, launch);
    default: return cudaErrorInvalidValue;  // unreachable after ValidateShapeConfig
  }
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
