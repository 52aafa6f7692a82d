// cumsum: inclusive scans along rows (contract in cumsum.h). Layout as CUB: dispatch (path and
// grid choice, batching) at the bottom, __global__ entry points above it, and the block- and
// warp-level scan pieces at the top.
#include <cuda/atomic>
#include <cuda_fp16.h>

#include <algorithm>
#include <limits>
#include <type_traits>

#include "kernels/cuda/cumsum.h"
#include "kernels/cuda/detail/launch.cuh"
#include "kernels/cuda/detail/row_access.cuh"
#include "kernels/cuda/detail/typed_items.cuh"

namespace gpupipe::kernels::cuda {
namespace {

using detail::ItemTraits;

// ---- tuning (initial values, chosen for sm_90 from CUB's scan policies: 256-thread blocks and
// 16 items a thread; not yet measured on the H200) -------------------------------------------
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kItems = 16;                       // per thread, block paths
constexpr int64_t kTile = kThreads * kItems;     // 4096 elements
constexpr int kWarpItems = 8;                    // per lane, warp path
constexpr int64_t kWarpTile = 32 * kWarpItems;   // 256 elements
constexpr int64_t kWarpRowsMaxCols = 2048;       // rows up to this length: one warp a row
constexpr int kBlockRowsMinRowsPerSm = 4;        // rows >= this * SMs: one block a row
constexpr int kWarpRowsBlocksPerSm = 16;
constexpr int kBlockRowsBlocksPerSm = 4;

constexpr uint32_t kFlagInvalid = 0;    // tile not yet published
constexpr uint32_t kFlagAggregate = 1;  // the tile's own total is published
constexpr uint32_t kFlagPrefix = 2;     // the inclusive prefix up to and including the tile

template <typename In> struct OutOf { using type = In; };
template <> struct OutOf<int32_t> { using type = long long; };

template <typename Out, typename Acc>
__device__ __forceinline__ Out FromAcc(Acc a) { return static_cast<Out>(a); }
template <>
__device__ __forceinline__ __half FromAcc<__half, float>(float a) { return __float2half_rn(a); }

constexpr unsigned kFullMask = 0xffffffffu;

// ---- scan pieces -------------------------------------------------------------------------------

// In-place inclusive scan of a thread's items; returns their total.
template <typename Acc, int N>
__device__ __forceinline__ Acc ThreadScan(Acc (&v)[N]) {
#pragma unroll
  for (int k = 1; k < N; ++k) v[k] += v[k - 1];
  return v[N - 1];
}

// Inclusive scan over the lanes of a warp.
template <typename Acc>
__device__ __forceinline__ Acc WarpInclusiveScan(Acc x) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int offset = 1; offset < 32; offset <<= 1) {
    const Acc y = __shfl_up_sync(kFullMask, x, offset);
    if (lane >= offset) x += y;
  }
  return x;
}

template <typename Acc>
__device__ __forceinline__ Acc WarpSum(Acc x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(kFullMask, x, offset);
  return x;
}

// Exclusive prefix of `thread_total` over the block's threads, and the block's total.
// Ends with a barrier, so `warp_totals` may be reused right after.
template <typename Acc>
__device__ __forceinline__ Acc BlockExclusiveScan(Acc thread_total, Acc* warp_totals,
                                                  Acc* block_total) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const Acc inclusive = WarpInclusiveScan(thread_total);
  Acc exclusive = __shfl_up_sync(kFullMask, inclusive, 1);
  if (lane == 0) exclusive = Acc(0);
  if (lane == 31) warp_totals[warp] = inclusive;
  __syncthreads();
  Acc warp_prefix = Acc(0);
  Acc total = Acc(0);
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    const Acc t = warp_totals[w];
    if (w < warp) warp_prefix += t;
    total += t;
  }
  *block_total = total;
  __syncthreads();
  return warp_prefix + exclusive;
}

// Loads a thread's run, scans it and writes prefix + scan. `valid` may be <= 0.
template <typename In, int N>
struct ItemRun {
  using Acc = typename ItemTraits<In>::Acc;
  using Out = typename OutOf<In>::type;
  Acc v[N];

