// histogram: per-row counts of equal-width bins (contract in histogram.h). Dispatch (path and
// grid choice) at the bottom, the __global__ entry points above it, the per-value counting at
// the top.
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/common/histogram_bin.h"
#include "kernels/cuda/detail/launch.cuh"
#include "kernels/cuda/detail/row_access.cuh"
#include "kernels/cuda/detail/typed_items.cuh"
#include "kernels/cuda/histogram.h"

namespace gpupipe::kernels::cuda {
namespace {

using detail::ItemTraits;

// ---- tuning (initial values for sm_90, after CUB's DeviceHistogram: privatized shared-memory
// counters and a persistent grid; not yet measured on the H200) --------------------------------
constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kBlocksPerSm = 2;        // 2 x 48 KiB of counters and 1024 threads an SM
constexpr int kSmemCounters = 12288;   // 48 KiB of uint32 counters a block (static limit)
constexpr int kMaxCopies = kWarps;     // at most one sub-histogram per warp
constexpr int kUnroll = 4;             // 16-byte vectors in flight per thread

enum class Merge : int32_t {
  kDirect = 0,   // the block owns whole rows: write (or add) each bin once
  kAtomic = 1,   // blocks share a row: atomicAdd each non-zero bin into the counts
  kGlobal = 2,   // no shared-memory counters: atomicAdd into the counts per value
};

struct HistArgs {
  HistogramBinning binning;
  int64_t rows;
  int64_t cols;
  int64_t parts;   // blocks per row (work items are rows * parts)
  int32_t copies;  // shared-memory sub-histograms (kDirect, kAtomic)
  Merge merge;
  bool accumulate;
};

__device__ __forceinline__ void AddToCounts(int64_t* counts, int64_t bin, unsigned long long n) {
  atomicAdd(reinterpret_cast<unsigned long long*>(counts + bin), n);
}

// Counts one value: into this warp's shared sub-histogram, or straight into the row's counts.
struct Counter {
  const HistArgs& args;
  uint32_t* sub;        // this warp's shared sub-histogram (null for kGlobal)
  int64_t* row_counts;  // the row's global counts (kGlobal)

  __device__ __forceinline__ void operator()(double x) const {
    const int32_t bin = HistogramBin(x, args.binning);
    if (bin < 0) return;
    if (sub != nullptr) {
      atomicAdd(sub + bin, 1u);
    } else {
      AddToCounts(row_counts, bin, 1ull);
    }
  }
};

// Counts elements [0, cols) of one row spread over `threads` threads (this one is `tid`):
// unaligned head elements, 16-byte vectors (kUnroll in flight), tail elements.
template <typename In>
__device__ __forceinline__ void CountRow(const In* row, int64_t cols, int64_t tid,
                                         int64_t threads, const Counter& count) {
  using Bits = typename ItemTraits<In>::Bits;
  constexpr int kVec = 16 / sizeof(Bits);
  const auto* bits = reinterpret_cast<const Bits*>(row);
  const auto misalign = static_cast<int64_t>(reinterpret_cast<uintptr_t>(row) & 15);
  const int64_t head = std::min<int64_t>(cols, misalign == 0 ? 0 : (16 - misalign) / sizeof(Bits));
  const int64_t vectors = (cols - head) / kVec;
  const int64_t tail = head + vectors * kVec;
  const auto* vec = reinterpret_cast<const uint4*>(bits + head);
  if (tid < head) count(ItemTraits<In>::ToDouble(__ldcg(bits + tid)));
  int64_t v = tid;
  for (; v + (kUnroll - 1) * threads < vectors; v += kUnroll * threads) {
    uint4 raw[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) raw[u] = __ldcg(vec + v + u * threads);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      Bits e[kVec];
      memcpy(e, &raw[u], sizeof(raw[u]));
#pragma unroll
      for (int k = 0; k < kVec; ++k) count(ItemTraits<In>::ToDouble(e[k]));
    }
  }
  for (; v < vectors; v += threads) {
    const uint4 raw = __ldcg(vec + v);
    Bits e[kVec];
    memcpy(e, &raw, sizeof(raw));
#pragma unroll
    for (int k = 0; k < kVec; ++k) count(ItemTraits<In>::ToDouble(e[k]));
  }
  if (tid < cols - tail) count(ItemTraits<In>::ToDouble(__ldcg(bits + tail + tid)));
}

// ---- kernels -----------------------------------------------------------------------------------

__global__ void __launch_bounds__(kThreads) ZeroCountsKernel(int64_t* d_counts, int64_t n) {
  detail::WaitForPrimaryGrids();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    d_counts[i] = 0;
  }
  detail::AllowDependentGrids();
}

