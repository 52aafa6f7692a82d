// Shapes of a single-pass row op on 16384 x 16384 float32 (softmax, l2normalize, standardize,
// and a plain copy through the same slices), against cudaMemcpy D2D in the same process: a row
// split over a cluster of C CTAs of T threads holding P values a thread in registers (C = 1: a
// block a row), partial statistics exchanged through distributed shared memory; and persistent
// clusters that stage their next row in shared memory. Each variant is checked on sampled rows
// against a double-precision reference before it is timed (median of `reps` runs, each after a
// 256 MiB memset that evicts L2). bench/results/kernels-h200.md, "Row normalizations: the
// variants measured", has a run and what it chose.
//
// Build and run on a GPU host (sm_90: clusters):
//   nvcc -O3 -std=c++17 -arch=sm_90 -o row_variants bench/kernels/experiments/row_variants.cu
//   ./row_variants [reps]   (default 20)
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace cg = cooperative_groups;

#define CK(x)                                                                      \
  do {                                                                             \
    cudaError_t e_ = (x);                                                          \
    if (e_ != cudaSuccess) {                                                       \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                     \
    }                                                                              \
  } while (0)

constexpr int kRows = 16384, kCols = 16384;

__device__ __forceinline__ float4 Ld(const float4* p, bool evict_first) {
  if (evict_first) return __ldcs(p);
  return *p;
}

// CTA `rank` of a row's cluster holds vectors [rank T V, (rank + 1) T V) of the row: loads this
// thread's V of them (coalesced: vector t + k T) and returns where its outputs go.
template <int T, int V, bool kEvict>
__device__ __forceinline__ float4* LoadSlice(const float* in, float* out, int64_t row, int cols,
                                             int rank, float4 (&v)[V]) {
  const float4* src = reinterpret_cast<const float4*>(in + row * cols) + rank * (T * V);
#pragma unroll
  for (int k = 0; k < V; ++k) v[k] = Ld(src + threadIdx.x + k * T, kEvict);
  return reinterpret_cast<float4*>(out + row * cols) + rank * (T * V);
}

// Softmax pair merge: (m, s) with s = sum exp(x - m).
__device__ __forceinline__ float2 MergeMs(float2 a, float2 b) {
  const float m = fmaxf(a.x, b.x);
  const float s = a.y * __expf(a.x - m) + b.y * __expf(b.x - m);
  return {m, s};
}

// This thread's statistics of its V vectors: the max; exp(x - m) in place, and their sum; the
// sum of squares.
template <int V>
__device__ __forceinline__ float LocalMax(const float4 (&v)[V]) {
  float m = -INFINITY;
#pragma unroll
  for (int k = 0; k < V; ++k) m = fmaxf(fmaxf(fmaxf(m, v[k].x), fmaxf(v[k].y, v[k].z)), v[k].w);
  return m;
}
template <int V>
__device__ __forceinline__ float ExpInPlaceSum(float4 (&v)[V], float m) {
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < V; ++k) {
    v[k].x = __expf(v[k].x - m);
    v[k].y = __expf(v[k].y - m);
    v[k].z = __expf(v[k].z - m);
    v[k].w = __expf(v[k].w - m);
    s += (v[k].x + v[k].y) + (v[k].z + v[k].w);
  }
  return s;
}
template <int V>
__device__ __forceinline__ float SumSquares(const float4 (&v)[V]) {
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < V; ++k)
    s += (v[k].x * v[k].x + v[k].y * v[k].y) + (v[k].z * v[k].z + v[k].w * v[k].w);
  return s;
}

template <int T>
__device__ __forceinline__ float2 BlockMs(float2 v, float2* scratch) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    float2 w{__shfl_xor_sync(~0u, v.x, o), __shfl_xor_sync(~0u, v.y, o)};
    v = MergeMs(v, w);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  constexpr int W = T / 32;
  v = lane < W ? scratch[lane] : float2{scratch[0].x, 0.f};
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    float2 w{__shfl_xor_sync(~0u, v.x, o), __shfl_xor_sync(~0u, v.y, o)};
    v = MergeMs(v, w);
  }
  return v;
}

