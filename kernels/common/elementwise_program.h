// An elementwise program: a short list of elementwise instructions applied in order to each
// element. One program describes a fused run of elementwise ops, so a run of any length is one
// kernel and one pass over memory. It is plain data, passed by value as a kernel parameter,
// and interpreted by the same ApplyEw on the host (CPU reference) and on the device.
//
// Compute types: a program runs in float (float32 and float16 data: float16 is widened on
// load and rounded once on store), double (float64) or int32_t (int32 data, where only the
// integer-closed opcodes kAffine (as add), kRelu, kClamp and kAbs are valid, with NumPy's
// two's-complement wrap-around; IsIntegerEwOpcode).
//
// Host/device agreement, per opcode (float32; float64 alike with the double functions, whose
// CUDA error bounds are at most 2 ulp; int32 is always exact):
//  - bit-identical: kAffine, kRelu, kClamp, kAbs, kSqrt. They are single IEEE operations
//    (fmaf, comparisons, fabsf, sqrtf) that both sides round correctly. This holds as long as
//    the device code is built without -use_fast_math / -prec-sqrt=false / -ftz=true and the
//    host code without -ffast-math.
//  - within a few ulp: kExp, kLog, kSigmoid, kTanh, kPow. They call expf/logf/tanhf/powf,
//    which CUDA implements with documented maximum errors (expf 2 ulp, logf 1, tanhf 2, powf 4)
//    while the host libm (glibc) is within about 1 ulp (tanhf about 2). EwHostDeviceUlp() gives
//    the bound the tests use for one instruction. Special values (NaN, +-inf, signed zeros,
//    the C99 special cases of powf) agree exactly. kSigmoid composes expf with an add and a
//    division, hence its wider bound. A program that follows such an instruction with others
//    carries the difference along (amplified by e.g. a large affine scale).
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define GPUPIPE_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define GPUPIPE_HOST_DEVICE inline
#endif

namespace gpupipe::kernels {

enum class EwOpcode : int32_t {
  kAffine = 0,   // x = fma(a, x, b), rounded once
  kRelu = 1,     // x = x < 0 ? 0 : x (NaN stays NaN, as np.maximum)
  kClamp = 2,    // x = min(max(x, a), b) as np.clip(x, a, b): a NaN operand gives NaN; a > b
                 // gives b
  kAbs = 3,      // x = |x|
  kSqrt = 4,     // x = sqrtf(x), correctly rounded; x < 0 gives NaN, -0 stays -0
  kExp = 5,      // x = expf(x)
  kLog = 6,      // x = logf(x); 0 gives -inf, x < 0 gives NaN
  kSigmoid = 7,  // x = 1 / (1 + exp(-x)), evaluated without overflow for any x
  kTanh = 8,     // x = tanhf(x)
  kPow = 9,      // x = powf(x, a) (C99 special cases: pow(x, 0) = 1 even for NaN x, ...)
};

// One past the largest opcode; opcodes are dense from 0.
inline constexpr int32_t kEwOpcodeCount = 10;

GPUPIPE_HOST_DEVICE bool IsValidEwOpcode(EwOpcode op) {
  return static_cast<int32_t>(op) >= 0 && static_cast<int32_t>(op) < kEwOpcodeCount;
}

// Largest difference in ulp between host and device for one instruction on a finite result
// (0: bit-identical).
inline constexpr int EwHostDeviceUlp(EwOpcode op) {
  switch (op) {
    case EwOpcode::kExp: return 3;
    case EwOpcode::kLog: return 2;
    case EwOpcode::kSigmoid: return 6;
    case EwOpcode::kTanh: return 4;
    case EwOpcode::kPow: return 6;
    default: return 0;
  }
}

// Parameters are doubles so a float64 program keeps them exactly; each compute type converts
// them once per instruction (EwParam): float rounds to nearest (as the planner used to),
// int32 saturates (so an infinite clamp bound means no bound).
struct EwInstr {
  EwOpcode op = EwOpcode::kAffine;
  double a = 1.0;
  double b = 0.0;
};

// Longest program one kernel takes; longer runs are split into several programs by the planner.
inline constexpr int kMaxEwInstrs = 16;

struct EwProgram {
  int32_t count = 0;
  EwInstr instrs[kMaxEwInstrs];