// Work item w = (row w / parts, part w % parts); a block takes items blockIdx.x, += gridDim.x.
template <typename In>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    HistogramKernel(const In* d_in, int64_t* d_counts, HistArgs args) {
  __shared__ uint32_t s_counts[kSmemCounters];
  const int32_t bins = args.binning.bins;
  const bool shared = args.merge != Merge::kGlobal;
  const int32_t sub_counters = shared ? args.copies * bins : 0;
  detail::WaitForPrimaryGrids();
  const int64_t items = args.rows * args.parts;
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const int64_t row = item / args.parts;
    const int64_t part = item - row * args.parts;
    for (int32_t i = threadIdx.x; i < sub_counters; i += kThreads) s_counts[i] = 0;
    __syncthreads();
    const int warp = threadIdx.x >> 5;
    const Counter count{args, shared ? s_counts + (warp % args.copies) * bins : nullptr,
                        d_counts + row * bins};
    CountRow(d_in + row * args.cols, args.cols, part * kThreads + threadIdx.x,
             args.parts * kThreads, count);
    if (!shared) continue;
    __syncthreads();
    int64_t* row_counts = d_counts + row * bins;
    for (int32_t b = threadIdx.x; b < bins; b += kThreads) {
      uint32_t sum = 0;
      for (int32_t c = 0; c < args.copies; ++c) sum += s_counts[c * bins + b];
      if (args.merge == Merge::kDirect) {
        row_counts[b] = (args.accumulate ? __ldcg(row_counts + b) : 0) + sum;
      } else if (sum != 0) {
        AddToCounts(row_counts, b, sum);
      }
    }
    __syncthreads();  // before the next item clears the counters
  }
  detail::AllowDependentGrids();
}

// ---- dispatch ----------------------------------------------------------------------------------

bool ValidArgs(int64_t rows, int64_t cols, int32_t bins, double lo, double hi) {
  return rows >= 1 && cols >= 1 && bins >= 1 && bins <= kHistogramMaxBins &&
         cols <= std::numeric_limits<int64_t>::max() / rows &&
         rows <= std::numeric_limits<int64_t>::max() / bins && std::isfinite(lo) &&
         std::isfinite(hi) && lo < hi && std::isfinite(hi - lo);
}

HistArgs PlanHistogram(int64_t rows, int64_t cols, int32_t bins, double lo, double hi,
                       bool accumulate, int multiprocessors) {
  HistArgs a{};
  a.binning = HistogramBinning::Make(bins, lo, hi);
  a.rows = rows;
  a.cols = cols;
  a.accumulate = accumulate;
  a.copies = std::clamp(kSmemCounters / bins, 1, kMaxCopies);
  const int64_t grid_target = static_cast<int64_t>(kBlocksPerSm) * multiprocessors;
  a.parts = std::max<int64_t>(1, grid_target / rows);
  // Clearing and merging cost copies * bins a work item: no more copies than the item has
  // values per bin (short rows get one copy).
  const int64_t per_item = detail::CeilDiv(cols, a.parts);
  a.copies = static_cast<int32_t>(std::clamp<int64_t>(per_item / bins, 1, a.copies));
  // A shared counter of one block counts at most ceil(cols / parts / threads) * threads values.
  const bool fits_u32 = detail::CeilDiv(cols, a.parts) < (int64_t{1} << 32) - kThreads;
  if (bins > kSmemCounters || !fits_u32) {
    a.merge = Merge::kGlobal;
  } else {
    a.merge = a.parts == 1 ? Merge::kDirect : Merge::kAtomic;
  }
  return a;
}

