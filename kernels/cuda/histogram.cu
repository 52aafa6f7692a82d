// histogram: per-row counts of equal-width bins (contract in histogram.h). Dispatch (path and
// grid choice) at the bottom, the __global__ entry points above it, the per-value counting at
// the top.
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/common/histogram_bin.h"
#include "kernels/common/histogram_float_bin.h"
#include "kernels/cuda/detail/launch.cuh"
#include "kernels/cuda/detail/row_access.cuh"
#include "kernels/cuda/detail/typed_items.cuh"
#include "kernels/cuda/histogram.h"
#include "kernels/cuda/tuning/histogram_policy.h"

namespace gpupipe::kernels::cuda {
namespace {

using detail::ItemTraits;

// ---- tuning (tuning/histogram_policy.h, with the reasons) --------------------------------------
constexpr int kThreads = tuning::HistogramPolicy::kThreads;
constexpr int kWarps = kThreads / 32;
constexpr int kSmemWords = 12288;      // 48 KiB a block (static limit): counters, then edges
constexpr int kMaxCopies = kWarps;     // at most one sub-histogram per warp
constexpr int kUnroll = tuning::HistogramPolicy::kUnroll;  // 16-byte vectors in flight a thread
constexpr int kPadShift = 5;           // one padding counter every 32 bins (spreads banks)
constexpr int kNoPadShift = 31;        // bin >> 31 == 0: no padding

enum class Merge : int32_t {
  kDirect = 0,   // the block owns whole rows: write (or add) each bin once
  kAtomic = 1,   // blocks share a row: atomicAdd each non-zero bin into the counts
  kGlobal = 2,   // no shared-memory counters: atomicAdd into the counts per value
};

struct HistArgs {
  HistogramBinning binning;
  FloatBinning fast;    // float32 / float16 input: the float path (histogram_float_bin.h)
  int64_t rows;
  int64_t cols;
  int64_t parts;        // blocks per row (work items are rows * parts)
  int32_t copies;       // shared-memory sub-histograms (kDirect, kAtomic)
  int32_t stride;       // words a sub-histogram: its counters, then one for values outside
  int32_t pad_shift;    // counter of bin b: b + (b >> pad_shift); of values outside: b = bins
  int32_t edges_at;     // the float edge table's first word in shared memory (even)
  Merge merge;
  bool accumulate;
};

// How a kernel instance counts: its bin function and where the counters live. One instance
// per path, so that the per-value code has no branch on the path.
enum class CountPath : int32_t {
  kSharedAdjacent = 0,  // float32 / float16 with FloatBinPath::kAdjacent, shared counters
  kShared = 1,          // any other binning, shared counters
  kGlobal = 2,          // any binning, atomics into the global counts
  kSharedPow2 = 3,      // float32 / float16 with FloatBinPath::kPow2, shared counters
};

// Blocks an SM of each kernel instance: its launch bounds and the persistent grid's size. The
// branch-free float paths fit fewer registers, so more of their blocks are resident.
constexpr int BlocksPerSm(CountPath p) {
  return p == CountPath::kSharedAdjacent || p == CountPath::kSharedPow2
             ? tuning::HistogramPolicy::kLeanBlocksPerSm
             : tuning::HistogramPolicy::kBlocksPerSm;
}

// Whether the float path reads the edge table (kPow2 needs none).
__host__ __device__ constexpr bool UsesEdgeTable(FloatBinPath p) {
  return p == FloatBinPath::kAdjacent || p == FloatBinPath::kChecked;
}

__device__ __forceinline__ void AddToCounts(int64_t* counts, int64_t bin, unsigned long long n) {
  atomicAdd(reinterpret_cast<unsigned long long*>(counts + bin), n);
}

// The exact bin of a value the checked float estimate could not place (rare: within float
// rounding of an edge). Not inlined, so that its double registers do not burden the counting
// loop.
__device__ __noinline__ int32_t ExactBin(double x, const HistogramBinning& binning) {
  return HistogramBin(x, binning);
}

// Fills the float edge table (histogram_float_bin.h) of `bins` bins; the caller synchronizes.
__device__ __forceinline__ void BuildFloatEdges(const HistogramBinning& b, FloatEdgePair* edges) {
  for (int32_t i = threadIdx.x; i < b.bins; i += kThreads) edges[i] = MakeFloatEdgePair(i, b);
}

template <typename In>
inline constexpr bool kFloatIn = std::is_same_v<In, float> || std::is_same_v<In, __half>;

template <typename In>
__device__ __forceinline__ float ToFloat(typename ItemTraits<In>::Bits b) {
  if constexpr (std::is_same_v<In, float>) {
    return b;
  } else {
    return __half2float(__ushort_as_half(b));
  }
}

// The bin of a value in [0, bins), or -1 outside [lo, hi] and for NaN (kShared, kGlobal).
template <typename In>
__device__ __forceinline__ int32_t GeneralBin(typename ItemTraits<In>::Bits b, const HistArgs& args,
                                              const FloatEdgePair* edges) {
  if constexpr (kFloatIn<In>) {
    const float x = ToFloat<In>(b);
    if (args.fast.path == FloatBinPath::kDouble) {
      return HistogramBin(static_cast<double>(x), args.binning);
    }
    if (args.fast.path == FloatBinPath::kPow2) {
      return Pow2FloatBin(x, args.fast, args.binning.bins - 1, -1);
    }
    if (!(x >= args.fast.min_in && x <= args.fast.max_in)) return -1;  // NaN fails too
    const int32_t i = FloatBinEstimate(x, args.fast);
    const FloatEdgePair edge = edges[i];
    if (x >= edge.lo && x < edge.hi) return i;
    return ExactBin(static_cast<double>(x), args.binning);
  } else {
    return HistogramBin(ItemTraits<In>::ToDouble(b), args.binning);
  }
}

// Counts values into this warp's shared sub-histogram (kSharedAdjacent, kShared), or straight
// into the row's counts (kGlobal).
// Shared counters take one atomic increment a value: the compiler emits ATOMS.POPC.INC, which
// adds once per distinct address of the warp, so constant input does not serialize on one
// counter, and values outside the range go to a counter of their own instead of a branch.
// Global counters add equal bins of neighbouring values (one 16-byte vector) as one run.
template <typename In, CountPath P>
struct Counter {
  using Bits = typename ItemTraits<In>::Bits;
  const HistArgs& args;
  uint32_t* sub;               // this warp's shared sub-histogram (null for kGlobal)
  int64_t* row_counts;         // the row's global counts (kGlobal)
  const FloatEdgePair* edges;  // the float edge table, when UsesEdgeTable(args.fast.path)