  __device__ __forceinline__ Acc LoadAndScan(const In* p, int64_t valid) {
    detail::LoadItems<In, N>(p, valid, v, Acc(0),
                             [](typename ItemTraits<In>::Bits b) { return ItemTraits<In>::ToAcc(b); });
    return ThreadScan(v);
  }
  __device__ __forceinline__ void Store(Out* p, int64_t valid, Acc prefix) const {
    Out o[N];
#pragma unroll
    for (int k = 0; k < N; ++k) o[k] = FromAcc<Out>(prefix + v[k]);
    detail::StoreItems<Out, N>(p, valid, o);
  }
};

// ---- look-back workspace -----------------------------------------------------------------------

template <typename Acc>
struct LookbackState {
  unsigned long long* counter;  // next tile to claim
  uint32_t* flags;              // kFlag* per tile
  Acc* aggregates;              // per tile, valid from kFlagAggregate
  Acc* inclusives;              // per tile, valid from kFlagPrefix
};

size_t Round16(size_t n) { return (n + 15) / 16 * 16; }

// Layout: counter (16 bytes), flags, aggregates, inclusives, each 16-byte aligned; values take
// 8 bytes whatever the accumulator, so the size depends on the tile count only.
size_t LookbackBytes(int64_t tiles) {
  const auto t = static_cast<size_t>(tiles);
  return 16 + Round16(4 * t) + 2 * Round16(8 * t);
}

template <typename Acc>
LookbackState<Acc> LookbackLayout(void* d_workspace, int64_t tiles) {
  auto* base = static_cast<char*>(d_workspace);
  const auto t = static_cast<size_t>(tiles);
  LookbackState<Acc> s;
  s.counter = reinterpret_cast<unsigned long long*>(base);
  s.flags = reinterpret_cast<uint32_t*>(detail::Advance(base, 16));
  s.aggregates = reinterpret_cast<Acc*>(detail::Advance(base, 16 + Round16(4 * t)));
  s.inclusives = reinterpret_cast<Acc*>(detail::Advance(base, 16 + Round16(4 * t) + Round16(8 * t)));
  return s;
}

// ---- kernels -----------------------------------------------------------------------------------

// One warp scans a whole row, 256 elements at a time, carrying the running total.
template <typename In>
__global__ void __launch_bounds__(kThreads)
    WarpRowsKernel(const In* d_in, typename OutOf<In>::type* d_out, int64_t rows, int64_t cols,
                   typename ItemTraits<In>::Acc* d_carry) {
  using Acc = typename ItemTraits<In>::Acc;
  detail::WaitForPrimaryGrids();
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarps;
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5); row < rows;
       row += warps) {
    const In* in = d_in + row * cols;
    auto* out = d_out + row * cols;
    Acc carry = d_carry != nullptr ? __ldcg(d_carry + row) : Acc(0);
    for (int64_t base = 0; base < cols; base += kWarpTile) {
      const int64_t first = base + static_cast<int64_t>(lane) * kWarpItems;
      const int64_t valid = cols - first;
      ItemRun<In, kWarpItems> run;
      const Acc total = run.LoadAndScan(in + first, valid);
      const Acc inclusive = WarpInclusiveScan(total);
      Acc exclusive = __shfl_up_sync(kFullMask, inclusive, 1);
      if (lane == 0) exclusive = Acc(0);
      run.Store(out + first, valid, carry + exclusive);
      carry += __shfl_sync(kFullMask, inclusive, 31);
    }
    if (d_carry != nullptr && lane == 0) d_carry[row] = carry;
  }
  detail::AllowDependentGrids();
}

