// Typed element access for the kernels: the storage types of ElementType, the type each
// computes in (float16 widens to float; float64 stays double; int32 stays int32), and the
// loads and stores between them. Loads go through L2 only (__ldcg; see row_access.cuh for why
// never __ldg on PDL paths). A 16-byte vector holds kVecElems<S> elements: 4 floats, 2
// doubles, 8 halves, 4 int32.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/common/element_type.h"

namespace gpupipe::kernels::cuda::detail {

template <typename S>
struct StorageTraits;
template <>
struct StorageTraits<float> {
  using Compute = float;
  static constexpr ElementType kType = ElementType::kFloat32;
};
template <>
struct StorageTraits<double> {
  using Compute = double;
  static constexpr ElementType kType = ElementType::kFloat64;
};
template <>
struct StorageTraits<__half> {
  using Compute = float;
  static constexpr ElementType kType = ElementType::kFloat16;
};
template <>
struct StorageTraits<int32_t> {
  using Compute = int32_t;
  static constexpr ElementType kType = ElementType::kInt32;
};

template <typename S>
using ComputeOf = typename StorageTraits<S>::Compute;

template <typename S>
inline constexpr int kVecElems = static_cast<int>(16 / sizeof(S));

// Converts between storage and compute types (identity except for float16, which rounds to
// nearest even on the way out, as NumPy's float16 casts).
__device__ __forceinline__ float ToCompute(__half x) { return __half2float(x); }
__device__ __forceinline__ float ToCompute(float x) { return x; }
__device__ __forceinline__ double ToCompute(double x) { return x; }
__device__ __forceinline__ int32_t ToCompute(int32_t x) { return x; }

template <typename S, typename C>
__device__ __forceinline__ S FromCompute(C x) {
  if constexpr (std::is_same_v<S, __half>) {
    return __float2half_rn(x);
  } else {
    return static_cast<S>(x);
  }
}

// One element through L2.
template <typename S>
__device__ __forceinline__ ComputeOf<S> LoadElem(const S* p) {
  if constexpr (std::is_same_v<S, __half>) {
    return __half2float(__ushort_as_half(__ldcg(reinterpret_cast<const unsigned short*>(p))));
  } else {
    return __ldcg(p);
  }
}

template <typename S>
__device__ __forceinline__ void StoreElem(S* p, ComputeOf<S> x) {
  *p = FromCompute<S>(x);
}

// The elements of one raw 16-byte vector (from global or shared memory).
template <typename S>
__device__ __forceinline__ void LoadVecFromRaw(int4 raw, ComputeOf<S> (&x)[kVecElems<S>]) {
  const unsigned w[4] = {static_cast<unsigned>(raw.x), static_cast<unsigned>(raw.y),
                         static_cast<unsigned>(raw.z), static_cast<unsigned>(raw.w)};
  if constexpr (std::is_same_v<S, __half>) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      x[2 * k] = __half2float(__ushort_as_half(static_cast<unsigned short>(w[k] & 0xffffu)));
      x[2 * k + 1] = __half2float(__ushort_as_half(static_cast<unsigned short>(w[k] >> 16)));
    }
  } else if constexpr (std::is_same_v<S, double>) {
    x[0] = __hiloint2double(static_cast<int>(w[1]), static_cast<int>(w[0]));
    x[1] = __hiloint2double(static_cast<int>(w[3]), static_cast<int>(w[2]));
  } else if constexpr (std::is_same_v<S, float>) {
#pragma unroll
    for (int k = 0; k < 4; ++k) x[k] = __uint_as_float(w[k]);
  } else {
#pragma unroll
    for (int k = 0; k < 4; ++k) x[k] = static_cast<int32_t>(w[k]);
  }
}

// The kVecElems<S> elements at the 16-byte aligned p, widened to the compute type.
template <typename S>
__device__ __forceinline__ void LoadVec(const S* p, ComputeOf<S> (&x)[kVecElems<S>]) {
  const int4 raw = __ldcg(reinterpret_cast<const int4*>(p));
  LoadVecFromRaw<S>(raw, x);
}

// Stores kVecElems<S> values at p; `vec` says p is 16-byte aligned (one 16-byte store),
// otherwise element by element.
template <typename S>
__device__ __forceinline__ void StoreVec(S* p, const ComputeOf<S> (&x)[kVecElems<S>], bool vec) {
  constexpr int N = kVecElems<S>;
  if (!vec) {
#pragma unroll
    for (int k = 0; k < N; ++k) p[k] = FromCompute<S>(x[k]);
    return;
  }
  unsigned w[4];
  if constexpr (std::is_same_v<S, __half>) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      w[k] = static_cast<unsigned>(__half_as_ushort(__float2half_rn(x[2 * k]))) |
             (static_cast<unsigned>(__half_as_ushort(__float2half_rn(x[2 * k + 1]))) << 16);
    }
  } else if constexpr (std::is_same_v<S, double>) {
    w[0] = static_cast<unsigned>(__double2loint(x[0]));
    w[1] = static_cast<unsigned>(__double2hiint(x[0]));
    w[2] = static_cast<unsigned>(__double2loint(x[1]));
    w[3] = static_cast<unsigned>(__double2hiint(x[1]));
  } else if constexpr (std::is_same_v<S, float>) {
#pragma unroll
    for (int k = 0; k < 4; ++k) w[k] = __float_as_uint(x[k]);
  } else {
#pragma unroll
    for (int k = 0; k < 4; ++k) w[k] = static_cast<unsigned>(x[k]);
  }
  *reinterpret_cast<int4*>(p) = make_int4(static_cast<int>(w[0]), static_cast<int>(w[1]),
                                          static_cast<int>(w[2]), static_cast<int>(w[3]));
}

// ---- math in the compute type ------------------------------------------------------------------
// Overloads so templated kernels call the single- or double-precision function explicitly.

__device__ __forceinline__ float MathExp(float x) { return expf(x); }
__device__ __forceinline__ double MathExp(double x) { return exp(x); }
__device__ __forceinline__ float MathSqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double MathSqrt(double x) { return sqrt(x); }
__device__ __forceinline__ float MathFma(float a, float b, float c) { return fmaf(a, b, c); }
__device__ __forceinline__ double MathFma(double a, double b, double c) { return fma(a, b, c); }
__device__ __forceinline__ float MathMax(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ double MathMax(double a, double b) { return fmax(a, b); }

template <typename C>
__device__ __forceinline__ C Infinity() {
  return static_cast<C>(INFINITY);
}

}  // namespace gpupipe::kernels::cuda::detail
