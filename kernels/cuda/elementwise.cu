// Elementwise op: entry points and dispatch. Two families of load loops over the same math:
//  - staged (kPipeline, kPipelineThread, kPrimitives, kBulk): a persistent grid; each block
//    streams its tiles global -> shared through the strategy's `stages` buffers
//    (detail/pipeline_staging.cuh), then applies the program from shared memory;
//  - kDirect: a grid-stride loop of 16-byte register loads, several in flight per thread.
// Both are memory-bound; the program is interpreted from the kernel parameters, one
// instruction at a time over a register array per thread (ApplyEwN). Kernels are templated on
// the storage type S (float, double, __half, int32_t: 4, 2, 8, 4 elements per 16-byte vector)
// and compute in ComputeOf<S>. The staging moves bytes (16-byte vectors), so one staged kernel
// per strategy serves every type; stages and opcodes stay runtime values. Kernels: 4 types x
// (4 staged strategies + direct).
// PDL: each block waits for the previous kernel of the stream before its first global access
// (d_out may be what that kernel is still reading), and triggers its dependent after its last
// store is issued.
#include <algorithm>
#include <cstdint>

#include "kernels/cuda/detail/element_access.cuh"
#include "kernels/cuda/detail/launch.cuh"
#include "kernels/cuda/detail/pipeline_staging.cuh"
#include "kernels/cuda/detail/row_access.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/tuning/elementwise_policy.h"
#include "kernels/cuda/tuning/staging_table.h"