template <int T>
__device__ __forceinline__ float BlockSum(float v, float* scratch) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(~0u, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  constexpr int W = T / 32;
  v = lane < W ? scratch[lane] : 0.f;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(~0u, v, o);
  return v;
}

// One cluster of C CTAs a row; CTA r holds columns [r * T * P, (r + 1) * T * P).
// kOp 0: softmax as one reduction of (max, sum of exp) pairs, 1: l2normalize, 2: copy (no
// statistics: the floor of the pattern).
template <int C, int T, int P, int kOp, bool kEvict>
__global__ void __launch_bounds__(T) ClusterRows(const float* __restrict__ in,
                                                 float* __restrict__ out, int cols) {
  // Every CTA of the cluster has started before any writes into a peer's shared memory: the
  // arrival here, the wait before the first remote write.
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  const int64_t row = blockIdx.x / C;
  constexpr int V = P / 4;
  float4 v[V];
  float4* dst = LoadSlice<T, V, kEvict>(in, out, row, cols, rank, v);
  __shared__ float2 scratch[32];
  __shared__ float2 part[C];
  if constexpr (kOp == 2) {
#pragma unroll
    for (int k = 0; k < V; ++k) dst[threadIdx.x + k * T] = v[k];
    asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
    return;
  } else if constexpr (kOp == 0) {
    float m = LocalMax(v);
    float s = ExpInPlaceSum(v, m);
    const float2 b = BlockMs<T>({m, s}, scratch);
    asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
    if (threadIdx.x < C) *cluster.map_shared_rank(&part[rank], threadIdx.x) = b;
    cluster.sync();
    float2 g = part[0];
#pragma unroll
    for (int r = 1; r < C; ++r) g = MergeMs(g, part[r]);
    const float scale = __expf(m - g.x) / g.y;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      float4 y{v[k].x * scale, v[k].y * scale, v[k].z * scale, v[k].w * scale};
      dst[threadIdx.x + k * T] = y;
    }
  } else {
    float s = SumSquares(v);
    const float b = BlockSum<T>(s, reinterpret_cast<float*>(scratch));
    asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
    if (threadIdx.x < C) *cluster.map_shared_rank(&part[rank].x, threadIdx.x) = b;
    cluster.sync();
    float g = 0.f;
#pragma unroll
    for (int r = 0; r < C; ++r) g += part[r].x;
    const float inv = 1.f / fmaxf(sqrtf(g), 1e-12f);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      float4 y{v[k].x * inv, v[k].y * inv, v[k].z * inv, v[k].w * inv};
      dst[threadIdx.x + k * T] = y;
    }
  }
}


struct MaxF { __device__ float operator()(float a, float b) const { return fmaxf(a, b); } };
struct SumF { __device__ float operator()(float a, float b) const { return a + b; } };

// Block all-reduce, then the cluster's: each CTA's value goes to every CTA's slot of its rank,
// one cluster barrier, every CTA combines the slots in rank order (the same result in each).
template <int C, int T>
struct ClusterReducer {
  float (*scratch)[32];   // [2][32]
  float (*slots)[C];      // [2][C]
  int parity = 0;
  bool waited = false;
  template <typename F>
  __device__ __forceinline__ float Reduce(float v, F op) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(~0u, v, o));
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) scratch[parity][warp] = v;
    __syncthreads();
    constexpr int W = T / 32;
    v = scratch[parity][lane < W ? lane : 0];
    if (lane >= W) v = scratch[parity][0];
    // lanes past W repeat warp 0's value: harmless for max, so sums take W lanes only
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float w = __shfl_xor_sync(~0u, v, o);
      if (o < W) v = op(v, w);
    }
    v = __shfl_sync(~0u, v, 0);
    if constexpr (C == 1) {
      parity ^= 1;
      return v;
    } else {
      if (!waited) {
        asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
        waited = true;
      }
      cg::cluster_group cl = cg::this_cluster();
      const int rank = static_cast<int>(cl.block_rank());
      if (threadIdx.x < C) *cl.map_shared_rank(&slots[parity][rank], threadIdx.x) = v;
      cl.sync();
      float r = slots[parity][0];
#pragma unroll
      for (int i = 1; i < C; ++i) r = op(r, slots[parity][i]);
      parity ^= 1;
      return r;
    }
  }
};

