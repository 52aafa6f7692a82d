// RowTopk: entry point, dispatch and kernels.
//
// Values are compared as unsigned order keys (TopkTraits): larger value, larger key; every NaN
// maps to the largest key, -0 just below +0; key 0 never comes from a float and decodes to
// -inf (int32 INT32_MIN, whose key it is), so it serves as the "empty" sentinel: with at least
// k real values in a row, a sentinel is never among the k largest values except as a tie with
// an equal real value.
//  - k <= 32, topk.warp: a warp per row (or row segment); each lane keeps a sorted register
//    list of the K >= k largest keys it has seen (K = 16 or 32) and inserts by a min/max network
//    when any lane of the warp has a key above its list's last and above the warp's threshold
//    (a key with k keys at or above it in the lists: the larger of the lanes' largest last
//    entry and the k-th largest of their heads); then k rounds of warp argmax pop the warp's
//    largest keys.
//  - k > 32, topk.radix: a block per row (or segment) finds the k-th largest key by radix
//    select (8 bits per pass, a shared-memory histogram), gathers the keys above it (fewer than
//    k) into shared memory, sorts them by a bitonic network, and pads with the k-th key.
//  - few long rows: each row is split into segments whose top ks go to the workspace (kernel
//    <kind>_partials), then the same kernel takes the top k of each row's concatenated
//    partial top ks (the top k of a union is the top k of the parts' top ks). A segment shorter
//    than k pads with the sentinel.
// PDL: every kernel waits for its predecessor before its first global access and triggers its
// dependent after its last store.
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/detail/launch.cuh"
#include "kernels/cuda/detail/row_access.cuh"
#include "kernels/cuda/detail/typed_access.cuh"
#include "kernels/cuda/topk.h"
#include "kernels/cuda/tuning/topk_policy.h"

