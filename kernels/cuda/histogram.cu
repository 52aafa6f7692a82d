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

// ---- tuning (sm_90, after CUB's DeviceHistogram: privatized shared-memory counters and a
// persistent grid). Measured on the H200 with kernels_bench, histogram(256, 0, 1) of 2^28
// float32 values, CUB HistogramEven 268 us in the same run: 3 blocks an SM and 4 vectors in
// flight 420 us; 3 and 2: 417 us; 2 and 4: 480 us; the earlier kernel (bins in double, 2 blocks
// an SM, unpadded counters) 550 us. Still instruction-bound, not at CUB's speed. -------------
constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kBlocksPerSm = 3;        // 3 x 48 KiB of shared memory and 1536 threads an SM
constexpr int kSmemWords = 12288;      // 48 KiB a block (static limit): counters, then edges
constexpr int kMaxCopies = kWarps;     // at most one sub-histogram per warp
constexpr int kUnroll = 4;             // 16-byte vectors in flight per thread
constexpr int kPadShift = 5;           // one padding counter every 32 bins (spreads banks)
constexpr int kNoPadShift = 31;        // bin >> 31 == 0: no padding
// The float bin estimate is used when the double estimate of histogram_bin.h is provably
// within a small fraction of a bin of the exact quotient (see FloatBinner): its error is a
// few ulp of max(|lo|, |hi|) in units of the bin width, so max(|lo|, |hi|) * bins / (hi - lo)
// must stay well below 2^52; and lo, hi must be far inside float's range.
constexpr double kFloatEstimateMaxSpan = 1099511627776.0;  // 2^40 bin widths
constexpr double kFloatEstimateMaxAbs = 1.8446744073709552e19;  // 2^64

enum class Merge : int32_t {
  kDirect = 0,   // the block owns whole rows: write (or add) each bin once
  kAtomic = 1,   // blocks share a row: atomicAdd each non-zero bin into the counts
  kGlobal = 2,   // no shared-memory counters: atomicAdd into the counts per value
};

// What float32 and float16 input needs for the float bin estimate (FloatBinner).
struct FloatBinning {
  bool enabled;   // the range qualifies and the edge table fits in shared memory
  float lo;       // lo rounded to nearest: the estimate's origin
  float scale;    // bins / (hi - lo) rounded to nearest
  float last;     // bins - 1
  float min_in;   // the least float >= lo: x >= lo exactly when x >= min_in
  float max_in;   // the greatest float <= hi: x <= hi exactly when x <= max_in
};

struct HistArgs {
  HistogramBinning binning;
  FloatBinning fast;
  int64_t rows;
  int64_t cols;
  int64_t parts;        // blocks per row (work items are rows * parts)
  int32_t copies;       // shared-memory sub-histograms (kDirect, kAtomic)
  int32_t stride;       // words a sub-histogram: bins, padded unless that does not fit
  int32_t pad_shift;    // counter of bin b: b + (b >> pad_shift)
  int32_t edges_at;     // the float edge table's first word in shared memory (even)
  Merge merge;
  bool accumulate;
};

__device__ __forceinline__ void AddToCounts(int64_t* counts, int64_t bin, unsigned long long n) {
  atomicAdd(reinterpret_cast<unsigned long long*>(counts + bin), n);
}

// The bin of a float32 or float16 value in float arithmetic, with the result of
// HistogramBin (histogram_bin.h) for every value. edges[i] holds the least float >= the double
// edge i and the least float >= edge i + 1 (+inf for the last bin, closed by the range test):
// a float x satisfies edge_i <= x < edge_i+1 exactly when edges[i].x <= x < edges[i].y. The
// estimate comes from float arithmetic and is accepted only when that test passes; otherwise
// (a value within float rounding of an edge) the double function decides. Both agree: with
// the range condition of kFloatEstimateMaxSpan the double edges increase strictly and the
// double estimate is within a tiny fraction of a bin of the exact one, so HistogramBin's one-step
// correction lands in the unique bin whose edges bracket x, the bin the test accepted.
// The exact bin of a value the float estimate could not place (rare: within float rounding of
// an edge). Not inlined, so that its double registers do not burden the counting loop.
__device__ __noinline__ int32_t ExactBin(double x, const HistogramBinning& binning) {
  return HistogramBin(x, binning);
}

struct FloatBinner {
  const FloatBinning& f;
  const HistogramBinning& binning;
  const float2* edges;