// kOp 0: softmax (max, then sum: two reductions), 1: l2normalize, 2: copy, 3: standardize
// (mean, then the sum of squared deviations).
template <int C, int T, int P, int kOp, bool kEvict>
__global__ void __launch_bounds__(T) ClusterRows2(const float* __restrict__ in,
                                                  float* __restrict__ out, int cols) {
  if constexpr (C > 1) asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
  const int rank = C > 1 ? static_cast<int>(cg::this_cluster().block_rank()) : 0;
  const int64_t row = blockIdx.x / C;
  constexpr int V = P / 4;
  float4 v[V];
  float4* dst = LoadSlice<T, V, kEvict>(in, out, row, cols, rank, v);
  __shared__ float scratch[2][32];
  __shared__ float slots[2][C];
  ClusterReducer<C, T> red{scratch, slots};
  float a = 1.f, b = 0.f;  // y = x * a + b
  if constexpr (kOp == 0) {
    float m = LocalMax(v);
    m = red.Reduce(m, MaxF{});
    float s = ExpInPlaceSum(v, m);
    s = red.Reduce(s, SumF{});
    a = 1.f / s;
  } else if constexpr (kOp == 1) {
    float s = SumSquares(v);
    s = red.Reduce(s, SumF{});
    a = 1.f / fmaxf(sqrtf(s), 1e-12f);
  } else if constexpr (kOp == 3) {
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < V; ++k) s += (v[k].x + v[k].y) + (v[k].z + v[k].w);
    const float mean = red.Reduce(s, SumF{}) / cols;
    float q = 0.f;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float dx = v[k].x - mean, dy = v[k].y - mean, dz = v[k].z - mean, dw = v[k].w - mean;
      q += (dx * dx + dy * dy) + (dz * dz + dw * dw);
    }
    q = red.Reduce(q, SumF{});
    a = 1.f / sqrtf(q / cols);
    b = -mean * a;
  }
#pragma unroll
  for (int k = 0; k < V; ++k)
    dst[threadIdx.x + k * T] = float4{fmaf(v[k].x, a, b), fmaf(v[k].y, a, b),
                                      fmaf(v[k].z, a, b), fmaf(v[k].w, a, b)};
  if constexpr (C > 1 && kOp == 2) asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
}