namespace gpupipe::kernels::cuda {
namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarp = 32;
constexpr int kTopkThreads = tuning::TopkPolicy::kThreads;
constexpr int kTopkWarpMaxK = 32;  // the longest register list of the warp path
// Splitting policy (tuning/topk_policy.h): split rows into segments when there are fewer than
// kTopkWarpItemsPerSm (warp path) or kTopkRadixItemsPerSm (radix path) items per
// multiprocessor, with segments of at least kTopkMinSegment elements.
constexpr int64_t kTopkWarpItemsPerSm = tuning::TopkPolicy::kWarpItemsPerSm;
constexpr int64_t kTopkRadixItemsPerSm = tuning::TopkPolicy::kRadixItemsPerSm;
constexpr int64_t kTopkMinSegment = tuning::TopkPolicy::kMinSegment;
// A warp (block) per item, so the hardware balances them; kernels loop only past this grid.
constexpr int64_t kTopkMaxGrid = int64_t{1} << 30;

template <typename T>
struct TopkTraits;
template <>
struct TopkTraits<float> {
  using Key = uint32_t;
  static constexpr int kKeyBits = 32;
  __device__ static Key ToKey(float x) {
    if (x != x) return 0xffffffffu;
    const uint32_t b = __float_as_uint(x);
    return (b & 0x80000000u) != 0 ? ~b : (b | 0x80000000u);
  }
  __device__ static float FromKey(Key k) {
    if (k == 0) return __uint_as_float(0xff800000u);  // sentinel: -inf
    return __uint_as_float((k & 0x80000000u) != 0 ? (k & 0x7fffffffu) : ~k);
  }
};
template <>
struct TopkTraits<double> {
  using Key = unsigned long long;
  static constexpr int kKeyBits = 64;
  static constexpr Key kSign = 0x8000000000000000ull;
  __device__ static Key ToKey(double x) {
    if (x != x) return ~0ull;
    const Key b = static_cast<Key>(__double_as_longlong(x));
    return (b & kSign) != 0 ? ~b : (b | kSign);
  }
  __device__ static double FromKey(Key k) {
    if (k == 0) return __longlong_as_double(static_cast<long long>(0xfff0000000000000ull));
    return __longlong_as_double(static_cast<long long>((k & kSign) != 0 ? (k & ~kSign) : ~k));
  }
};
template <>
struct TopkTraits<__half> {
  using Key = uint32_t;  // 16 significant bits
  static constexpr int kKeyBits = 16;
  __device__ static Key ToKey(__half x) {
    const uint32_t h = __half_as_ushort(x);
    if ((h & 0x7fffu) > 0x7c00u) return 0xffffu;
    return (h & 0x8000u) != 0 ? (~h & 0xffffu) : (h | 0x8000u);
  }
  __device__ static __half FromKey(Key k) {
    if (k == 0) return __ushort_as_half(0xfc00);  // sentinel: -inf
    const uint32_t h = (k & 0x8000u) != 0 ? (k & 0x7fffu) : (~k & 0xffffu);
    return __ushort_as_half(static_cast<unsigned short>(h));
  }
};
template <>
struct TopkTraits<int32_t> {
  using Key = uint32_t;
  static constexpr int kKeyBits = 32;
  __device__ static Key ToKey(int32_t x) { return static_cast<uint32_t>(x) ^ 0x80000000u; }
  __device__ static int32_t FromKey(Key k) { return static_cast<int32_t>(k ^ 0x80000000u); }
};

// One launch: items = rows x segments; item (r, s) reads elements
// [s * seg_len, min(cols, (s + 1) * seg_len)) of row r and writes k values at d_out + item * k.
struct TopkGeometry {
  int64_t rows;
  int64_t cols;
  int64_t segments;
  int64_t seg_len;
  int32_t k;
};

// Inserts `key` into the descending list (dropping the smallest); a key not above the last
// entry leaves the list unchanged, so lanes without a candidate may run it too.
template <int K, typename Key>
__device__ __forceinline__ void InsertSorted(Key (&top)[K], Key key) {
#pragma unroll
  for (int i = 0; i < K; ++i) {
    const Key hi = max(top[i], key);
    key = min(top[i], key);
    top[i] = hi;
  }
}

// 16-byte loads in flight per lane of the warp path (tuning/topk_policy.h).
template <typename T>
inline constexpr int kTopkWarpLoads = sizeof(typename TopkTraits<T>::Key) > 4
                                          ? tuning::TopkPolicy::kWarpLoadsInFlightWideKeys
                                          : tuning::TopkPolicy::kWarpLoadsInFlight;

template <typename T, int K>
__global__ void __launch_bounds__(kTopkThreads)
    TopkWarpKernel(const T* d_in, T* d_out, TopkGeometry g) {
  using Tr = TopkTraits<T>;
  using Key = typename Tr::Key;
  constexpr int kV = detail::kVecElems<T>;
  constexpr int kUnroll = kTopkWarpLoads<T>;
  const int lane = threadIdx.x % kWarp;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / kWarp;
  const int64_t items = g.rows * g.segments;
  detail::WaitForPrimaryGrids();

  // Loop bounds are warp-uniform, so every vote sees the whole warp.
  for (int64_t item = warp; item < items; item += warps) {
    const int64_t row = item / g.segments;
    const int64_t begin = (item - row * g.segments) * g.seg_len;
    const int64_t count = min(g.seg_len, g.cols - begin);
    const T* x = d_in + row * g.cols + begin;

    Key top[K];
#pragma unroll
    for (int i = 0; i < K; ++i) top[i] = 0;
    // The lists hold at least k keys >= thr (an entry only ever grows), so a key below thr is
    // not among the k largest, and one equal to it has the value of a key that is: skipping
    // both keeps the result. The warp inserts only when some lane has a key above thr and
    // above its own last entry.
    Key thr = 0;
    bool grew = false;  // some list changed since thr was last raised
    auto push = [&](Key key) {
      if (__any_sync(kFullMask, key > thr && key > top[K - 1])) {
        InsertSorted(top, key);
        grew = true;
      }
    };
    // Raises thr to the larger of two keys with k keys >= them in the lists: the largest of the
    // lanes' last entries (one lane's K >= k keys), and the k-th largest of the lanes' heads (k
    // lanes' largest keys; k <= 32 on this path), found by a bitonic sort of the heads across
    // the warp. A lane sees a 32nd of the keys, so its last entry trails the warp's k-th largest
    // key far behind, while the k-th largest head stays close to it: few keys then pass the
    // test, and the inserts, run by the whole warp when one lane has a candidate, become rare.
    // The sort costs a few dozen shuffles, so it runs only after some list changed.
    auto raise = [&] {
      Key last = top[K - 1];
#pragma unroll
      for (int off = kWarp / 2; off > 0; off /= 2) {
        last = max(last, __shfl_xor_sync(kFullMask, last, off));
      }
      Key h = top[0];  // after the sort, lane i holds the (i + 1)-th largest head
#pragma unroll
      for (int size = 2; size <= kWarp; size *= 2) {
#pragma unroll
        for (int stride = size / 2; stride > 0; stride /= 2) {
          const Key other = __shfl_xor_sync(kFullMask, h, stride);
          const bool keep_larger = ((lane & stride) == 0) == ((lane & size) == 0);
          h = keep_larger ? max(h, other) : min(h, other);
        }
      }
      thr = max(thr, max(last, __shfl_sync(kFullMask, h, g.k - 1)));
    };

    const int64_t head = detail::HeadToAlign16(x, count);  // < kV <= 8: one element per lane
    push(lane < head ? Tr::ToKey(detail::LoadCg(x + lane)) : Key(0));
    const T* body = x + head;
    const int64_t vecs = (count - head) / kV;
    for (int64_t base = 0; base < vecs; base += kWarp * kUnroll) {
      detail::Vec16<T> v[kUnroll];
      bool ok[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t vi = base + u * kWarp + lane;
        ok[u] = vi < vecs;
        if (ok[u]) v[u] = detail::LoadVec16Cg(body + vi * kV);
      }
      // One vote for the round's keys: most rounds have no key above thr in any lane and skip
      // the votes of push.
      Key keys[kUnroll * kV];
      bool any = false;
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
        for (int e = 0; e < kV; ++e) {
          keys[u * kV + e] = ok[u] ? Tr::ToKey(v[u].v[e]) : Key(0);
          any |= keys[u * kV + e] > thr;
        }
      }
      if (__any_sync(kFullMask, any)) {
#pragma unroll
        for (int i = 0; i < kUnroll * kV; ++i) push(keys[i]);
      }
      if (grew) {
        raise();
        grew = false;
      }
    }
    const int64_t done = head + vecs * kV;  // fewer than kV elements remain
    push(lane < count - done ? Tr::ToKey(detail::LoadCg(x + done + lane)) : Key(0));

    // k rounds: the warp's largest head of list is popped by its (lowest) owner lane.
    Key mine = 0;
    for (int i = 0; i < g.k; ++i) {
      Key m = top[0];
#pragma unroll
      for (int off = kWarp / 2; off > 0; off /= 2) m = max(m, __shfl_xor_sync(kFullMask, m, off));
      const int owner = __ffs(__ballot_sync(kFullMask, top[0] == m)) - 1;
      if (lane == owner) {
#pragma unroll
        for (int j = 0; j < K - 1; ++j) top[j] = top[j + 1];
        top[K - 1] = 0;
      }
      if (lane == i) mine = m;
    }
    if (lane < g.k) d_out[item * g.k + lane] = Tr::FromKey(mine);
  }
  detail::AllowDependentGrids();
}