namespace gpupipe::kernels::cuda {
namespace {

using detail::ComputeOf;
using detail::kVecElems;

// Tuning values (the reasons beside them): tuning/elementwise_policy.h.
constexpr int kEwThreads = tuning::ElementwisePolicy::kThreads;
constexpr int kEwStagedGroup = tuning::ElementwisePolicy::kStagedGroup;  // see ApplyEwN
static_assert(kEwThreads * kMaxStages * detail::kStagingVecBytes <= detail::kStagingBudgetBytes,
              "every stage count keeps at least one vector per thread per tile");
constexpr int kEwPipelineBlocksPerSm = tuning::ElementwisePolicy::kStagedBlocksPerSm;
constexpr int kEwDirectUnroll = tuning::ElementwisePolicy::kDirectUnroll;
// The direct path launches a block per kEwThreads * kEwDirectUnroll vectors (each thread one
// group of loads and done), not a persistent grid: no thread's groups of loads wait behind its
// earlier ones, and the block scheduler refills each SM as its blocks retire, which a grid of a
// few blocks an SM looping over the input does not match (bench/results/kernels-h200.md,
// "Tuning notes: elementwise"). The cap only keeps the grid within launch limits; the kernel's
// grid-stride loop covers the rest.
constexpr int64_t kEwDirectMaxBlocks = int64_t{1} << 24;

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

template <typename S, Staging St>
__global__ void __launch_bounds__(kEwThreads)
    EwStagedKernel(const S* d_in, S* d_out, int64_t n, EwProgram program, bool out_vec,
                   int stages) {
  constexpr int N = kVecElems<S>;
  __shared__ detail::StagingSmem smem;
  const detail::TileGeometry g = detail::StagedGeometry(St, kEwThreads, stages);
  const int64_t tile_elems = int64_t{N} * g.tile_vecs();
  // Tile t goes to block t % gridDim.x. Tiles start at multiples of the tile size (a multiple of
  // 16 bytes) from d_in, which is 16-byte aligned, as the staged copies require. The staging
  // copies 16-byte vectors, whatever S is.
  const int64_t full_tiles = n / tile_elems;
  const int64_t count =
      blockIdx.x < full_tiles ? (full_tiles - 1 - blockIdx.x) / gridDim.x + 1 : 0;

  // Independent prologue: the strategy's shared-memory barriers.
  detail::StagerFor<St> stager(smem, g);
  detail::WaitForPrimaryGrids();

  // Rank r takes vectors r + u * ranks of the tile: conflict-free shared reads and coalesced
  // global stores.
  stager.ForEach(
      reinterpret_cast<const uint4*>(d_in), blockIdx.x, gridDim.x, count,
      [&](int64_t tile, const uint4* s_tile, int rank) {
        const int4* s4 = reinterpret_cast<const int4*>(s_tile);
        S* dst = d_out + tile * tile_elems + int64_t{N} * rank;
        const int64_t vec_stride = int64_t{N} * g.ranks;
        int u = 0;
        for (; u + kEwStagedGroup <= g.vecs_per_rank; u += kEwStagedGroup) {
          int4 raw[kEwStagedGroup];
#pragma unroll
          for (int j = 0; j < kEwStagedGroup; ++j) raw[j] = s4[rank + (u + j) * g.ranks];
          ApplyAndStore<S, kEwStagedGroup>(program, raw, dst + u * vec_stride, vec_stride,
                                           out_vec);
        }
        for (; u < g.vecs_per_rank; ++u) {
          const int4 raw[1] = {s4[rank + u * g.ranks]};
          ApplyAndStore<S, 1>(program, raw, dst + u * vec_stride, 0, out_vec);
        }
      });
  stager.Quit();

  // Ragged end (< one tile): plain bounds-checked loads, by the block next in the tile order.
  if (blockIdx.x == full_tiles % gridDim.x) {
    for (int64_t i = full_tiles * tile_elems + threadIdx.x; i < n; i += blockDim.x) {
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

template <typename S, Staging St>
cudaError_t LaunchStaged(const S* d_in, S* d_out, int64_t n, const EwProgram& program,
                         bool out_vec, int stages, detail::Launcher& launch) {
  const detail::TileGeometry g = detail::StagedGeometry(St, kEwThreads, stages);
  const int64_t full_tiles = n / (int64_t{kVecElems<S>} * g.tile_vecs());
  const int64_t cap =
      static_cast<int64_t>(launch.config().multiprocessors) * kEwPipelineBlocksPerSm;
  const int64_t grid = std::max<int64_t>(1, std::min(full_tiles, cap));
  return launch(EwKernelName(St), EwStagedKernel<S, St>, grid, kEwThreads, d_in, d_out, n,
                program, out_vec, stages);
}

// The one sizing/dispatch path, for launching and for describing. n >= 1, arguments valid.
template <typename S>
cudaError_t DispatchElementwise(const S* d_in, S* d_out, int64_t n, const EwProgram& program,
                                bool out_vec, detail::Launcher& launch) {
  const LaunchConfig& config = launch.config();
  const tuning::StagingChoice choice = tuning::ResolveStaging(
      config, tuning::StagingFamily::kElementwise, detail::StorageTraits<S>::kType, 1, n);
  switch (choice.staging) {
    case Staging::kPipeline:
      return LaunchStaged<S, Staging::kPipeline>(d_in, d_out, n, program, out_vec, choice.stages,
                                                 launch);
    case Staging::kPipelineThread:
      return LaunchStaged<S, Staging::kPipelineThread>(d_in, d_out, n, program, out_vec,
                                                       choice.stages, launch);
    case Staging::kPrimitives:
      return LaunchStaged<S, Staging::kPrimitives>(d_in, d_out, n, program, out_vec,
                                                   choice.stages, launch);
    case Staging::kBulk:
      return LaunchStaged<S, Staging::kBulk>(d_in, d_out, n, program, out_vec, choice.stages,
                                             launch);
    case Staging::kDirect:
    case Staging::kAuto: break;
  }
  const int64_t wanted =
      detail::CeilDiv(detail::CeilDiv(n, kVecElems<S>), kEwThreads * kEwDirectUnroll);
  const int64_t grid = std::max<int64_t>(1, std::min(wanted, kEwDirectMaxBlocks));
  return launch(EwKernelName(Staging::kDirect), EwDirectKernel<S>, grid, kEwThreads, d_in,
                d_out, n, program, out_vec);
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