// Persistent cluster variant: the grid holds B clusters; cluster c walks rows c, c + B, ...
// with the next row's slice staged in shared memory by cp.async while the current one is in
// registers.
template <int C, int T, int P, int kOp>
__global__ void __launch_bounds__(T) ClusterRowsPersistent(const float* __restrict__ in,
                                                           float* __restrict__ out, int rows,
                                                           int cols) {
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every CTA has started before any writes into a peer's shared memory
  const int rank = static_cast<int>(cluster.block_rank());
  constexpr int V = P / 4;
  extern __shared__ float4 stage[];  // T * V
  __shared__ float2 scratch[32];
  __shared__ float2 part[2][C];
  const int nclusters = gridDim.x / C;
  int64_t row = blockIdx.x / C;
  auto prefetch = [&](int64_t r) {
    const float4* src = reinterpret_cast<const float4*>(in + r * cols) + rank * (T * V);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(stage + threadIdx.x + k * T));
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d),
                   "l"(src + threadIdx.x + k * T));
    }
    asm volatile("cp.async.commit_group;\n" ::);
  };
  if (row < rows) prefetch(row);
  int parity = 0;
  for (; row < rows; row += nclusters, parity ^= 1) {
    asm volatile("cp.async.wait_group 0;\n" ::);
    float4 v[V];
#pragma unroll
    for (int k = 0; k < V; ++k) v[k] = stage[threadIdx.x + k * T];
    // Own copies only: each thread reads back what it copied; the next prefetch is issued
    // after every value read has been used (so its loads have completed).
    float4* dst = reinterpret_cast<float4*>(out + row * cols) + rank * (T * V);
    if constexpr (kOp == 0) {
      float m = LocalMax(v);
      if (row + nclusters < rows) prefetch(row + nclusters);
      float s = ExpInPlaceSum(v, m);
      const float2 b = BlockMs<T>({m, s}, scratch);
      if (threadIdx.x < C) *cluster.map_shared_rank(&part[parity][rank], threadIdx.x) = b;
      cluster.sync();
      float2 g = part[parity][0];
#pragma unroll
      for (int r = 1; r < C; ++r) g = MergeMs(g, part[parity][r]);
      const float scale = __expf(m - g.x) / g.y;
#pragma unroll
      for (int k = 0; k < V; ++k)
        dst[threadIdx.x + k * T] =
            float4{v[k].x * scale, v[k].y * scale, v[k].z * scale, v[k].w * scale};
    } else if constexpr (kOp == 1) {
      float s = SumSquares(v);
      if (row + nclusters < rows) prefetch(row + nclusters);
      const float b = BlockSum<T>(s, reinterpret_cast<float*>(scratch));
      if (threadIdx.x < C) *cluster.map_shared_rank(&part[parity][rank].x, threadIdx.x) = b;
      cluster.sync();
      float g = 0.f;
#pragma unroll
      for (int r = 0; r < C; ++r) g += part[parity][r].x;
      const float inv = 1.f / fmaxf(sqrtf(g), 1e-12f);
#pragma unroll
      for (int k = 0; k < V; ++k)
        dst[threadIdx.x + k * T] = float4{v[k].x * inv, v[k].y * inv, v[k].z * inv, v[k].w * inv};
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k) dst[threadIdx.x + k * T] = v[k];
      if (row + nclusters < rows) prefetch(row + nclusters);
    }
    // scratch is reused next row: BlockMs's barrier covers the warp slots only after every
    // warp read them, which the cluster barrier above guarantees.
  }
  cluster.sync();  // no CTA leaves while a peer may still write its part[]
}

__global__ void Fill(float* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    h *= 3266489917u;
    h ^= h >> 16;
    p[i] = (static_cast<int>(h & 255) * 2 - 255) / 64.0f;
  }
}

struct Timer {
  cudaEvent_t a, b;
  Timer() {
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
  }
};

// A launch of `blocks` CTAs of `threads` in clusters of `cluster` along x, with `smem` bytes of
// dynamic shared memory; `attr` holds the cluster attribute and must outlive the launch.
cudaLaunchConfig_t ClusterLaunch(int blocks, int threads, int cluster, size_t smem,
                                 cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(blocks);
  cfg.blockDim = dim3(threads);
  cfg.dynamicSmemBytes = smem;
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = cluster;
  attr->val.clusterDim.y = 1;
  attr->val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}

static void* g_flush = nullptr;
static size_t g_flush_bytes = size_t{256} << 20;

template <typename F>
double Median(F&& launch, int reps) {
  Timer t;
  std::vector<float> ms;
  for (int i = 0; i < reps + 3; ++i) {
    CK(cudaMemsetAsync(g_flush, i & 255, g_flush_bytes));
    CK(cudaEventRecord(t.a));
    launch();
    CK(cudaEventRecord(t.b));
    CK(cudaEventSynchronize(t.b));
    CK(cudaGetLastError());
    float x;
    CK(cudaEventElapsedTime(&x, t.a, t.b));
    if (i >= 3) ms.push_back(x);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2] * 1000.0;
}

static std::vector<float> g_host_in;