  // Appends an instruction; returns false (and changes nothing) when the program is full.
  bool Append(EwInstr instr) {
    if (count >= kMaxEwInstrs) return false;
    instrs[count++] = instr;
    return true;
  }
};

GPUPIPE_HOST_DEVICE bool IsIntegerEwOpcode(EwOpcode op) {
  return op == EwOpcode::kAffine || op == EwOpcode::kRelu || op == EwOpcode::kClamp ||
         op == EwOpcode::kAbs;
}

// 1 / (1 + e^-x) through e = exp(-|x|) <= 1, which never overflows: for x >= 0 it is
// 1 / (1 + e); for x < 0, e / (1 + e), which keeps full relative precision down to the
// denormals where the plain formula would compute 1 / inf. NaN gives NaN (via e).
GPUPIPE_HOST_DEVICE float SigmoidF(float x) {
  const float e = expf(-fabsf(x));
  const float d = 1.0f + e;
  return x >= 0.0f ? 1.0f / d : e / d;
}
GPUPIPE_HOST_DEVICE double SigmoidD(double x) {
  const double e = exp(-fabs(x));
  const double d = 1.0 + e;
  return x >= 0.0 ? 1.0 / d : e / d;
}

// The transcendental opcodes, kept out of line on the device: ApplyEwN expands every opcode
// once per value, and inlining expf/logf/tanhf/powf N times over would bloat the kernels (and
// their instruction cache footprint) for opcodes that are compute-bound anyway. The math is
// the same expression either way, so results do not depend on the inlining.
#if defined(__CUDACC__)
#define GPUPIPE_EW_COLD static __host__ __device__ __noinline__
#else
#define GPUPIPE_EW_COLD inline
#endif

GPUPIPE_EW_COLD float ApplyEwTranscendental(EwOpcode op, float a, float x) {
  switch (op) {
    case EwOpcode::kExp: return expf(x);
    case EwOpcode::kLog: return logf(x);
    case EwOpcode::kSigmoid: return SigmoidF(x);
    case EwOpcode::kTanh: return tanhf(x);
    case EwOpcode::kPow: return powf(x, a);
    default: return x;
  }
}

GPUPIPE_EW_COLD double ApplyEwTranscendental(EwOpcode op, double a, double x) {
  switch (op) {
    case EwOpcode::kExp: return exp(x);
    case EwOpcode::kLog: return log(x);
    case EwOpcode::kSigmoid: return SigmoidD(x);
    case EwOpcode::kTanh: return tanh(x);
    case EwOpcode::kPow: return pow(x, a);
    default: return x;
  }
}

// Integers have no transcendental opcodes (validation rejects them); identity keeps the
// switch below total.
GPUPIPE_HOST_DEVICE int32_t ApplyEwTranscendental(EwOpcode, int32_t, int32_t x) { return x; }

// ---- per-compute-type primitives ---------------------------------------------------------------

template <typename T>
GPUPIPE_HOST_DEVICE T EwParam(double v);
template <>
GPUPIPE_HOST_DEVICE float EwParam<float>(double v) { return static_cast<float>(v); }
template <>
GPUPIPE_HOST_DEVICE double EwParam<double>(double v) { return v; }
template <>
GPUPIPE_HOST_DEVICE int32_t EwParam<int32_t>(double v) {
  // Saturating: +-inf (and anything beyond the range) becomes the extreme value. Validation
  // only lets integral values in range and infinite clamp bounds through.
  if (!(v > -2147483648.0)) return INT32_MIN;
  if (!(v < 2147483647.0)) return INT32_MAX;
  return static_cast<int32_t>(v);
}

GPUPIPE_HOST_DEVICE float EwFma(float a, float x, float b) { return fmaf(a, x, b); }
GPUPIPE_HOST_DEVICE double EwFma(double a, double x, double b) { return fma(a, x, b); }
// a * x + b modulo 2^32, as NumPy's int32 arithmetic (unsigned, so wrapping is defined).
GPUPIPE_HOST_DEVICE int32_t EwFma(int32_t a, int32_t x, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) * static_cast<uint32_t>(x) +
                              static_cast<uint32_t>(b));
}
GPUPIPE_HOST_DEVICE float EwAbs(float x) { return fabsf(x); }
GPUPIPE_HOST_DEVICE double EwAbs(double x) { return fabs(x); }
// |INT32_MIN| wraps to INT32_MIN, as np.abs.
GPUPIPE_HOST_DEVICE int32_t EwAbs(int32_t x) {
  return x < 0 ? static_cast<int32_t>(0u - static_cast<uint32_t>(x)) : x;
}
GPUPIPE_HOST_DEVICE float EwSqrt(float x) { return sqrtf(x); }
GPUPIPE_HOST_DEVICE double EwSqrt(double x) { return sqrt(x); }
GPUPIPE_HOST_DEVICE int32_t EwSqrt(int32_t x) { return x; }  // not an integer opcode

