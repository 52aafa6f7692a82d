// Elementwise op: entry points and dispatch. Two staging strategies over the same math:
//  - kPipeline: a persistent grid; each block streams its tiles global -> shared through a
//    block-scoped cuda::pipeline of `stages` buffers (cp.async), then applies the program from
//    shared memory;
//  - kDirect: a grid-stride loop of 16-byte register loads, several in flight per thread.
// Both are memory-bound; the program is interpreted from the kernel parameters, one
// instruction at a time over a register array per thread (ApplyEwN). Kernels are templated on
// the storage type S (float, double, __half, int32_t: 4, 2, 8, 4 elements per 16-byte vector)
// and compute in ComputeOf<S>; stages and opcodes stay runtime values, except the pipeline's
// stage count (its shared state is sized by it).
// PDL: each block waits for the previous kernel of the stream before its first global access
// (d_out may be what that kernel is still reading), and triggers its dependent after its last
// store is issued.
#include <cooperative_groups.h>
#include <cuda/pipeline>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/detail/element_access.cuh"
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
using detail::ComputeOf;
using detail::kVecElems;

constexpr int kEwThreads = 256;
// Shared-memory staging budget of one pipeline block, split into `stages` tiles: fewer stages
// mean bigger tiles, so every stage count keeps about the same bytes in flight per block, and
// each thread takes several 16-byte vectors per tile (the program's dispatch is paid per group
// of values, see ApplyEwN). At most 32 KiB, so 4 blocks still fit an SM's shared memory.
constexpr int kEwPipelineBudgetBytes = 32768;
template <int Stages>
constexpr int EwVecsPerThread() {
  // 16-byte vectors per thread per tile: 4 (stages 1-2: 16 KiB tiles), 2 (3-4: 8 KiB),
  // 1 (5-8: 4 KiB).
  return Stages <= 2 ? 4 : Stages <= 4 ? 2 : 1;
}
template <int Stages>
constexpr int EwTileBytes() {
  return kEwThreads * 16 * EwVecsPerThread<Stages>();
}
static_assert(2 * EwTileBytes<2>() <= kEwPipelineBudgetBytes &&
                  4 * EwTileBytes<4>() <= kEwPipelineBudgetBytes &&
                  8 * EwTileBytes<8>() <= kEwPipelineBudgetBytes,
              "every stage count stays within the shared-memory budget");
// Persistent-grid sizes: blocks per SM for each strategy.
constexpr int kEwPipelineBlocksPerSm = 4;
constexpr int kEwDirectBlocksPerSm = 8;
// Independent 16-byte loads in flight per thread in the direct path; the program runs over all
// of their values at once.
constexpr int kEwDirectUnroll = 4;

// The program over U raw 16-byte vectors of S (U * kVecElems<S> values per instruction
// dispatch); stores vector u at dst + u * dst_stride elements.
template <typename S, int U>
__device__ __forceinline__ void ApplyAndStore(const EwProgram& program, const int4 (&raw)[U],
                                              S* dst, int64_t dst_stride, bool out_vec) {
  constexpr int N = kVecElems<S>;
  using C = ComputeOf<S>;
  C x[U * N];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    C v[N];
    detail::LoadVecFromRaw<S>(raw[u], v);
#pragma unroll
    for (int k = 0; k < N; ++k) x[u * N + k] = v[k];
  }
  ApplyEwN(program, x);
#pragma unroll
  for (int u = 0; u < U; ++u) {
    C v[N];
#pragma unroll
    for (int k = 0; k < N; ++k) v[k] = x[u * N + k];
    detail::StoreVec<S>(dst + u * dst_stride, v, out_vec);
  }
}

// ---- entry points ----------------------------------------------------------------------------
// d_in and d_out may alias (in place): every element is read before it is written, by the same
// block, and no element is read twice. Hence no __restrict__ here.

