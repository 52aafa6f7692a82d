// Typed element access for the kernels that take an ElementType (cumsum, histogram): each
// thread reads or writes N consecutive elements, with 16-byte vector accesses when the run is
// whole and 16-byte aligned and per-element accesses (bounds-checked) otherwise. Loads go
// through L2 only (__ldcg): the kernels are launched with PDL and read buffers that the kernel
// before may have written (see launch.cuh).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace gpupipe::kernels::cuda::detail {

// The accumulator of each input type and the bits through which it is loaded.
template <typename In> struct ItemTraits;
template <> struct ItemTraits<float> {
  using Acc = float;
  using Bits = float;
  __device__ static float ToAcc(float b) { return b; }
  __device__ static double ToDouble(float b) { return b; }
};
template <> struct ItemTraits<double> {
  using Acc = double;
  using Bits = double;
  __device__ static double ToAcc(double b) { return b; }
  __device__ static double ToDouble(double b) { return b; }
};
template <> struct ItemTraits<__half> {
  using Acc = float;
  using Bits = unsigned short;
  __device__ static float ToAcc(unsigned short b) { return __half2float(__ushort_as_half(b)); }
  __device__ static double ToDouble(unsigned short b) { return ToAcc(b); }
};
template <> struct ItemTraits<int32_t> {
  using Acc = long long;
  using Bits = int;
  __device__ static long long ToAcc(int b) { return b; }
  __device__ static double ToDouble(int b) { return b; }
};

__device__ __forceinline__ bool Aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

// v[k] = ToAcc(p[k]) for k < valid, `zero` beyond (valid may be <= 0 or >= N).
template <typename In, int N, typename T, typename Convert>
__device__ __forceinline__ void LoadItems(const In* p, int64_t valid, T (&v)[N], T zero,
                                          Convert convert) {
  using Bits = typename ItemTraits<In>::Bits;
  constexpr int kVec = 16 / sizeof(Bits);
  static_assert(N % kVec == 0, "whole vectors per thread");
  const auto* bits = reinterpret_cast<const Bits*>(p);
  if (valid >= N && Aligned16(p)) {
#pragma unroll
    for (int k = 0; k < N; k += kVec) {
      const uint4 raw = __ldcg(reinterpret_cast<const uint4*>(bits + k));
      Bits e[kVec];
      memcpy(e, &raw, sizeof(raw));
#pragma unroll
      for (int j = 0; j < kVec; ++j) v[k + j] = convert(e[j]);
    }
  } else {
#pragma unroll
    for (int k = 0; k < N; ++k) v[k] = k < valid ? convert(__ldcg(bits + k)) : zero;
  }
}

// p[k] = v[k] for k < valid.
template <typename Out, int N>
__device__ __forceinline__ void StoreItems(Out* p, int64_t valid, const Out (&v)[N]) {
  constexpr int kVec = 16 / sizeof(Out);
  static_assert(N % kVec == 0, "whole vectors per thread");
  if (valid >= N && Aligned16(p)) {
#pragma unroll
    for (int k = 0; k < N; k += kVec) {
      uint4 raw;
      memcpy(&raw, &v[k], sizeof(raw));
      *reinterpret_cast<uint4*>(p + k) = raw;
    }
  } else {
#pragma unroll
    for (int k = 0; k < N; ++k) {
      if (k < valid) p[k] = v[k];
    }
  }
}

}  // namespace gpupipe::kernels::cuda::detail