template <typename T>
__global__ void __launch_bounds__(kTopkThreads)
    TopkRadixKernel(const T* d_in, T* d_out, TopkGeometry g) {
  using Tr = TopkTraits<T>;
  using Key = typename Tr::Key;
  __shared__ unsigned long long s_hist[256];
  __shared__ Key s_cand[kMaxTopk];
  __shared__ Key s_prefix;
  __shared__ long long s_want;
  __shared__ unsigned s_count;
  const int tid = threadIdx.x;
  const int64_t items = g.rows * g.segments;
  detail::WaitForPrimaryGrids();

  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const int64_t row = item / g.segments;
    const int64_t begin = (item - row * g.segments) * g.seg_len;
    const int64_t count = min(g.seg_len, g.cols - begin);
    const T* x = d_in + row * g.cols + begin;

    // Radix select, most significant digit first: after the pass at `shift`, `prefix` holds the
    // k-th largest key's digits down to `shift`, and `want` how many keys with that prefix
    // belong to the top k.
    Key prefix = 0;
    Key mask = 0;
    long long want = g.k;
    for (int shift = Tr::kKeyBits - 8; shift >= 0; shift -= 8) {
      for (int i = tid; i < 256; i += blockDim.x) s_hist[i] = 0;
      __syncthreads();
      for (int64_t c = tid; c < count; c += blockDim.x) {
        const Key key = Tr::ToKey(detail::LoadCg(x + c));
        if ((key & mask) == prefix) {
          atomicAdd(&s_hist[static_cast<int>((key >> shift) & 0xffu)], 1ull);
        }
      }
      __syncthreads();
      if (tid == 0) {
        long long above = 0;
        int b = 255;
        for (; b > 0; --b) {
          const long long h = static_cast<long long>(s_hist[b]);
          if (above + h >= want) break;
          above += h;
        }
        s_want = want - above;
        s_prefix = prefix | (static_cast<Key>(b) << shift);
      }
      __syncthreads();
      want = s_want;
      prefix = s_prefix;
      mask |= static_cast<Key>(0xffu) << shift;
    }
    const Key kth = prefix;
    // Keys above the k-th: exactly k - want of them (fewer than k), or all keys above the
    // sentinel when the segment holds fewer than k values.
    const int greater = g.k - static_cast<int>(want);
    if (tid == 0) s_count = 0;
    __syncthreads();
    for (int64_t c = tid; c < count; c += blockDim.x) {
      const Key key = Tr::ToKey(detail::LoadCg(x + c));
      if (key > kth) s_cand[atomicAdd(&s_count, 1u)] = key;
    }
    int padded = 1;
    while (padded < greater) padded *= 2;
    for (int i = greater + tid; i < padded; i += blockDim.x) s_cand[i] = 0;
    __syncthreads();
    // Bitonic sort of s_cand[0 .. padded), descending.
    for (int size = 2; size <= padded; size *= 2) {
      for (int stride = size / 2; stride > 0; stride /= 2) {
        for (int i = tid; i < padded / 2; i += blockDim.x) {
          const int lo = 2 * i - (i & (stride - 1));
          const int hi = lo + stride;
          const bool descending = (lo & size) == 0;
          const Key a = s_cand[lo];
          const Key b = s_cand[hi];
          if (a != b && (a < b) == descending) {
            s_cand[lo] = b;
            s_cand[hi] = a;
          }
        }
        __syncthreads();
      }
    }
    for (int i = tid; i < g.k; i += blockDim.x) {
      d_out[item * g.k + i] = Tr::FromKey(i < greater ? s_cand[i] : kth);
    }
    __syncthreads();  // s_cand and the shared scalars are reused by the next item
  }
  detail::AllowDependentGrids();
}