template <typename S, int Stages>
__global__ void __launch_bounds__(kEwThreads)
    EwPipelineKernel(const S* d_in, S* d_out, int64_t n, EwProgram program, bool out_vec) {
  __shared__ ::cuda::pipeline_shared_state<::cuda::thread_scope_block, Stages> state;
  constexpr int kVecs = EwVecsPerThread<Stages>();
  constexpr int kTileFloats = EwTileBytes<Stages>() / 4;
  constexpr int64_t kTileElems = EwTileBytes<Stages>() / sizeof(S);
  __shared__ alignas(16) float tiles[Stages][kTileFloats];

  const cg::thread_block block = cg::this_thread_block();
  // Independent prologue: the pipeline's shared-memory barriers.
  auto pipe = ::cuda::make_pipeline(block, &state);
  detail::WaitForPrimaryGrids();

  // Tile t goes to block t % gridDim.x. Tiles start at multiples of 4 KiB from d_in, which is
  // 16-byte aligned, as the 16-byte cp.async requires. The staging copies bytes, so it sees the
  // data as floats whatever S is.
  const int64_t full_tiles = n / kTileElems;
  const int64_t count =
      blockIdx.x < full_tiles ? (full_tiles - 1 - blockIdx.x) / gridDim.x + 1 : 0;

  // Thread t takes vector number t + u * kEwThreads of the tile: conflict-free shared reads
  // and coalesced global stores.
  detail::ForEachStagedTile<Stages, kTileFloats>(
      block, pipe, tiles, reinterpret_cast<const float*>(d_in), blockIdx.x, gridDim.x, count,
      [&](int64_t tile, const float* s_tile) {
        int4 raw[kVecs];
#pragma unroll
        for (int u = 0; u < kVecs; ++u) {
          raw[u] = reinterpret_cast<const int4*>(s_tile)[threadIdx.x + u * kEwThreads];
        }
        S* dst = d_out + tile * kTileElems + kVecElems<S> * threadIdx.x;
        ApplyAndStore<S, kVecs>(program, raw, dst, int64_t{kVecElems<S>} * kEwThreads, out_vec);
      });

  // Ragged end (< one tile): plain bounds-checked loads, by the block next in the tile order.
  if (blockIdx.x == full_tiles % gridDim.x) {
    for (int64_t i = full_tiles * kTileElems + threadIdx.x; i < n; i += blockDim.x) {
      detail::StoreElem(d_out + i, ApplyEw(program, detail::LoadElem(d_in + i)));
    }
  }
  detail::AllowDependentGrids();
}

template <typename S>
__global__ void __launch_bounds__(kEwThreads)
    EwDirectKernel(const S* d_in, S* d_out, int64_t n, EwProgram program, bool out_vec) {
  constexpr int N = kVecElems<S>;
  const int4* in4 = reinterpret_cast<const int4*>(d_in);
  const int64_t nvec = n / N;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  detail::WaitForPrimaryGrids();

  int64_t v = tid;
  for (; v + (kEwDirectUnroll - 1) * stride < nvec; v += kEwDirectUnroll * stride) {
    int4 raw[kEwDirectUnroll];
#pragma unroll
    for (int u = 0; u < kEwDirectUnroll; ++u) raw[u] = __ldcg(in4 + v + u * stride);
    ApplyAndStore<S, kEwDirectUnroll>(program, raw, d_out + N * v, N * stride, out_vec);
  }
  for (; v < nvec; v += stride) {
    const int4 raw[1] = {__ldcg(in4 + v)};
    ApplyAndStore<S, 1>(program, raw, d_out + N * v, 0, out_vec);
  }

  // n % N (< 8) trailing elements; the grid always has at least kEwThreads threads.
  const int64_t i = N * nvec + tid;
  if (i < n) detail::StoreElem(d_out + i, ApplyEw(program, detail::LoadElem(d_in + i)));
  detail::AllowDependentGrids();
}

// ---- dispatch --------------------------------------------------------------------------------

template <typename S, int Stages>
cudaError_t LaunchPipeline(const S* d_in, S* d_out, int64_t n, const EwProgram& program,
                           bool out_vec, detail::Launcher& launch) {
  const int64_t full_tiles = n / (EwTileBytes<Stages>() / static_cast<int64_t>(sizeof(S)));
  const int64_t cap =
      static_cast<int64_t>(launch.config().multiprocessors) * kEwPipelineBlocksPerSm;
  const int64_t grid = std::max<int64_t>(1, std::min(full_tiles, cap));
  return launch("elementwise.pipeline", EwPipelineKernel<S, Stages>, grid, kEwThreads, d_in,
                d_out, n, program, out_vec);
}