// The reference semantics of one instruction on one value, in compute type T (float, double
// or int32_t).
template <typename T>
GPUPIPE_HOST_DEVICE T ApplyEwInstr(const EwInstr& in, T x) {
  switch (in.op) {
    case EwOpcode::kAffine:
      return EwFma(EwParam<T>(in.a), x, EwParam<T>(in.b));
    case EwOpcode::kRelu:
      return x < T(0) ? T(0) : x;
    case EwOpcode::kClamp: {
      // np.maximum then np.minimum: a NaN x survives both comparisons; a NaN bound is
      // selected by its own (a != a) test.
      const T a = EwParam<T>(in.a);
      const T b = EwParam<T>(in.b);
      if (x < a || a != a) x = a;
      if (x > b || b != b) x = b;
      return x;
    }
    case EwOpcode::kAbs:
      return EwAbs(x);
    case EwOpcode::kSqrt:
      return EwSqrt(x);
    case EwOpcode::kExp:
    case EwOpcode::kLog:
    case EwOpcode::kSigmoid:
    case EwOpcode::kTanh:
    case EwOpcode::kPow:
      return ApplyEwTranscendental(in.op, EwParam<T>(in.a), x);
  }
  return x;
}

// The reference: the program applied to one value (the CPU backend and the tests use it).
template <typename T>
GPUPIPE_HOST_DEVICE T ApplyEw(const EwProgram& program, T x) {
  for (int i = 0; i < program.count; ++i) x = ApplyEwInstr(program.instrs[i], x);
  return x;
}

// The program applied to N values at once, instruction by instruction: the fetch and dispatch
// of each instruction (block-uniform, so branch-free for the warp) is paid once per N values
// instead of once per value, which is what keeps a long program near memory bandwidth. Each
// value goes through exactly the operations ApplyEw applies, in the same order, so
// ApplyEwN(p, x)[k] == ApplyEw(p, x[k]) bit for bit.
template <typename T, int N>
GPUPIPE_HOST_DEVICE void ApplyEwN(const EwProgram& program, T (&x)[N]) {
  for (int i = 0; i < program.count; ++i) {
    const EwInstr in = program.instrs[i];
    const T a = EwParam<T>(in.a);
    const T b = EwParam<T>(in.b);
    switch (in.op) {
      case EwOpcode::kAffine:
#pragma unroll
        for (int k = 0; k < N; ++k) x[k] = EwFma(a, x[k], b);
        break;
      case EwOpcode::kRelu:
#pragma unroll
        for (int k = 0; k < N; ++k) x[k] = x[k] < T(0) ? T(0) : x[k];
        break;
      case EwOpcode::kAbs:
#pragma unroll
        for (int k = 0; k < N; ++k) x[k] = EwAbs(x[k]);
        break;
      case EwOpcode::kSqrt:
#pragma unroll
        for (int k = 0; k < N; ++k) x[k] = EwSqrt(x[k]);
        break;
      case EwOpcode::kClamp:
#pragma unroll
        for (int k = 0; k < N; ++k) {
          T v = x[k];
          if (v < a || a != a) v = a;
          if (v > b || b != b) v = b;
          x[k] = v;
        }
        break;
      default:
#pragma unroll
        for (int k = 0; k < N; ++k) x[k] = ApplyEwTranscendental(in.op, a, x[k]);
        break;
    }
  }
}

}  // namespace gpupipe::kernels