bool IsTopkType(ElementType type) {
  return type == ElementType::kFloat32 || type == ElementType::kFloat64 ||
         type == ElementType::kFloat16 || type == ElementType::kInt32;
}

// The launches of one call: an optional partials pass into the workspace, then the final one.
struct TopkPlan {
  bool warp = true;  // k <= kTopkWarpMaxK
  TopkGeometry partials{};  // segments > 1 when used
  TopkGeometry final_pass{};
  size_t workspace_bytes = 0;
};

bool MakePlan(int64_t rows, int64_t cols, int32_t k, ElementType type, int multiprocessors,
              TopkPlan* plan) {
  if (!IsTopkType(type) || rows < 1 || cols < 1 || k < 1 || k > kMaxTopk || k > cols) {
    return false;
  }
  plan->warp = k <= kTopkWarpMaxK;
  const int64_t target =
      static_cast<int64_t>(multiprocessors) *
      (plan->warp ? kTopkWarpItemsPerSm : kTopkRadixItemsPerSm);
  int64_t segments = 1;
  const int64_t min_seg = std::max<int64_t>(kTopkMinSegment, k);
  if (rows < target && cols >= 2 * min_seg) {
    segments = std::min(detail::CeilDiv(target, rows), cols / min_seg);
  }
  plan->final_pass = TopkGeometry{rows, cols, 1, cols, k};
  plan->partials = plan->final_pass;
  plan->workspace_bytes = 0;
  if (segments > 1) {
    // Required: the segment count before rounding, which grows with multiprocessors, so
    // RowTopkWorkspaceBytes (sized for the most multiprocessors) covers every config.
    plan->workspace_bytes = static_cast<size_t>(rows * segments * k) * ElementSize(type);
    const int64_t seg_len = detail::CeilDiv(cols, segments);
    segments = detail::CeilDiv(cols, seg_len);  // no empty segment; never more than before
    plan->partials = TopkGeometry{rows, cols, segments, seg_len, k};
    const int64_t partial_cols = segments * k;
    plan->final_pass = TopkGeometry{rows, partial_cols, 1, partial_cols, k};
  }
  return true;
}