// Checks sampled rows against a double-precision reference.
bool Check(const float* d_out, int op, const char* name) {
  std::vector<float> row(kCols);
  double worst = 0;
  for (int r : {0, 1, 131, 132, 263, 264, 5000, 12345, 16383}) {
    CK(cudaMemcpy(row.data(), d_out + int64_t{r} * kCols, kCols * 4, cudaMemcpyDeviceToHost));
    const float* x = g_host_in.data() + int64_t{r} * kCols;
    if (op == 2) {
      if (memcmp(row.data(), x, kCols * 4) != 0) {
        printf("  %s: copy mismatch at row %d\n", name, r);
        return false;
      }
      continue;
    }
    std::vector<double> ref(kCols);
    if (op == 0) {
      double m = -1e300, s = 0;
      for (int c = 0; c < kCols; ++c) m = std::max(m, double(x[c]));
      for (int c = 0; c < kCols; ++c) s += std::exp(double(x[c]) - m);
      for (int c = 0; c < kCols; ++c) ref[c] = std::exp(double(x[c]) - m) / s;
    } else if (op == 3) {
      double s = 0, q = 0;
      for (int c = 0; c < kCols; ++c) s += x[c];
      const double mean = s / kCols;
      for (int c = 0; c < kCols; ++c) q += (x[c] - mean) * (x[c] - mean);
      const double sd = std::sqrt(q / kCols);
      for (int c = 0; c < kCols; ++c) ref[c] = (x[c] - mean) / sd;
    } else {
      double s = 0;
      for (int c = 0; c < kCols; ++c) s += double(x[c]) * x[c];
      for (int c = 0; c < kCols; ++c) ref[c] = x[c] / std::sqrt(s);
    }
    for (int c = 0; c < kCols; ++c) {
      const double e = std::fabs(row[c] - ref[c]) / std::max(std::fabs(ref[c]), 1e-30);
      worst = std::max(worst, e);
    }
  }
  const bool ok = worst < 2e-5;
  if (!ok) printf("  %s: FAILED, max relative error %.3g\n", name, worst);
  return ok;
}

