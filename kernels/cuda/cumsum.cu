// cumsum: inclusive scans along rows (contract in cumsum.h). Layout as CUB: dispatch (path and
// grid choice, batching) at the bottom, __global__ entry points above it, and the block- and
// warp-level scan pieces at the top; the look-back pieces shared with the streamed kernel of
// float32 (cumsum_streamed.cu) in detail/scan_lookback.cuh.
#include <cuda_fp16.h>

#include <algorithm>
#include <limits>
#include <type_traits>

#include "kernels/cuda/cumsum.h"
#include "kernels/cuda/detail/launch.cuh"
#include "kernels/cuda/detail/row_access.cuh"
#include "kernels/cuda/detail/scan_lookback.cuh"
#include "kernels/cuda/detail/typed_items.cuh"
#include "kernels/cuda/tuning/scan_policy.h"

namespace gpupipe::kernels::cuda {
namespace {

using detail::FromAcc;
using detail::ItemTraits;
using detail::kFlagAggregate;
using detail::kFlagInvalid;
using detail::kFlagPrefix;
using detail::kFullMask;
using detail::kSpinMaxNs;
using detail::kSpinMinNs;
using detail::OutOf;
using detail::Round16;
using detail::TileRecord;
using detail::TileStatus;
using detail::WarpInclusiveScan;
using detail::WarpSum;

// ---- tuning (tuning/scan_policy.h, with the reasons) -------------------------------------------
using Policy = tuning::CumsumPolicy;
constexpr int kThreads = Policy::kThreads;
constexpr int kWarps = kThreads / 32;
constexpr int kItems = Policy::kItems;           // per thread, block-rows path
constexpr int64_t kTile = kThreads * kItems;     // 4096 elements
// Look-back path: 512-thread blocks; 32 items a thread (tiles of 16384) for 4-byte
// accumulators, 16 (tiles of 8192) for 8-byte ones.
constexpr int kLookbackThreads = Policy::kLookbackThreads;
constexpr int kLookbackWarps = kLookbackThreads / 32;
constexpr int kLookbackItemsNarrow = Policy::kLookbackItemsNarrow;
constexpr int kLookbackItemsWide = Policy::kLookbackItemsWide;
constexpr int64_t kLookbackTileMin = kLookbackThreads * kLookbackItemsWide;
// Two look-back blocks an SM (64 registers a thread).
constexpr int kLookbackMinBlocksPerSm = Policy::kLookbackMinBlocksPerSm;
template <typename In>
constexpr int kLookbackItems =
    sizeof(typename detail::ItemTraits<In>::Acc) == 4 ? kLookbackItemsNarrow : kLookbackItemsWide;
template <typename In>
constexpr int64_t kLookbackTile = int64_t{kLookbackThreads} * kLookbackItems<In>;
// Rows up to kWarpRowsMaxCols columns: one warp a row; longer rows, at least
// kBlockRowsMinRowsPerSm of them an SM: one block a row.
constexpr int kWarpItems = Policy::kWarpItems;   // per lane, warp path
constexpr int64_t kWarpTile = 32 * kWarpItems;   // 256 elements
constexpr int64_t kWarpRowsMaxCols = Policy::kWarpRowsMaxCols;
constexpr int kBlockRowsMinRowsPerSm = Policy::kBlockRowsMinRowsPerSm;
constexpr int kWarpRowsBlocksPerSm = Policy::kWarpRowsBlocksPerSm;
constexpr int kBlockRowsBlocksPerSm = Policy::kBlockRowsBlocksPerSm;

// ---- scan pieces -------------------------------------------------------------------------------

// In-place inclusive scan of a thread's items; returns their total.
template <typename Acc, int N>
__device__ __forceinline__ Acc ThreadScan(Acc (&v)[N]) {
#pragma unroll
  for (int k = 1; k < N; ++k) v[k] += v[k - 1];
  return v[N - 1];
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

// ---- look-back workspace (layout in detail/scan_lookback.cuh) -----------------------------------
//
// LookbackBytes covers the larger of the two layouts, so the size depends on the tile count
// only.

size_t LookbackBytes(int64_t tiles) {
  const auto t = static_cast<size_t>(tiles);
  return 16 + Round16(4 * t) + 2 * Round16(8 * t);
}

// 32-bit words that cumsum.init zeroes so that every tile reads kFlagInvalid.
int64_t LookbackStatusWords(int64_t tiles, size_t acc_bytes) {
  return acc_bytes == 4 ? 2 * tiles : tiles;
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

// Resets the look-back state: the counter and `words` 32-bit status words after it.
__global__ void __launch_bounds__(kThreads)
    LookbackInitKernel(unsigned long long* d_counter, int64_t words) {
  detail::WaitForPrimaryGrids();
  auto* status = reinterpret_cast<uint32_t*>(reinterpret_cast<char*>(d_counter) + 16);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < words;
       i += stride) {
    status[i] = kFlagInvalid;
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) *d_counter = 0;
  detail::AllowDependentGrids();
}

// Warp 0 of a tile that is not its row's first: walks back over the row's earlier tiles, 32 at
// a time (lane l looks at tile - 1 - l), until it meets an inclusive prefix, and returns the
// sum of the aggregates newer than that prefix plus the prefix (the same in every lane).
// Spins with a growing __nanosleep while any of the 32 has published nothing yet, so that
// waiting warps leave issue slots and L2 bandwidth to the tiles they wait for.
template <typename Acc, typename Status>
__device__ __forceinline__ Acc LookBack(const Status& status, int64_t tile, int64_t row_first) {
  const int lane = threadIdx.x & 31;
  Acc prefix = Acc(0);
  for (int64_t newest = tile - 1;; newest -= 32) {
    const int64_t q = newest - lane;
    const bool in_row = q >= row_first;  // the row's first tile always holds a prefix
    TileRecord r{kFlagPrefix, 0};
    unsigned sleep_ns = kSpinMinNs;
    for (;;) {
      if (in_row) r = status.Load(q);
      if (__all_sync(kFullMask, r.flag != kFlagInvalid)) break;
      __nanosleep(sleep_ns);
      sleep_ns = min(2 * sleep_ns, kSpinMaxNs);
    }
    Acc value = in_row ? Status::Value(r.bits) : Acc(0);
    const unsigned prefixes = __ballot_sync(kFullMask, r.flag == kFlagPrefix);
    // Only tiles newer than the nearest inclusive prefix (lowest such lane) count.
    if (prefixes != 0 && lane > __ffs(prefixes) - 1) value = Acc(0);
    prefix += WarpSum(value);
    if (prefixes != 0) return prefix;
  }
}

// Single-pass scan with decoupled look-back over the tiles of rows [row0, row0 + tiles /
// tiles_per_row). A block claims the next tile from the counter (so every tile it waits for
// belongs to a block that already runs: forward progress without relying on blockIdx order),
// scans it, publishes its aggregate, and warp 0 looks back (LookBack) for its prefix; the
// row's first tile starts from the carry. Each warp owns 32 * kLookbackItems consecutive
// elements, loaded warp-striped (lane l takes 16-byte vectors l, l + 32, ...), so every load
// and store instruction of a warp covers 512 contiguous bytes; the scan follows that layout:
// within a vector in registers, across lanes per vector with shuffles, vectors in order.
template <typename In>
__global__ void __launch_bounds__(kLookbackThreads, kLookbackMinBlocksPerSm)
    LookbackKernel(const In* d_in, typename OutOf<In>::type* d_out, int64_t row0, int64_t cols,
                   int64_t tiles_per_row, typename ItemTraits<In>::Acc* d_carry,
                   void* d_workspace) {
  using Acc = typename ItemTraits<In>::Acc;
  using Bits = typename ItemTraits<In>::Bits;
  using Out = typename OutOf<In>::type;
  using Status = TileStatus<Acc>;
  constexpr int kVec = 16 / sizeof(Bits);        // elements a vector
  constexpr int kItemsHere = kLookbackItems<In>;
  constexpr int kVecs = kItemsHere / kVec;       // vectors a thread
  constexpr int kWarpSpan = 32 * kItemsHere;
  static_assert(kItemsHere % kVec == 0 && (kVec * sizeof(Out)) % 16 == 0);
  __shared__ Acc s_warp_totals[kLookbackWarps];
  __shared__ long long s_tile;
  __shared__ Acc s_prefix;
  // Warp 0's items while it looks back (item i of lane l at i * 32 + l): the look-back then
  // gets the registers the items held, which keeps the kernel at 64 registers (see
  // kLookbackMinBlocksPerSm).
  __shared__ Acc s_parked[kItemsHere * 32];
  auto* base = static_cast<char*>(d_workspace);
  auto* counter = reinterpret_cast<unsigned long long*>(base);
  detail::WaitForPrimaryGrids();
  if (threadIdx.x == 0) s_tile = static_cast<long long>(atomicAdd(counter, 1ull));
  __syncthreads();
  const int64_t tile = s_tile;
  const int64_t row_in_batch = tile / tiles_per_row;
  const int64_t j = tile - row_in_batch * tiles_per_row;  // tile index within its row
  const int64_t row = row0 + row_in_batch;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int64_t warp_first = j * kLookbackTile<In> + static_cast<int64_t>(warp) * kWarpSpan;
  const int64_t valid = cols - warp_first;  // may be <= 0 or beyond the warp's span
  const In* in = d_in + row * cols + warp_first;
  Out* out = d_out + row * cols + warp_first;

  // Load: whole aligned spans as vectors, anything else element by element.
  Acc v[kVecs][kVec];
  const auto* bits = reinterpret_cast<const Bits*>(in);
  if (valid >= kWarpSpan && detail::Aligned16(in)) {
    uint4 raw[kVecs];
#pragma unroll
    for (int k = 0; k < kVecs; ++k) raw[k] = __ldcg(reinterpret_cast<const uint4*>(bits) + k * 32 + lane);
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      Bits e[kVec];
      memcpy(e, &raw[k], sizeof(raw[k]));
#pragma unroll
      for (int i = 0; i < kVec; ++i) v[k][i] = ItemTraits<In>::ToAcc(e[i]);
    }
  } else {
    detail::LoadSpanElements<In>(in, valid, v);
  }

  // Scan (vec_base[k]: what precedes vector k of this lane within the warp's span).
  Acc vec_base[kVecs];
  const Acc warp_total = detail::ScanSpan(v, vec_base);
  if (lane == 0) s_warp_totals[warp] = warp_total;
  __syncthreads();
  Acc warp_prefix = Acc(0);
  Acc tile_total = Acc(0);
#pragma unroll
  for (int w = 0; w < kLookbackWarps; ++w) {
    const Acc t = s_warp_totals[w];
    if (w < warp) warp_prefix += t;
    tile_total += t;
  }

  // The tile's prefix: the carry for a row's first tile, the look-back otherwise.
  if (warp == 0) {
    const Status status = Status::Make(base, gridDim.x);  // a block a tile
    Acc prefix;
    if (j == 0) {
      prefix = d_carry != nullptr ? __ldcg(d_carry + row) : Acc(0);
    } else {
      if (lane == 0) status.Publish(tile, tile_total, kFlagAggregate);
#pragma unroll
      for (int k = 0; k < kVecs; ++k) {
#pragma unroll
        for (int i = 0; i < kVec; ++i) s_parked[(k * kVec + i) * 32 + lane] = v[k][i];
      }
      prefix = LookBack<Acc>(status, tile, tile - j);
#pragma unroll
      for (int k = 0; k < kVecs; ++k) {
#pragma unroll
        for (int i = 0; i < kVec; ++i) v[k][i] = s_parked[(k * kVec + i) * 32 + lane];
      }
    }
    if (lane == 0) {
      status.Publish(tile, prefix + tile_total, kFlagPrefix);
      s_prefix = prefix;
    }
  }
  __syncthreads();
  const Acc prefix = s_prefix;

  // Store, in the layout of the load.
  const Acc start = prefix + warp_prefix;
  detail::StoreSpan<Out, kVecs, kVec>(out, valid,
                                      [&](int k, int i) { return start + vec_base[k] + v[k][i]; });
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
int64_t LookbackRowsPerBatch(int64_t rows, int64_t cols, int64_t tile) {
  const int64_t tiles_per_row = detail::CeilDiv(cols, tile);
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
  // float32 takes the streamed look-back (cumsum_streamed.cu) where the device runs it, the
  // other types and older devices LookbackKernel, which is the faster of the two for them
  // (bench/results/kernels-h200.md, "Tuning notes: cumsum").
  const bool streamed =
      std::is_same_v<In, float> && detail::StreamedLookbackRuns(launch.config());
  const int64_t tile = streamed ? detail::kStreamedTile : kLookbackTile<In>;
  const int64_t tiles_per_row = detail::CeilDiv(cols, tile);
  const int64_t batch_rows = LookbackRowsPerBatch(rows, cols, tile);
  for (int64_t row0 = 0; row0 < rows; row0 += batch_rows) {
    const int64_t n = std::min(batch_rows, rows - row0);
    const int64_t tiles = n * tiles_per_row;
    const int64_t words = LookbackStatusWords(tiles, sizeof(Acc));
    const int64_t init_grid =
        std::min<int64_t>(detail::CeilDiv(words, kThreads), Policy::kInitBlocksPerSm * mp);
    cudaError_t err = launch("cumsum.init", LookbackInitKernel, init_grid, kThreads,
                             static_cast<unsigned long long*>(d_workspace), words);
    if (err != cudaSuccess) return err;
    if constexpr (std::is_same_v<In, float>) {
      if (streamed) {
        err = detail::LaunchStreamedLookback(d_in, d_out, row0, cols, tiles_per_row, tiles,
                                             d_carry, d_workspace, launch);
      }
    }
    if (!streamed) {
      err = launch("cumsum.lookback", LookbackKernel<In>, tiles, kLookbackThreads, d_in, d_out,
                   row0, cols, tiles_per_row, d_carry, d_workspace);
    }
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

bool ValidShape(int64_t rows, int64_t cols) {
  return rows >= 1 && cols >= 1 && cols <= std::numeric_limits<int64_t>::max() / rows &&
         // one look-back launch's grid (tiles) must fit a grid dimension
         detail::CeilDiv(cols, kLookbackTileMin) <= std::numeric_limits<int32_t>::max();
}

}  // namespace

size_t RowCumsumWorkspaceBytes(int64_t rows, int64_t cols) {
  if (!ValidShape(rows, cols) || cols <= kWarpRowsMaxCols) return 0;
  // The most tiles a launch of any input type covers (the workspace does not depend on it).
  int64_t tiles = 0;
  for (const int64_t tile : {kLookbackThreads * int64_t{kLookbackItemsNarrow}, kLookbackTileMin,
                             detail::kStreamedTile}) {
    tiles = std::max(tiles, LookbackRowsPerBatch(rows, cols, tile) * detail::CeilDiv(cols, tile));
  }
  return LookbackBytes(tiles);
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
  // Every input type but int64.
  return detail::DispatchType<true, true, true>(in_type, [&](auto tag) -> cudaError_t {
    using In = decltype(tag);
    using Acc = typename ItemTraits<In>::Acc;
    using Out = typename OutOf<In>::type;
    if (!detail::IsAligned(d_in, sizeof(In)) || !detail::IsAligned(d_out, sizeof(Out)) ||
        !detail::IsAligned(d_carry, sizeof(Acc))) {
      return cudaErrorInvalidValue;
    }
    return Dispatch<In>(static_cast<const In*>(d_in), static_cast<Out*>(d_out), rows, cols,
                        static_cast<Acc*>(d_carry), d_workspace, launch);
  });
}

std::vector<KernelLaunchInfo> DescribeRowCumsum(ElementType in_type, int64_t rows, int64_t cols,
                                                const LaunchConfig& config) {
  std::vector<KernelLaunchInfo> out;
  if (detail::ValidateShapeConfig(config) != cudaSuccess || !ValidShape(rows, cols)) return out;
  detail::Launcher launch(config, &out);
  const cudaError_t err = detail::DispatchType<true, true, true>(in_type, [&](auto tag) {
    using In = decltype(tag);
    return Dispatch<In>(nullptr, nullptr, rows, cols, nullptr, nullptr, launch);
  });
  if (err != cudaSuccess) out.clear();
  return out;
}

}  // namespace gpupipe::kernels::cuda