template <typename T>
cudaError_t LaunchPass(const char* name, const T* d_in, T* d_out, const TopkGeometry& g,
                       bool warp, detail::Launcher& launch) {
  const int64_t items = g.rows * g.segments;
  if (warp) {
    const int64_t grid = std::min(detail::CeilDiv(items, kTopkThreads / kWarp), kTopkMaxGrid);
    if (g.k <= 16) return launch(name, TopkWarpKernel<T, 16>, grid, kTopkThreads, d_in, d_out, g);
    return launch(name, TopkWarpKernel<T, 32>, grid, kTopkThreads, d_in, d_out, g);
  }
  const int64_t grid = std::min(items, kTopkMaxGrid);
  return launch(name, TopkRadixKernel<T>, grid, kTopkThreads, d_in, d_out, g);
}

template <typename T>
cudaError_t DispatchTyped(const void* d_in, void* d_out, void* d_workspace, const TopkPlan& plan,
                          detail::Launcher& launch) {
  const T* in = static_cast<const T*>(d_in);
  if (plan.partials.segments > 1) {
    T* partial = static_cast<T*>(d_workspace);
    const cudaError_t err = LaunchPass(plan.warp ? "topk.warp_partials" : "topk.radix_partials",
                                       in, partial, plan.partials, plan.warp, launch);
    if (err != cudaSuccess) return err;
    in = partial;
  }
  return LaunchPass(plan.warp ? "topk.warp" : "topk.radix", in, static_cast<T*>(d_out),
                    plan.final_pass, plan.warp, launch);
}

cudaError_t Dispatch(const void* d_in, ElementType type, void* d_out, void* d_workspace,
                     const TopkPlan& plan, detail::Launcher& launch) {
  switch (type) {
    case ElementType::kFloat32:
      return DispatchTyped<float>(d_in, d_out, d_workspace, plan, launch);
    case ElementType::kFloat64:
      return DispatchTyped<double>(d_in, d_out, d_workspace, plan, launch);
    case ElementType::kFloat16:
      return DispatchTyped<__half>(d_in, d_out, d_workspace, plan, launch);
    case ElementType::kInt32:
      return DispatchTyped<int32_t>(d_in, d_out, d_workspace, plan, launch);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

size_t RowTopkWorkspaceBytes(int64_t rows, int64_t cols, int32_t k, ElementType in_type) {
  // The plan depends on the config only through multiprocessors, and its workspace grows with
  // them: size for the largest value a LaunchConfig may name.
  TopkPlan plan;
  if (!MakePlan(rows, cols, k, in_type, detail::kMaxMultiprocessors, &plan)) return 0;
  return plan.workspace_bytes;
}

cudaError_t RowTopk(const void* d_in, ElementType in_type, void* d_out, int64_t rows,
                    int64_t cols, int32_t k, void* d_workspace, size_t workspace_bytes,
                    const LaunchConfig& config, int* kernels) {
  detail::Launcher launch(config, kernels);
  if (cudaError_t err = detail::ValidateConfig(config); err != cudaSuccess) return err;
  TopkPlan plan;
  if (!MakePlan(rows, cols, k, in_type, config.multiprocessors, &plan)) {
    return cudaErrorInvalidValue;
  }
  const uintptr_t elem = ElementSize(in_type);
  if (d_in == nullptr || d_out == nullptr || !detail::IsAligned(d_in, elem) ||
      !detail::IsAligned(d_out, elem)) {
    return cudaErrorInvalidValue;
  }
  if (plan.workspace_bytes > 0 &&
      (d_workspace == nullptr || !detail::IsAligned(d_workspace, elem) ||
       workspace_bytes < plan.workspace_bytes)) {
    return cudaErrorInvalidValue;
  }
  return Dispatch(d_in, in_type, d_out, d_workspace, plan, launch);
}

std::vector<KernelLaunchInfo> DescribeRowTopk(int64_t rows, int64_t cols, int32_t k,
                                              ElementType in_type, const LaunchConfig& config) {
  std::vector<KernelLaunchInfo> out;
  TopkPlan plan;
  if (detail::ValidateShapeConfig(config) != cudaSuccess ||
      !MakePlan(rows, cols, k, in_type, config.multiprocessors, &plan)) {
    return out;
  }
  detail::Launcher launch(config, &out);
  if (Dispatch(nullptr, in_type, nullptr, nullptr, plan, launch) != cudaSuccess) out.clear();
  return out;
}

}  // namespace gpupipe::kernels::cuda