// The one sizing/dispatch path, for launching and for describing. n >= 1, arguments valid.
template <typename S>
cudaError_t DispatchElementwise(const S* d_in, S* d_out, int64_t n, const EwProgram& program,
                                bool out_vec, detail::Launcher& launch) {
  const LaunchConfig& config = launch.config();
  if (config.staging == Staging::kDirect) {
    const int64_t wanted =
        detail::CeilDiv(detail::CeilDiv(n, kVecElems<S>), kEwThreads * kEwDirectUnroll);
    const int64_t cap = static_cast<int64_t>(config.multiprocessors) * kEwDirectBlocksPerSm;
    const int64_t grid = std::max<int64_t>(1, std::min(wanted, cap));
    return launch("elementwise.direct", EwDirectKernel<S>, grid, kEwThreads, d_in, d_out, n,
                  program, out_vec);
  }
  switch (config.stages) {
    case 1: return LaunchPipeline<S, 1>(d_in, d_out, n, program, out_vec, launch);
    case 2: return LaunchPipeline<S, 2>(d_in, d_out, n, program, out_vec, launch);
    case 3: return LaunchPipeline<S, 3>(d_in, d_out, n, program, out_vec, launch);
    case 4: return LaunchPipeline<S, 4>(d_in, d_out, n, program, out_vec, launch);
    case 5: return LaunchPipeline<S, 5>(d_in, d_out, n, program, out_vec, launch);
    case 6: return LaunchPipeline<S, 6>(d_in, d_out, n, program, out_vec, launch);
    case 7: return LaunchPipeline<S, 7>(d_in, d_out, n, program, out_vec, launch);
    case 8: return LaunchPipeline<S, 8>(d_in, d_out, n, program, out_vec, launch);
    default: return cudaErrorInvalidValue;  // unreachable after ValidateShapeConfig
  }
}

// The op's one dtype dispatch: float32, float64, float16, int32.
cudaError_t DispatchElementwiseType(const void* d_in, ElementType type, void* d_out, int64_t n,
                                    const EwProgram& program, bool out_vec,
                                    detail::Launcher& launch) {
  return detail::DispatchType<true, true, true>(type, [&](auto tag) {
    using S = decltype(tag);
    return DispatchElementwise<S>(static_cast<const S*>(d_in), static_cast<S*>(d_out), n,
                                  program, out_vec, launch);
  });
}

}  // namespace

cudaError_t Elementwise(const void* d_in, ElementType in_type, void* d_out, int64_t n,
                        const EwProgram& program, const LaunchConfig& config, int* kernels) {
  detail::Launcher launch(config, kernels);
  if (const cudaError_t err = detail::ValidateConfig(config); err != cudaSuccess) return err;
  if (n < 0 || detail::ValidateProgram(program, in_type) != cudaSuccess) {
    return cudaErrorInvalidValue;
  }
  if (in_type == ElementType::kInt64 || ElementSize(in_type) == 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  if (d_in == nullptr || d_out == nullptr || !detail::IsAligned(d_in, 16) ||
      !detail::IsAligned(d_out, ElementSize(in_type))) {
    return cudaErrorInvalidValue;
  }
  // d_out carries no 16-byte alignment promise; fall back to element stores when it is not
  // 16-byte aligned.
  const bool out_vec = detail::IsAligned(d_out, 16);
  return DispatchElementwiseType(d_in, in_type, d_out, n, program, out_vec, launch);
}

std::vector<KernelLaunchInfo> DescribeElementwise(int64_t n, ElementType type,
                                                  const LaunchConfig& config) {
  std::vector<KernelLaunchInfo> out;
  if (detail::ValidateShapeConfig(config) != cudaSuccess || n <= 0) return out;
  detail::Launcher launch(config, &out);
  (void)DispatchElementwiseType(nullptr, type, nullptr, n, EwProgram{}, true, launch);
  return out;
}

}  // namespace gpupipe::kernels::cuda
