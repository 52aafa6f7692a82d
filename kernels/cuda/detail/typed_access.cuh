// Element access for the typed kernels (float32, float64, float16, int32): L2-coherent scalar
// and 16-byte vector loads (ld.global.cg: PDL-launched kernels may start while their input is
// still being written by the previous kernel, so nothing goes through the non-coherent path),
// kept in one place for every typed kernel.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/detail/element_access.cuh"

namespace gpupipe::kernels::cuda::detail {

template <typename T>
__device__ __forceinline__ T LoadCg(const T* p) {
  return __ldcg(p);
}
template <>
__device__ __forceinline__ __half LoadCg<__half>(const __half* p) {
  return __ushort_as_half(__ldcg(reinterpret_cast<const unsigned short*>(p)));
}

// kVecElems<T>, the elements of T in one 16-byte vector, is element_access.cuh's.

// The kVecElems elements at p, which must be 16-byte aligned.
template <typename T>
struct alignas(16) Vec16 {
  T v[kVecElems<T>];
};
template <typename T>
__device__ __forceinline__ Vec16<T> LoadVec16Cg(const T* p) {
  const uint4 raw = __ldcg(reinterpret_cast<const uint4*>(p));
  Vec16<T> out;
  *reinterpret_cast<uint4*>(&out) = raw;
  return out;
}

// Elements from p up to the next 16-byte boundary (p must be aligned to its element size), at
// most `count`.
template <typename T>
__device__ __forceinline__ int64_t HeadToAlign16(const T* p, int64_t count) {
  const int mis = static_cast<int>((reinterpret_cast<uintptr_t>(p) & 15u) / sizeof(T));
  const int64_t head = mis == 0 ? 0 : kVecElems<T> - mis;
  return head < count ? head : count;
}

}  // namespace gpupipe::kernels::cuda::detail
