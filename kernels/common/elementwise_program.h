// An elementwise program: a short list of elementwise instructions applied in order to each
// element. One program describes a fused run of elementwise ops, so a run of any length is one
// kernel and one pass over memory. It is plain data, passed by value as a kernel parameter,
// and interpreted identically on the host (CPU reference) and on the device, which is what
// makes elementwise results bit-identical between backends.
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
  kAffine = 0,  // x = fma(a, x, b), rounded once
  kRelu = 1,    // x = x < 0 ? 0 : x (NaN stays NaN, as np.maximum)
};

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
    }
  }
  return x;
}

}  // namespace gpupipe::kernels
