#include "bench/kernels/bench_device.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstring>
#include <type_traits>

namespace gpupipe::bench {
namespace {

__host__ __device__ __forceinline__ uint32_t Mix32(uint32_t x) {
  // "lowbias32" (C. Wellons): cheap, well mixed, and reproducible with int64 tensor ops.
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

__global__ void FillKernel(float* d, int64_t n, uint32_t mixed_seed) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint32_t h = Mix32(static_cast<uint32_t>(i) + mixed_seed);  // wraps mod 2^32
    const int q = static_cast<int>(h >> 24);  // 0..255
    d[i] = static_cast<float>(2 * q - 255) * (1.0f / 256.0f);
  }
}

template <typename T>
__device__ __forceinline__ T FromQuantized(int q) {  // q = 2 * (0..255) - 255
  if constexpr (std::is_same_v<T, int32_t>) {
    return q;
  } else {
    return static_cast<T>(static_cast<float>(q) * (1.0f / 256.0f));  // exact in every type
  }
}

template <typename T>
__global__ void FillTypedKernel(T* d, int64_t n, uint32_t mixed_seed) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint32_t h = Mix32(static_cast<uint32_t>(i) + mixed_seed);
    d[i] = FromQuantized<T>(2 * static_cast<int>(h >> 24) - 255);
  }
}

__device__ __forceinline__ uint64_t GlobalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void SpinKernel(uint64_t ns) {
  const uint64_t start = GlobalTimerNs();
  while (GlobalTimerNs() - start < ns) {
  }
}

__global__ void FlushKernel(const uint4* p, int64_t n, unsigned* sink) {
  unsigned x = 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint4 v = __ldcg(p + i);
    x ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (x == 0x9E3779B9u) *sink = x;  // keeps the loads; the buffer is zeroed, so never taken
}

// acc: [0] max |out - ref| (as ordered bits of a non-negative double), [1] max |ref|, [2] bad.
__device__ __forceinline__ void AtomicMaxNonNeg(unsigned long long* p, double v) {
  atomicMax(p, static_cast<unsigned long long>(__double_as_longlong(v)));
}

template <typename T>
__device__ __forceinline__ double AsDouble(T v) {
  if constexpr (std::is_same_v<T, __half>) {
    return static_cast<double>(__half2float(v));
  } else {
    return static_cast<double>(v);
  }
}

// Compares out with ref element by element, through double: acc[0] the largest absolute
// error, acc[1] the largest |ref|, acc[2] the elements beyond atol + rtol * |ref| or whose
// finiteness differs (NaN matches NaN, an infinity itself).
template <typename T>
__global__ void CompareTypedKernel(const T* out, const T* ref, int64_t n, double atol,
                                   double rtol, unsigned long long* acc) {
  double err = 0, mref = 0;
  unsigned long long bad = 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double y = AsDouble(out[i]), r = AsDouble(ref[i]);
    const bool fy = isfinite(y), fr = isfinite(r);
    if (fy != fr || (!fy && !(isnan(y) && isnan(r)) && y != r)) {
      ++bad;
      continue;
    }
    if (!fy) continue;
    const double e = fabs(y - r);
    err = fmax(err, e);
    mref = fmax(mref, fabs(r));
    bad += e > atol + rtol * fabs(r);
  }
  for (int o = 16; o > 0; o /= 2) {
    err = fmax(err, __shfl_down_sync(0xffffffffu, err, o));
    mref = fmax(mref, __shfl_down_sync(0xffffffffu, mref, o));
    bad += __shfl_down_sync(0xffffffffu, bad, o);
  }
  if (threadIdx.x % 32 == 0) {
    AtomicMaxNonNeg(&acc[0], err);
    AtomicMaxNonNeg(&acc[1], mref);
    if (bad) atomicAdd(&acc[2], bad);
  }
}

__global__ void CompareIntKernel(const int64_t* out, const void* ref, bool ref_is_int32, int64_t n,
                                 unsigned long long* acc) {
  unsigned long long bad = 0;
  double err = 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = ref_is_int32 ? static_cast<const int32_t*>(ref)[i]
                                   : static_cast<const int64_t*>(ref)[i];
    if (out[i] != r) {
      ++bad;
      err = fmax(err, fabs(static_cast<double>(out[i] - r)));
    }
  }
  for (int o = 16; o > 0; o /= 2) {
    err = fmax(err, __shfl_down_sync(0xffffffffu, err, o));
    bad += __shfl_down_sync(0xffffffffu, bad, o);
  }
  if (threadIdx.x % 32 == 0) {
    AtomicMaxNonNeg(&acc[0], err);
    if (bad) atomicAdd(&acc[2], bad);
  }
}