// One block scans a whole row, 4096 elements at a time, carrying the running total.
template <typename In>
__global__ void __launch_bounds__(kThreads)
    BlockRowsKernel(const In* d_in, typename OutOf<In>::type* d_out, int64_t rows, int64_t cols,
                    typename ItemTraits<In>::Acc* d_carry) {
  using Acc = typename ItemTraits<In>::Acc;
  __shared__ Acc warp_totals[kWarps];
  detail::WaitForPrimaryGrids();
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const In* in = d_in + row * cols;
    auto* out = d_out + row * cols;
    Acc carry = d_carry != nullptr ? __ldcg(d_carry + row) : Acc(0);
    for (int64_t base = 0; base < cols; base += kTile) {
      const int64_t first = base + static_cast<int64_t>(threadIdx.x) * kItems;
      const int64_t valid = cols - first;
      ItemRun<In, kItems> run;
      Acc tile_total;
      const Acc exclusive = BlockExclusiveScan(run.LoadAndScan(in + first, valid), warp_totals,
                                               &tile_total);
      run.Store(out + first, valid, carry + exclusive);
      carry += tile_total;
    }
    // Every thread holds the same carry; one writes it. The barriers inside the scan keep the
    // carry read of the next row (another row) independent of this write.
    if (d_carry != nullptr && threadIdx.x == 0) d_carry[row] = carry;
  }
  detail::AllowDependentGrids();
}

// Resets the look-back state of `tiles` tiles.
__global__ void __launch_bounds__(kThreads)
    LookbackInitKernel(unsigned long long* d_counter, uint32_t* d_flags, int64_t tiles) {
  detail::WaitForPrimaryGrids();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < tiles;
       i += stride) {
    d_flags[i] = kFlagInvalid;
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) *d_counter = 0;
  detail::AllowDependentGrids();
}

template <typename Acc>
__device__ __forceinline__ void Publish(uint32_t* flag, Acc* slot, Acc value, uint32_t state) {
  *slot = value;
  ::cuda::atomic_ref<uint32_t, ::cuda::thread_scope_device>(*flag).store(state,
                                                                     ::cuda::memory_order_release);
}

// Single-pass scan with decoupled look-back over the tiles of rows [row0, row0 + tiles /
// tiles_per_row). A block claims the next tile from the counter (so every tile it waits for
// belongs to a block that already runs: forward progress without relying on blockIdx order),
// scans it, publishes its aggregate, and warp 0 walks back over the row's earlier tiles, 32 at
// a time, until it meets an inclusive prefix; the row's first tile starts from the carry.
template <typename In>
__global__ void __launch_bounds__(kThreads)
    LookbackKernel(const In* d_in, typename OutOf<In>::type* d_out, int64_t row0, int64_t cols,
                   int64_t tiles_per_row, typename ItemTraits<In>::Acc* d_carry,
                   LookbackState<typename ItemTraits<In>::Acc> state) {
  using Acc = typename ItemTraits<In>::Acc;
  __shared__ Acc warp_totals[kWarps];
  __shared__ long long s_tile;
  __shared__ Acc s_prefix;
  detail::WaitForPrimaryGrids();
  if (threadIdx.x == 0) s_tile = static_cast<long long>(atomicAdd(state.counter, 1ull));
  __syncthreads();
  const int64_t tile = s_tile;
  const int64_t row_in_batch = tile / tiles_per_row;
  const int64_t j = tile - row_in_batch * tiles_per_row;  // tile index within its row
  const int64_t row = row0 + row_in_batch;
  const int64_t first = j * kTile + static_cast<int64_t>(threadIdx.x) * kItems;
  const int64_t valid = cols - first;

  ItemRun<In, kItems> run;
  Acc tile_total;
  const Acc exclusive = BlockExclusiveScan(run.LoadAndScan(d_in + row * cols + first, valid),
                                           warp_totals, &tile_total);
  const int lane = threadIdx.x & 31;
  if (j == 0) {
    if (threadIdx.x == 0) {
      const Acc carry = d_carry != nullptr ? __ldcg(d_carry + row) : Acc(0);
      Publish(state.flags + tile, state.inclusives + tile, carry + tile_total, kFlagPrefix);
      s_prefix = carry;
    }
  } else if (threadIdx.x < 32) {
    if (lane == 0) Publish(state.flags + tile, state.aggregates + tile, tile_total, kFlagAggregate);
    const int64_t row_first = tile - j;  // always publishes an inclusive prefix
    Acc prefix = Acc(0);
    for (int64_t newest = tile - 1;; newest -= 32) {
      const int64_t q = newest - lane;
      const bool in_row = q >= row_first;
      uint32_t flag;
      do {
        flag = in_row ? ::cuda::atomic_ref<uint32_t, ::cuda::thread_scope_device>(state.flags[q])
                            .load(::cuda::memory_order_relaxed)
                      : kFlagPrefix;
      } while (__any_sync(kFullMask, flag == kFlagInvalid));
      // Pairs with the release in Publish: the values below are those the flags announce.
      ::cuda::atomic_thread_fence(::cuda::memory_order_acquire, ::cuda::thread_scope_device);
      Acc value = Acc(0);
      if (in_row) {
        value = flag == kFlagPrefix ? __ldcg(state.inclusives + q) : __ldcg(state.aggregates + q);
      }
      const unsigned prefixes = __ballot_sync(kFullMask, flag == kFlagPrefix);
      // Only tiles newer than the nearest inclusive prefix (lowest such lane) count.
      if (prefixes != 0 && lane > __ffs(prefixes) - 1) value = Acc(0);
      prefix += WarpSum(value);
      if (prefixes != 0) break;
    }
    if (lane == 0) {
      Publish(state.flags + tile, state.inclusives + tile, prefix + tile_total, kFlagPrefix);
      s_prefix = prefix;
    }
  }
  __syncthreads();
  const Acc prefix = s_prefix;
  run.Store(d_out + row * cols + first, valid, prefix + exclusive);
  if (d_carry != nullptr && j == tiles_per_row - 1 && threadIdx.x == 0) {
    d_carry[row] = prefix + tile_total;
  }
  detail::AllowDependentGrids();
}