template <typename In>
cudaError_t Dispatch(const In* d_in, int64_t* d_counts, const HistArgs& args,
                     detail::Launcher& launch) {
  const int mp = launch.config().multiprocessors;
  const int64_t grid_target = static_cast<int64_t>(kBlocksPerSm) * mp;
  const int32_t bins = args.binning.bins;
  if (args.merge != Merge::kDirect && !args.accumulate) {
    const int64_t n = args.rows * bins;
    const int64_t grid = std::min<int64_t>(detail::CeilDiv(n, kThreads), 4 * mp);
    if (cudaError_t err = launch("histogram.zero", ZeroCountsKernel, grid, kThreads, d_counts, n);
        err != cudaSuccess) {
      return err;
    }
  }
  const char* name = args.merge == Merge::kDirect   ? "histogram.rows"
                     : args.merge == Merge::kAtomic ? "histogram.split"
                                                    : "histogram.global";
  const int64_t grid = std::min(args.rows * args.parts, grid_target);
  return launch(name, HistogramKernel<In>, grid, kThreads, d_in, d_counts, args);
}

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

}  // namespace

size_t RowHistogramWorkspaceBytes(int64_t /*rows*/, int64_t /*cols*/, int32_t /*bins*/) {
  return 0;
}

cudaError_t RowHistogram(const void* d_in, ElementType in_type, int64_t* d_counts,
                         int64_t rows, int64_t cols, int32_t bins, double lo, double hi,
                         bool accumulate, void* /*d_workspace*/, size_t /*workspace_bytes*/,
                         const LaunchConfig& config, int* kernels) {
  detail::Launcher launch(config, kernels);
  if (detail::ValidateConfig(config) != cudaSuccess || !ValidArgs(rows, cols, bins, lo, hi) ||
      d_in == nullptr || d_counts == nullptr || !detail::IsAligned(d_counts, 8)) {
    return cudaErrorInvalidValue;
  }
  const HistArgs args = PlanHistogram(rows, cols, bins, lo, hi, accumulate,
                                      config.multiprocessors);
  cudaError_t err = cudaErrorInvalidValue;
  const bool known = WithInputType(
      in_type,
      [&](auto tag) -> cudaError_t {
        using In = std::remove_const_t<std::remove_pointer_t<decltype(tag)>>;
        if (!detail::IsAligned(d_in, sizeof(In))) return cudaErrorInvalidValue;
        return Dispatch<In>(static_cast<const In*>(d_in), d_counts, args, launch);
      },
      &err);
  return known ? err : cudaErrorInvalidValue;
}

std::vector<KernelLaunchInfo> DescribeRowHistogram(ElementType in_type, int64_t rows,
                                                   int64_t cols, int32_t bins, bool accumulate,
                                                   const LaunchConfig& config) {
  std::vector<KernelLaunchInfo> out;
  // Any valid range describes the same launches.
  if (detail::ValidateShapeConfig(config) != cudaSuccess || !ValidArgs(rows, cols, bins, 0, 1)) {
    return out;
  }
  detail::Launcher launch(config, &out);
  const HistArgs args = PlanHistogram(rows, cols, bins, 0, 1, accumulate, config.multiprocessors);
  cudaError_t err = cudaSuccess;
  const bool known = WithInputType(
      in_type,
      [&](auto tag) -> cudaError_t {
        using In = std::remove_const_t<std::remove_pointer_t<decltype(tag)>>;
        return Dispatch<In>(nullptr, nullptr, args, launch);
      },
      &err);
  if (!known) out.clear();
  return out;
}

}  // namespace gpupipe::kernels::cuda