cudaError_t ReadBack(void* d_acc, cudaStream_t stream, CompareResult* result) {
  unsigned long long h[3];
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) err = cudaMemcpyAsync(h, d_acc, sizeof(h), cudaMemcpyDeviceToHost, stream);
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  if (err != cudaSuccess) return err;
  std::memcpy(&result->max_abs_err, &h[0], sizeof(double));
  std::memcpy(&result->max_abs_ref, &h[1], sizeof(double));
  result->bad = h[2];
  return cudaSuccess;
}

}  // namespace

uint32_t Hash32(uint32_t x) { return Mix32(x); }

cudaError_t FillQuantized(float* d, int64_t n, uint32_t seed, cudaStream_t stream) {
  FillKernel<<<132 * 8, 256, 0, stream>>>(d, n, Mix32(seed));
  return cudaGetLastError();
}

cudaError_t FillQuantizedAs(void* d, kernels::ElementType type, int64_t n, uint32_t seed,
                            cudaStream_t stream) {
  const uint32_t mixed = Mix32(seed);
  switch (type) {
    case kernels::ElementType::kFloat32:
      FillTypedKernel<<<132 * 8, 256, 0, stream>>>(static_cast<float*>(d), n, mixed);
      break;
    case kernels::ElementType::kFloat64:
      FillTypedKernel<<<132 * 8, 256, 0, stream>>>(static_cast<double*>(d), n, mixed);
      break;
    case kernels::ElementType::kFloat16:
      FillTypedKernel<<<132 * 8, 256, 0, stream>>>(static_cast<__half*>(d), n, mixed);
      break;
    case kernels::ElementType::kInt32:
      FillTypedKernel<<<132 * 8, 256, 0, stream>>>(static_cast<int32_t*>(d), n, mixed);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t FlushL2(const void* d_buffer, size_t bytes, void* d_sink, cudaStream_t stream) {
  FlushKernel<<<132 * 8, 256, 0, stream>>>(static_cast<const uint4*>(d_buffer),
                                           static_cast<int64_t>(bytes / sizeof(uint4)),
                                           static_cast<unsigned*>(d_sink));
  return cudaGetLastError();
}

cudaError_t LaunchSpin(cudaStream_t stream, uint64_t ns) {
  SpinKernel<<<1, 1, 0, stream>>>(ns);
  return cudaGetLastError();
}

cudaError_t CompareTyped(const void* d_out, const void* d_ref, kernels::ElementType type,
                         int64_t n, double atol, double rtol, void* d_acc, cudaStream_t stream,
                         CompareResult* result) {
  cudaError_t err = cudaMemsetAsync(d_acc, 0, 32, stream);
  if (err != cudaSuccess) return err;
  auto* acc = static_cast<unsigned long long*>(d_acc);
  auto launch = [&](auto tag) {
    using T = decltype(tag);
    CompareTypedKernel<<<132 * 4, 256, 0, stream>>>(static_cast<const T*>(d_out),
                                                    static_cast<const T*>(d_ref), n, atol, rtol,
                                                    acc);
  };
  switch (type) {
    case kernels::ElementType::kFloat32: launch(float{}); break;
    case kernels::ElementType::kFloat64: launch(double{}); break;
    case kernels::ElementType::kFloat16: launch(__half{}); break;
    case kernels::ElementType::kInt32: launch(int32_t{}); break;
    case kernels::ElementType::kInt64: launch(int64_t{}); break;
  }
  return ReadBack(d_acc, stream, result);
}

cudaError_t CompareInt(const int64_t* d_out, const void* d_ref, bool ref_is_int32, int64_t n,
                       void* d_acc, cudaStream_t stream, CompareResult* result) {
  cudaError_t err = cudaMemsetAsync(d_acc, 0, 32, stream);
  if (err != cudaSuccess) return err;
  CompareIntKernel<<<132 * 4, 256, 0, stream>>>(d_out, d_ref, ref_is_int32, n,
                                                static_cast<unsigned long long*>(d_acc));
  return ReadBack(d_acc, stream, result);
}

}  // namespace gpupipe::bench