  __device__ __forceinline__ void One(Bits b) const {
    if constexpr (P == CountPath::kGlobal) {
      const int32_t bin = GeneralBin<In>(b, args, edges);
      if (bin >= 0) AddToCounts(row_counts, bin, 1);
    } else {
      int32_t bin;
      if constexpr (P == CountPath::kSharedAdjacent) {
        bin = AdjacentFloatBin(ToFloat<In>(b), args.fast, edges, args.binning.bins);
      } else if constexpr (P == CountPath::kSharedPow2) {
        bin = Pow2FloatBin(ToFloat<In>(b), args.fast, args.binning.bins - 1, args.binning.bins);
      } else {
        bin = GeneralBin<In>(b, args, edges);
        if (bin < 0) bin = args.binning.bins;
      }
      atomicAdd(sub + bin + (bin >> args.pad_shift), 1u);
    }
  }
  template <int N>
  __device__ __forceinline__ void Vector(const Bits (&e)[N]) const {
    if constexpr (P == CountPath::kGlobal) {
      int32_t bin = GeneralBin<In>(e[0], args, edges);
      uint32_t n = 1;
#pragma unroll
      for (int k = 1; k < N; ++k) {
        const int32_t next = GeneralBin<In>(e[k], args, edges);
        if (next != bin) {
          if (bin >= 0) AddToCounts(row_counts, bin, n);
          bin = next;
          n = 0;
        }
        ++n;
      }
      if (bin >= 0) AddToCounts(row_counts, bin, n);
    } else {
#pragma unroll
      for (int k = 0; k < N; ++k) One(e[k]);
    }
  }
};

// Counts elements [0, cols) of one row spread over `threads` threads (this one is `tid`):
// unaligned head elements, 16-byte vectors (kUnroll in flight), tail elements.
template <typename In, typename Count>
__device__ __forceinline__ void CountRow(const In* row, int64_t cols, int64_t tid,
                                         int64_t threads, const Count& count) {
  using Bits = typename ItemTraits<In>::Bits;
  constexpr int kVec = 16 / sizeof(Bits);
  const auto* bits = reinterpret_cast<const Bits*>(row);
  const auto misalign = static_cast<int64_t>(reinterpret_cast<uintptr_t>(row) & 15);
  const int64_t head = std::min<int64_t>(cols, misalign == 0 ? 0 : (16 - misalign) / sizeof(Bits));
  const int64_t vectors = (cols - head) / kVec;
  const int64_t tail = head + vectors * kVec;
  const auto* vec = reinterpret_cast<const uint4*>(bits + head);
  if (tid < head) count.One(__ldcg(bits + tid));
  int64_t v = tid;
  for (; v + (kUnroll - 1) * threads < vectors; v += kUnroll * threads) {
    uint4 raw[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) raw[u] = __ldcg(vec + v + u * threads);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      Bits e[kVec];
      memcpy(e, &raw[u], sizeof(raw[u]));
      count.Vector(e);
    }
  }
  for (; v < vectors; v += threads) {
    const uint4 raw = __ldcg(vec + v);
    Bits e[kVec];
    memcpy(e, &raw, sizeof(raw));
    count.Vector(e);
  }
  if (tid < cols - tail) count.One(__ldcg(bits + tail + tid));
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
template <typename In, CountPath P>
__global__ void __launch_bounds__(kThreads, BlocksPerSm(P))
    HistogramKernel(const In* d_in, int64_t* d_counts, HistArgs args) {
  __shared__ __align__(16) uint32_t s_mem[kSmemWords];
  constexpr bool kShared = P != CountPath::kGlobal;
  const int32_t bins = args.binning.bins;
  const int32_t sub_counters = kShared ? args.copies * args.stride : 0;
  auto* edges = reinterpret_cast<FloatEdgePair*>(s_mem + args.edges_at);
  if (kFloatIn<In> && UsesEdgeTable(args.fast.path)) BuildFloatEdges(args.binning, edges);
  detail::WaitForPrimaryGrids();
  const int64_t items = args.rows * args.parts;
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const int64_t row = item / args.parts;
    const int64_t part = item - row * args.parts;
    for (int32_t i = threadIdx.x; i < sub_counters; i += kThreads) s_mem[i] = 0;
    __syncthreads();  // also publishes the edge table before the first item
    const int warp = threadIdx.x >> 5;
    const Counter<In, P> count{args, kShared ? s_mem + (warp % args.copies) * args.stride : nullptr,
                               d_counts + row * bins, edges};
    CountRow(d_in + row * args.cols, args.cols, part * kThreads + threadIdx.x,
             args.parts * kThreads, count);
    if constexpr (!kShared) continue;
    __syncthreads();
    int64_t* row_counts = d_counts + row * bins;
    for (int32_t b = threadIdx.x; b < bins; b += kThreads) {
      const int32_t at = b + (b >> args.pad_shift);
      uint32_t sum = 0;
      for (int32_t c = 0; c < args.copies; ++c) sum += s_mem[c * args.stride + at];
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

CountPath PathOf(const HistArgs& a) {
  if (a.merge == Merge::kGlobal) return CountPath::kGlobal;
  if (a.fast.path == FloatBinPath::kPow2) return CountPath::kSharedPow2;
  return a.fast.path == FloatBinPath::kAdjacent ? CountPath::kSharedAdjacent : CountPath::kShared;
}

// The plan for a persistent grid of grid_target blocks.
HistArgs PlanForGrid(int64_t rows, int64_t cols, int32_t bins, double lo, double hi,
                     bool accumulate, bool float_input, int64_t grid_target) {
  HistArgs a{};
  a.binning = HistogramBinning::Make(bins, lo, hi);
  a.fast = PlanFloatBinning(a.binning, float_input);
  a.rows = rows;
  a.cols = cols;
  a.accumulate = accumulate;
  a.parts = std::max<int64_t>(1, grid_target / rows);
  // A shared counter of one block counts at most ceil(cols / parts / threads) * threads values.
  const bool fits_u32 = detail::CeilDiv(cols, a.parts) < (int64_t{1} << 32) - kThreads;
  const int32_t table_words = 2 * bins;  // a FloatEdgePair a bin
  const auto drop_table_unless = [&](bool keep) {
    if (!keep && UsesEdgeTable(a.fast.path)) a.fast.path = FloatBinPath::kDouble;
  };
  const bool table = UsesEdgeTable(a.fast.path);
  if (bins + 1 > kSmemWords || !fits_u32) {  // not even one unpadded sub-histogram fits
    a.merge = Merge::kGlobal;
    drop_table_unless(table_words <= kSmemWords);
    a.pad_shift = kNoPadShift;
    return a;
  }
  a.merge = a.parts == 1 ? Merge::kDirect : Merge::kAtomic;
  // Clearing and merging cost copies * bins a work item: no more copies than the item has
  // values per bin (short rows get one copy).
  const int64_t per_item = detail::CeilDiv(cols, a.parts);
  a.copies = static_cast<int32_t>(std::clamp<int64_t>(
      per_item / bins, 1, std::clamp(kSmemWords / bins, 1, kMaxCopies)));
  // Shared memory: copies * stride counters (a sub-histogram's bins, padded, then the counter
  // of values outside the range), then the edge table. Give up, in this order, copies, the
  // padding, the float edge table, until it fits (one unpadded copy always does).
  const int32_t padded = bins + (bins >> kPadShift) + 1;
  const int32_t unpadded = bins + 1;
  const auto fits = [&](int32_t copies, int32_t stride, bool with_table) {
    const int64_t counters = static_cast<int64_t>(copies) * stride;
    return counters + (counters & 1) + (with_table ? table_words : 0) <= kSmemWords;
  };
  a.stride = padded;
  while (a.copies > 1 && !fits(a.copies, a.stride, table)) --a.copies;
  if (!fits(a.copies, a.stride, table)) a.stride = unpadded;
  drop_table_unless(fits(a.copies, a.stride, table));
  a.pad_shift = a.stride == unpadded ? kNoPadShift : kPadShift;
  a.edges_at = a.copies * a.stride + (a.copies * a.stride & 1);  // 8-byte aligned
  return a;
}

// Planned for the grid of the instance it picks: first as if for kSharedAdjacent's, then again
// if it picks another.
HistArgs PlanHistogram(int64_t rows, int64_t cols, int32_t bins, double lo, double hi,
                       bool accumulate, bool float_input, int multiprocessors) {
  const auto plan = [&](CountPath p) {
    return PlanForGrid(rows, cols, bins, lo, hi, accumulate, float_input,
                       static_cast<int64_t>(BlocksPerSm(p)) * multiprocessors);
  };
  const HistArgs first = plan(CountPath::kSharedAdjacent);
  const CountPath picked = PathOf(first);
  return BlocksPerSm(picked) == BlocksPerSm(CountPath::kSharedAdjacent) ? first : plan(picked);
}

template <typename In>
cudaError_t Dispatch(const In* d_in, int64_t* d_counts, const HistArgs& args,
                     detail::Launcher& launch) {
  const int mp = launch.config().multiprocessors;
  const CountPath path = PathOf(args);
  const int64_t grid_target = static_cast<int64_t>(BlocksPerSm(path)) * mp;
  const int32_t bins = args.binning.bins;
  if (args.merge != Merge::kDirect && !args.accumulate) {
    const int64_t n = args.rows * bins;
    const int64_t grid = std::min<int64_t>(detail::CeilDiv(n, kThreads),
                                           tuning::HistogramPolicy::kZeroBlocksPerSm * mp);
    if (cudaError_t err = launch("histogram.zero", ZeroCountsKernel, grid, kThreads, d_counts, n);
        err != cudaSuccess) {
      return err;
    }
  }
  const char* name = args.merge == Merge::kDirect   ? "histogram.rows"
                     : args.merge == Merge::kAtomic ? "histogram.split"
                                                    : "histogram.global";
  const int64_t grid = std::min(args.rows * args.parts, grid_target);
  const auto run = [&](auto kernel) {
    return launch(name, kernel, grid, kThreads, d_in, d_counts, args);
  };
  // The float bin paths are only instantiated for float inputs, whose plans are the only ones
  // that pick them.
  switch (path) {
    case CountPath::kGlobal: return run(HistogramKernel<In, CountPath::kGlobal>);
    case CountPath::kSharedAdjacent:
      if constexpr (kFloatIn<In>) return run(HistogramKernel<In, CountPath::kSharedAdjacent>);
      break;
    case CountPath::kSharedPow2:
      if constexpr (kFloatIn<In>) return run(HistogramKernel<In, CountPath::kSharedPow2>);
      break;
    case CountPath::kShared: break;
  }
  return run(HistogramKernel<In, CountPath::kShared>);
}

bool IsFloatInput(ElementType type) {
  return type == ElementType::kFloat32 || type == ElementType::kFloat16;
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
                                      IsFloatInput(in_type), config.multiprocessors);
  // Every input type but int64.
  return detail::DispatchType<true, true, true>(in_type, [&](auto tag) -> cudaError_t {
    using In = decltype(tag);
    if (!detail::IsAligned(d_in, sizeof(In))) return cudaErrorInvalidValue;
    return Dispatch<In>(static_cast<const In*>(d_in), d_counts, args, launch);
  });
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
  const HistArgs args =
      PlanHistogram(rows, cols, bins, 0, 1, accumulate, IsFloatInput(in_type), config.multiprocessors);
  const cudaError_t err = detail::DispatchType<true, true, true>(in_type, [&](auto tag) {
    using In = decltype(tag);
    return Dispatch<In>(nullptr, nullptr, args, launch);
  });
  if (err != cudaSuccess) out.clear();
  return out;
}

}  // namespace gpupipe::kernels::cuda