// ---- dispatch ----------------------------------------------------------------------------------

enum class CumsumPath { kWarpRows, kBlockRows, kLookback };

CumsumPath ChoosePath(int64_t rows, int64_t cols, int multiprocessors) {
  if (cols <= kWarpRowsMaxCols) return CumsumPath::kWarpRows;
  if (rows >= static_cast<int64_t>(kBlockRowsMinRowsPerSm) * multiprocessors) {
    return CumsumPath::kBlockRows;
  }
  return CumsumPath::kLookback;
}

// Rows one look-back launch covers: whole rows, at most kCumsumMaxTilesPerLaunch tiles unless
// one row alone has more.
int64_t LookbackRowsPerBatch(int64_t rows, int64_t cols) {
  const int64_t tiles_per_row = detail::CeilDiv(cols, kTile);
  return std::min(rows, std::max<int64_t>(1, kCumsumMaxTilesPerLaunch / tiles_per_row));
}

template <typename In>
cudaError_t Dispatch(const In* d_in, typename OutOf<In>::type* d_out, int64_t rows,
                     int64_t cols, typename ItemTraits<In>::Acc* d_carry, void* d_workspace,
                     detail::Launcher& launch) {
  using Acc = typename ItemTraits<In>::Acc;
  const int mp = launch.config().multiprocessors;
  switch (ChoosePath(rows, cols, mp)) {
    case CumsumPath::kWarpRows: {
      const int64_t grid = std::min<int64_t>(detail::CeilDiv(rows, kWarps),
                                             static_cast<int64_t>(kWarpRowsBlocksPerSm) * mp);
      return launch("cumsum.warp-rows", WarpRowsKernel<In>, grid, kThreads, d_in, d_out, rows,
                    cols, d_carry);
    }
    case CumsumPath::kBlockRows: {
      const int64_t grid =
          std::min<int64_t>(rows, static_cast<int64_t>(kBlockRowsBlocksPerSm) * mp);
      return launch("cumsum.block-rows", BlockRowsKernel<In>, grid, kThreads, d_in, d_out, rows,
                    cols, d_carry);
    }
    case CumsumPath::kLookback:
      break;
  }
  const int64_t tiles_per_row = detail::CeilDiv(cols, kTile);
  const int64_t batch_rows = LookbackRowsPerBatch(rows, cols);
  for (int64_t row0 = 0; row0 < rows; row0 += batch_rows) {
    const int64_t n = std::min(batch_rows, rows - row0);
    const int64_t tiles = n * tiles_per_row;
    const LookbackState<Acc> state = LookbackLayout<Acc>(d_workspace, tiles);
    const int64_t init_grid = std::min<int64_t>(detail::CeilDiv(tiles, kThreads), 4 * mp);
    cudaError_t err = launch("cumsum.init", LookbackInitKernel, init_grid, kThreads,
                             state.counter, state.flags, tiles);
    if (err != cudaSuccess) return err;
    err = launch("cumsum.lookback", LookbackKernel<In>, tiles, kThreads, d_in, d_out, row0, cols,
                 tiles_per_row, d_carry, state);
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

// Calls `fn(tag)` with a null pointer of the input type, the one place that maps an
// ElementType to a kernel instantiation. False for types cumsum does not accept.
template <typename Fn>
bool WithInputType(ElementType type, Fn&& fn, cudaError_t* err) {
  switch (type) {
    case ElementType::kFloat32: *err = fn(static_cast<const float*>(nullptr)); return true;
    case ElementType::kFloat64: *err = fn(static_cast<const double*>(nullptr)); return true;
    case ElementType::kFloat16: *err = fn(static_cast<const __half*>(nullptr)); return true;
    case ElementType::kInt32: *err = fn(static_cast<const int32_t*>(nullptr)); return true;
    case ElementType::kInt64: return false;
  }
  return false;
}

bool ValidShape(int64_t rows, int64_t cols) {
  return rows >= 1 && cols >= 1 && cols <= std::numeric_limits<int64_t>::max() / rows &&
         // one look-back launch's grid (tiles) must fit a grid dimension
         detail::CeilDiv(cols, kTile) <= std::numeric_limits<int32_t>::max();
}

}  // namespace

size_t RowCumsumWorkspaceBytes(int64_t rows, int64_t cols) {
  if (!ValidShape(rows, cols) || cols <= kWarpRowsMaxCols) return 0;
  return LookbackBytes(LookbackRowsPerBatch(rows, cols) * detail::CeilDiv(cols, kTile));
}

cudaError_t RowCumsum(const void* d_in, ElementType in_type, void* d_out, int64_t rows,
                      int64_t cols, void* d_carry, void* d_workspace, size_t workspace_bytes,
                      const LaunchConfig& config, int* kernels) {
  detail::Launcher launch(config, kernels);
  if (detail::ValidateConfig(config) != cudaSuccess || !ValidShape(rows, cols) ||
      d_in == nullptr || d_out == nullptr) {
    return cudaErrorInvalidValue;
  }
  if (ChoosePath(rows, cols, config.multiprocessors) == CumsumPath::kLookback &&
      (d_workspace == nullptr || !detail::IsAligned(d_workspace, 16) ||
       workspace_bytes < RowCumsumWorkspaceBytes(rows, cols))) {
    return cudaErrorInvalidValue;
  }
  cudaError_t err = cudaErrorInvalidValue;
  const bool known = WithInputType(
      in_type,
      [&](auto tag) -> cudaError_t {
        using In = std::remove_const_t<std::remove_pointer_t<decltype(tag)>>;
        using Acc = typename ItemTraits<In>::Acc;
        using Out = typename OutOf<In>::type;
        if (!detail::IsAligned(d_in, sizeof(In)) || !detail::IsAligned(d_out, sizeof(Out)) ||
            !detail::IsAligned(d_carry, sizeof(Acc))) {
          return cudaErrorInvalidValue;
        }
        return Dispatch<In>(static_cast<const In*>(d_in), static_cast<Out*>(d_out), rows, cols,
                            static_cast<Acc*>(d_carry), d_workspace, launch);
      },
      &err);
  return known ? err : cudaErrorInvalidValue;
}

std::vector<KernelLaunchInfo> DescribeRowCumsum(ElementType in_type, int64_t rows, int64_t cols,
                                                const LaunchConfig& config) {
  std::vector<KernelLaunchInfo> out;
  if (detail::ValidateShapeConfig(config) != cudaSuccess || !ValidShape(rows, cols)) return out;
  detail::Launcher launch(config, &out);
  cudaError_t err = cudaSuccess;
  const bool known = WithInputType(
      in_type,
      [&](auto tag) -> cudaError_t {
        using In = std::remove_const_t<std::remove_pointer_t<decltype(tag)>>;
        return Dispatch<In>(nullptr, nullptr, rows, cols, nullptr, nullptr, launch);
      },
      &err);
  if (!known) out.clear();
  return out;
}

}  // namespace gpupipe::kernels::cuda