  __device__ __forceinline__ int32_t operator()(float x) const {
    if (!(x >= f.min_in && x <= f.max_in)) return -1;  // NaN fails too
    // x >= min_in >= lo, so the estimate is >= 0; floor by adding 2^23 rounding down (exact
    // for 0 <= e < 2^23, cheaper than the conversion unit).
    const float e = fminf((x - f.lo) * f.scale, f.last);
    const int32_t i = __float_as_int(__fadd_rd(e, 8388608.0f)) - 0x4B000000;
    const float2 edge = edges[i];
    if (x >= edge.x && x < edge.y) return i;
    return ExactBin(static_cast<double>(x), binning);
  }
};

// Fills the float edge table (FloatBinner) of `bins` bins; the caller synchronizes.
__device__ __forceinline__ void BuildFloatEdges(const HistogramBinning& b, float2* edges) {
  for (int32_t i = threadIdx.x; i < b.bins; i += kThreads) {
    const float lo_edge =
        __double2float_ru(kernels::detail::MulAddNoFma(static_cast<double>(i), b.step, b.lo));
    const float hi_edge =
        i + 1 < b.bins
            ? __double2float_ru(kernels::detail::MulAddNoFma(static_cast<double>(i + 1), b.step, b.lo))
            : INFINITY;
    edges[i] = make_float2(lo_edge, hi_edge);
  }
}

// Counts values into this warp's shared sub-histogram, or straight into the row's counts.
// Equal bins of neighbouring values (one 16-byte vector) are added as one run, so smooth or
// constant input does not serialize on one counter.
template <typename In>
struct Counter {
  using Bits = typename ItemTraits<In>::Bits;
  static constexpr bool kFloatIn = std::is_same_v<In, float> || std::is_same_v<In, __half>;
  const HistArgs& args;
  uint32_t* sub;        // this warp's shared sub-histogram (null for kGlobal)
  int64_t* row_counts;  // the row's global counts (kGlobal)
  const float2* edges;  // the float edge table, when args.fast.enabled

  __device__ __forceinline__ int32_t Bin(Bits b) const {
    if constexpr (kFloatIn) {
      float x;
      if constexpr (std::is_same_v<In, float>) {
        x = b;
      } else {
        x = __half2float(__ushort_as_half(b));
      }
      if (args.fast.enabled) return FloatBinner{args.fast, args.binning, edges}(x);
      return HistogramBin(static_cast<double>(x), args.binning);
    } else {
      return HistogramBin(ItemTraits<In>::ToDouble(b), args.binning);
    }
  }
  __device__ __forceinline__ void Add(int32_t bin, uint32_t n) const {
    if (bin < 0) return;
    if (sub != nullptr) {
      atomicAdd(sub + bin + (bin >> args.pad_shift), n);
    } else {
      AddToCounts(row_counts, bin, n);
    }
  }
  __device__ __forceinline__ void One(Bits b) const { Add(Bin(b), 1u); }
  template <int N>
  __device__ __forceinline__ void Run(const Bits (&e)[N]) const {
    int32_t bin = Bin(e[0]);
    uint32_t n = 1;
#pragma unroll
    for (int k = 1; k < N; ++k) {
      const int32_t next = Bin(e[k]);
      if (next != bin) {
        Add(bin, n);
        bin = next;
        n = 0;
      }
      ++n;
    }
    Add(bin, n);
  }
};