int main(int argc, char** argv) {
  const int reps = argc > 1 ? atoi(argv[1]) : 20;
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int64_t n = int64_t{kRows} * kCols;
  float *d_in, *d_out;
  CK(cudaMalloc(&d_in, n * 4));
  CK(cudaMalloc(&d_out, n * 4));
  CK(cudaMalloc(&g_flush, g_flush_bytes));
  Fill<<<1024, 256>>>(d_in, n, 12345u);
  CK(cudaDeviceSynchronize());
  g_host_in.resize(n);
  CK(cudaMemcpy(g_host_in.data(), d_in, n * 4, cudaMemcpyDeviceToHost));

  const double copy = Median([&] { CK(cudaMemcpyAsync(d_out, d_in, n * 4, cudaMemcpyDeviceToDevice)); }, reps);
  printf("copy D2D: %.1f us\n", copy);

  // Checks a variant's output, then times it.
  auto measure = [&](const char* name, int op, auto go) {
    go();
    CK(cudaDeviceSynchronize());
    const bool ok = Check(d_out, op, name);
    const double us = Median(go, reps);
    printf("%-44s %8.1f us  %5.1f%% of copy %s\n", name, us, 100.0 * copy / us, ok ? "ok" : "BAD");
  };

// A block (a cluster of C CTAs) a row: KERNEL<C, T, P, OP, EV>, named PREFIX "cluster..."
#define RUN_SLICES(KERNEL, PREFIX, C, T, P, OP, EV)                                        \
  do {                                                                                     \
    auto k = KERNEL<C, T, P, OP, EV>;                                                      \
    cudaLaunchAttribute at;                                                                \
    const cudaLaunchConfig_t cfg = ClusterLaunch(kRows * C, T, C, 0, &at);                 \
    char name[96];                                                                         \
    snprintf(name, sizeof name, PREFIX "cluster%d x %d thr x %d, op %d%s", C, T, P, OP,     \
             EV ? " ldcs" : "");                                                           \
    measure(name, OP,                                                                      \
            [&] { CK(cudaLaunchKernelEx(&cfg, k, (const float*)d_in, d_out, kCols)); });   \
  } while (0)
// Softmax as one merged reduction (ClusterRows), or the ops with one cluster barrier a
// reduction (ClusterRows2).
#define RUN_CLUSTER(C, T, P, OP, EV) RUN_SLICES(ClusterRows, "", C, T, P, OP, EV)
#define RUN_CLUSTER2(C, T, P, OP, EV) RUN_SLICES(ClusterRows2, "v2 ", C, T, P, OP, EV)

// Persistent clusters, PER_SM CTAs an SM (fewer if they do not fit), walking the rows.
#define RUN_PERSIST(C, T, P, OP, PER_SM)                                                   \
  do {                                                                                     \
    auto k = ClusterRowsPersistent<C, T, P, OP>;                                           \
    const int smem = T * (P / 4) * 16;                                                     \
    CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));         \
    cudaLaunchAttribute at;                                                                \
    cudaLaunchConfig_t cfg = ClusterLaunch(sms * PER_SM / C * C, T, C, smem, &at);         \
    int clusters = 0;                                                                      \
    CK(cudaOccupancyMaxActiveClusters(&clusters, k, &cfg));                                \
    if (clusters * C < static_cast<int>(cfg.gridDim.x)) cfg.gridDim = dim3(clusters * C);  \
    char name[96];                                                                         \
    snprintf(name, sizeof name, "persist%d x %d thr x %d, op %d, grid %d (max %d cl)", C, \
             T, P, OP, cfg.gridDim.x, clusters);                                           \
    measure(name, OP, [&] {                                                                \
      CK(cudaLaunchKernelEx(&cfg, k, (const float*)d_in, d_out, kRows, kCols));            \
    });                                                                                    \
  } while (0)

  // A plain copy through the same slices: the floor of each shape.
  RUN_CLUSTER2(1, 512, 32, 2, false);
  RUN_CLUSTER2(2, 512, 16, 2, false);
  RUN_CLUSTER2(2, 256, 32, 2, false);
  RUN_CLUSTER2(4, 256, 16, 2, false);
  // softmax, one merged reduction of (max, sum) pairs
  RUN_CLUSTER(1, 1024, 16, 0, false);
  RUN_CLUSTER(1, 512, 32, 0, false);
  RUN_CLUSTER(1, 256, 64, 0, false);
  RUN_CLUSTER(2, 512, 16, 0, false);
  RUN_CLUSTER(2, 256, 32, 0, false);
  RUN_CLUSTER(2, 128, 64, 0, false);
  RUN_CLUSTER(4, 512, 8, 0, false);
  RUN_CLUSTER(4, 256, 16, 0, false);
  RUN_CLUSTER(4, 128, 32, 0, false);
  RUN_CLUSTER(8, 256, 8, 0, false);
  RUN_CLUSTER(8, 128, 16, 0, false);
  // softmax, two reductions (an exact max, then the sum), as the library's ops
  RUN_CLUSTER2(1, 512, 32, 0, false);
  RUN_CLUSTER2(2, 256, 32, 0, false);
  RUN_CLUSTER2(2, 256, 32, 0, true);
  RUN_CLUSTER2(2, 128, 64, 0, false);
  RUN_CLUSTER2(4, 128, 32, 0, false);
  RUN_CLUSTER2(4, 64, 64, 0, false);
  // l2normalize
  RUN_CLUSTER2(1, 512, 32, 1, false);
  RUN_CLUSTER2(2, 256, 32, 1, false);
  RUN_CLUSTER2(2, 128, 64, 1, false);
  // standardize
  RUN_CLUSTER2(1, 512, 32, 3, false);
  RUN_CLUSTER2(2, 256, 32, 3, false);
  RUN_CLUSTER2(2, 128, 64, 3, false);
  // persistent clusters, the next row staged in shared memory
  RUN_PERSIST(2, 256, 32, 0, 2);
  RUN_PERSIST(2, 256, 32, 0, 4);
  RUN_PERSIST(4, 256, 16, 0, 4);
  // the copy and the adopted shape again, for the spread within the run
  const double copy2 = Median([&] { CK(cudaMemcpyAsync(d_out, d_in, n * 4, cudaMemcpyDeviceToDevice)); }, reps);
  printf("copy D2D again: %.1f us\n", copy2);
  RUN_CLUSTER2(1, 512, 32, 0, false);
  RUN_CLUSTER2(1, 512, 32, 1, false);
  RUN_CLUSTER2(1, 512, 32, 3, false);
  return 0;
}
