// An elementwise program: a short list of elementwise instructions applied in order to each
// element. One program describes a fused run of elementwise ops, so a run of any length is one
// kernel and one pass over memory. It is plain data, passed by value as a kernel parameter,
// and interpreted by the same ApplyEw on the host (CPU reference) and on the device.
//
// Host/device agreement, per opcode (float32):
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

struct EwInstr {
  EwOpcode op = EwOpcode::kAffine;
  float a = 1.0f;
  float b = 0.0f;
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

// 1 / (1 + e^-x) through e = exp(-|x|) <= 1, which never overflows: for x >= 0 it is
// 1 / (1 + e); for x < 0, e / (1 + e), which keeps full relative precision down to the
// denormals where the plain formula would compute 1 / inf. NaN gives NaN (via e).
GPUPIPE_HOST_DEVICE float SigmoidF(float x) {
  const float e = expf(-fabsf(x));
  const float d = 1.0f + e;
  return x >= 0.0f ? 1.0f / d : e / d;
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

// The reference semantics of one instruction on one value.
GPUPIPE_HOST_DEVICE float ApplyEwInstr(const EwInstr& in, float x) {
  switch (in.op) {
    case EwOpcode::kAffine:
      return fmaf(in.a, x, in.b);
    case EwOpcode::kRelu:
      return x < 0.0f ? 0.0f : x;
    case EwOpcode::kClamp:
      // np.maximum then np.minimum: a NaN x survives both comparisons; a NaN bound is
      // selected by its own (a != a) test.
      if (x < in.a || in.a != in.a) x = in.a;
      if (x > in.b || in.b != in.b) x = in.b;
      return x;
    case EwOpcode::kAbs:
      return fabsf(x);
    case EwOpcode::kSqrt:
      return sqrtf(x);
    case EwOpcode::kExp:
    case EwOpcode::kLog:
    case EwOpcode::kSigmoid:
    case EwOpcode::kTanh:
    case EwOpcode::kPow:
      return ApplyEwTranscendental(in.op, in.a, x);
  }
  return x;
}

// The reference: the program applied to one value (the CPU backend and the tests use it).
GPUPIPE_HOST_DEVICE float ApplyEw(const EwProgram& program, float x) {
  for (int i = 0; i < program.count; ++i) x = ApplyEwInstr(program.instrs[i], x);
  return x;
}

// The program applied to N values at once, instruction by instruction: the fetch and dispatch
// of each instruction (block-uniform, so branch-free for the warp) is paid once per N values
// instead of once per value, which is what keeps a long program near memory bandwidth. Each
// value goes through exactly the operations ApplyEw applies, in the same order, so
// ApplyEwN(p, x)[k] == ApplyEw(p, x[k]) bit for bit.
template <int N>
GPUPIPE_HOST_DEVICE void ApplyEwN(const EwProgram& program, float (&x)[N]) {
  for (int i = 0; i < program.count; ++i) {
    const EwInstr in = program.instrs[i];
    switch (in.op) {
      case EwOpcode::kAffine:
#pragma unroll
        for (int k = 0; k < N; ++k) x[k] = fmaf(in.a, x[k], in.b);
        break;
      case EwOpcode::kRelu:
#pragma unroll
        for (int k = 0; k < N; ++k) x[k] = x[k] < 0.0f ? 0.0f : x[k];
        break;
      case EwOpcode::kAbs:
#pragma unroll
        for (int k = 0; k < N; ++k) x[k] = fabsf(x[k]);
        break;
      case EwOpcode::kSqrt:
#pragma unroll
        for (int k = 0; k < N; ++k) x[k] = sqrtf(x[k]);
        break;
      case EwOpcode::kClamp:
#pragma unroll
        for (int k = 0; k < N; ++k) {
          float v = x[k];
          if (v < in.a || in.a != in.a) v = in.a;
          if (v > in.b || in.b != in.b) v = in.b;
          x[k] = v;
        }
        break;
      default:
#pragma unroll
        for (int k = 0; k < N; ++k) x[k] = ApplyEwTranscendental(in.op, in.a, x[k]);
        break;
    }
  }
}

}  // namespace gpupipe::kernels