// Counts elements [0, cols) of one row spread over `threads` threads (this one is `tid`):
// unaligned head elements, 16-byte vectors (kUnroll in flight), tail elements.
template <typename In>
__device__ __forceinline__ void CountRow(const In* row, int64_t cols, int64_t tid,
                                         int64_t threads, const Counter<In>& count) {
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
      count.Run(e);
    }
  }
  for (; v < vectors; v += threads) {
    const uint4 raw = __ldcg(vec + v);
    Bits e[kVec];
    memcpy(e, &raw, sizeof(raw));
    count.Run(e);
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
template <typename In>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    HistogramKernel(const In* d_in, int64_t* d_counts, HistArgs args) {
  __shared__ __align__(16) uint32_t s_mem[kSmemWords];
  const int32_t bins = args.binning.bins;
  const bool shared = args.merge != Merge::kGlobal;
  const int32_t sub_counters = shared ? args.copies * args.stride : 0;
  const auto* edges = reinterpret_cast<const float2*>(s_mem + args.edges_at);
  if (Counter<In>::kFloatIn && args.fast.enabled) {
    BuildFloatEdges(args.binning, reinterpret_cast<float2*>(s_mem + args.edges_at));
  }
  detail::WaitForPrimaryGrids();
  const int64_t items = args.rows * args.parts;
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const int64_t row = item / args.parts;
    const int64_t part = item - row * args.parts;
    for (int32_t i = threadIdx.x; i < sub_counters; i += kThreads) s_mem[i] = 0;
    __syncthreads();  // also publishes the edge table before the first item
    const int warp = threadIdx.x >> 5;
    const Counter<In> count{args, shared ? s_mem + (warp % args.copies) * args.stride : nullptr,
                            d_counts + row * bins, edges};
    CountRow(d_in + row * args.cols, args.cols, part * kThreads + threadIdx.x,
             args.parts * kThreads, count);
    if (!shared) continue;
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

// The float estimate's parameters, disabled where the range does not qualify (see
// kFloatEstimateMaxSpan) or the input is not float32 / float16.
FloatBinning PlanFloatBinning(const HistogramBinning& b, bool float_input) {
  FloatBinning f{};
  const double abs_max = std::max(std::fabs(b.lo), std::fabs(b.hi));
  f.enabled = float_input && abs_max <= kFloatEstimateMaxAbs &&
              abs_max * b.scale <= kFloatEstimateMaxSpan;
  if (!f.enabled) return f;
  const auto up = [](double d) {  // the least float >= d
    float r = static_cast<float>(d);
    return static_cast<double>(r) < d ? std::nextafter(r, INFINITY) : r;
  };
  const auto down = [](double d) {  // the greatest float <= d
    float r = static_cast<float>(d);
    return static_cast<double>(r) > d ? std::nextafter(r, -INFINITY) : r;
  };
  f.lo = static_cast<float>(b.lo);
  f.scale = static_cast<float>(b.scale);
  f.last = static_cast<float>(b.bins - 1);
  f.min_in = up(b.lo);
  f.max_in = down(b.hi);
  return f;
}

HistArgs PlanHistogram(int64_t rows, int64_t cols, int32_t bins, double lo, double hi,
                       bool accumulate, bool float_input, int multiprocessors) {
  HistArgs a{};
  a.binning = HistogramBinning::Make(bins, lo, hi);
  a.fast = PlanFloatBinning(a.binning, float_input);
  a.rows = rows;
  a.cols = cols;
  a.accumulate = accumulate;
  const int64_t grid_target = static_cast<int64_t>(kBlocksPerSm) * multiprocessors;
  a.parts = std::max<int64_t>(1, grid_target / rows);
  // A shared counter of one block counts at most ceil(cols / parts / threads) * threads values.
  const bool fits_u32 = detail::CeilDiv(cols, a.parts) < (int64_t{1} << 32) - kThreads;
  const int32_t table_words = 2 * bins;  // a float2 a bin
  if (bins > kSmemWords || !fits_u32) {
    a.merge = Merge::kGlobal;
    a.fast.enabled = a.fast.enabled && table_words <= kSmemWords;
    a.pad_shift = kNoPadShift;
    return a;
  }
  a.merge = a.parts == 1 ? Merge::kDirect : Merge::kAtomic;
  // Clearing and merging cost copies * bins a work item: no more copies than the item has
  // values per bin (short rows get one copy).
  const int64_t per_item = detail::CeilDiv(cols, a.parts);
  a.copies = static_cast<int32_t>(std::clamp<int64_t>(
      per_item / bins, 1, std::clamp(kSmemWords / bins, 1, kMaxCopies)));
  // Shared memory: copies * stride counters, then the edge table. Give up, in this order,
  // copies, the padding, the float estimate, until it fits (one unpadded copy always does).
  const int32_t padded = bins + (bins >> kPadShift);
  const auto fits = [&](int32_t copies, int32_t stride, bool table) {
    const int64_t counters = static_cast<int64_t>(copies) * stride;
    return counters + (counters & 1) + (table ? table_words : 0) <= kSmemWords;
  };
  a.stride = padded;
  while (a.copies > 1 && !fits(a.copies, a.stride, a.fast.enabled)) --a.copies;
  if (!fits(a.copies, a.stride, a.fast.enabled)) a.stride = bins;
  if (!fits(a.copies, a.stride, a.fast.enabled)) a.fast.enabled = false;
  a.pad_shift = a.stride == bins ? kNoPadShift : kPadShift;
  a.edges_at = a.copies * a.stride + (a.copies * a.stride & 1);  // float2-aligned
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
