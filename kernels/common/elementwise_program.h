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

GPUPIPE_HOST_DEVICE float ApplyEw(const EwProgram& program, float x) {
  for (int i = 0; i < program.count; ++i) {
    const EwInstr& in = program.instrs[i];
    switch (in.op) {
      case EwOpcode::kAffine:
        x = fmaf(in.a, x, in.b);
        break;
      case EwOpcode::kRelu:
        x = x < 0.0f ? 0.0f : x;
        break;
      case EwOpcode::kClamp:
        // np.maximum then np.minimum: a NaN x survives both comparisons; a NaN bound is
        // selected by its own (a != a) test.
        if (x < in.a || in.a != in.a) x = in.a;
        if (x > in.b || in.b != in.b) x = in.b;
        break;
      case EwOpcode::kAbs:
        x = fabsf(x);
        break;
      case EwOpcode::kSqrt:
        x = sqrtf(x);
        break;
      case EwOpcode::kExp:
        x = expf(x);
        break;
      case EwOpcode::kLog:
        x = logf(x);
        break;
      case EwOpcode::kSigmoid:
        x = SigmoidF(x);
        break;
      case EwOpcode::kTanh:
        x = tanhf(x);
        break;
      case EwOpcode::kPow:
        x = powf(x, in.a);
        break;
    }
  }
  return x;
}

}  // namespace gpupipe::kernels
