#include "bench/planner/bench_kernels.h"

#include <cuda_runtime.h>

namespace gpupipe::bench {
namespace {

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

__global__ void EmptyKernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
  cudaTriggerProgrammaticLaunchCompletion();
#endif
}

__host__ __device__ __forceinline__ uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

__host__ __device__ __forceinline__ float HashToValue(uint64_t seed, uint64_t i) {
  const uint64_t h = SplitMix64(seed * 0x2545F4914F6CDD1Dull + i);
  const float u = static_cast<float>(h >> 40) * (1.0f / 16777216.0f);  // [0, 1), 24 bits
  const float x = 2.0f * u - 1.0f;
  return x == 0.0f ? 0.5f : x;  // never zero: zeros hide unwritten outputs
}

__global__ void FillKernel(float* d, int64_t n, uint64_t seed) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    d[i] = HashToValue(seed, static_cast<uint64_t>(i));
  }
}

// Float64 evaluation of the opcodes the benchmark uses; any other opcode falls back to the
// float interpreter for that one instruction.
__device__ double ApplyEwDouble(const kernels::EwProgram& p, double x) {
  for (int i = 0; i < p.count; ++i) {
    const kernels::EwInstr& in = p.instrs[i];
    switch (in.op) {
      case kernels::EwOpcode::kAffine: x = static_cast<double>(in.a) * x + in.b; break;
      case kernels::EwOpcode::kRelu: x = x < 0.0 ? 0.0 : x; break;
      case kernels::EwOpcode::kSqrt: x = sqrt(x); break;
      default: {
        kernels::EwProgram one;
        one.count = 1;
        one.instrs[0] = in;
        x = kernels::ApplyEw(one, static_cast<float>(x));
      }
    }
  }
  return x;
}

__global__ void CheckKernel(const float* __restrict__ in, const float* __restrict__ out, int64_t n,
                            kernels::EwProgram program, double* acc) {
  double err2 = 0, ref2 = 0;
  unsigned long long bad = 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double ref = ApplyEwDouble(program, in[i]);
    const double y = out[i];
    if (isfinite(ref) && !isfinite(y)) {
      ++bad;
      continue;
    }
    err2 += (y - ref) * (y - ref);
    ref2 += ref * ref;
  }
  for (int o = 16; o > 0; o /= 2) {
    err2 += __shfl_down_sync(0xffffffffu, err2, o);
    ref2 += __shfl_down_sync(0xffffffffu, ref2, o);
    bad += __shfl_down_sync(0xffffffffu, bad, o);
  }
  if (threadIdx.x % 32 == 0) {
    atomicAdd(&acc[0], err2);
    atomicAdd(&acc[1], ref2);
    atomicAdd(reinterpret_cast<unsigned long long*>(&acc[2]), bad);
  }
}

}  // namespace

cudaError_t LaunchSpin(cudaStream_t stream, uint64_t ns) {
  SpinKernel<<<1, 1, 0, stream>>>(ns);
  return cudaGetLastError();
}

cudaError_t LaunchEmpty(cudaStream_t stream, dim3 grid, dim3 block, bool pdl) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t launch = {};
  launch.gridDim = grid;
  launch.blockDim = block;
  launch.stream = stream;
  launch.attrs = pdl ? attr : nullptr;
  launch.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelEx(&launch, EmptyKernel);
}

cudaError_t FillRandom(float* d, int64_t n, uint64_t seed, cudaStream_t stream) {
  FillKernel<<<132 * 8, 256, 0, stream>>>(d, n, seed);
  return cudaGetLastError();
}

float RandomValue(uint64_t seed, uint64_t i) { return HashToValue(seed, i); }

cudaError_t CheckElementwise(const float* d_in, const float* d_out, int64_t n,
                             const kernels::EwProgram& program, double* d_acc,
                             cudaStream_t stream) {
  // d_acc[2] is used as an unsigned 64-bit counter; the host reads it back as such.
  CheckKernel<<<132 * 4, 256, 0, stream>>>(d_in, d_out, n, program, d_acc);
  return cudaGetLastError();
}

}  // namespace gpupipe::bench
