// The benchmark's own device code: a queue-ahead spin, the empty kernel of the launch floor,
// a random fill and a float64 check of elementwise programs. Everything else it runs comes
// from the kernels library through the engine's launch path.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/common/elementwise_program.h"

namespace gpupipe::bench {

// One thread that busy-waits `ns` nanoseconds of the GPU's global timer. Enqueued before a
// timed region so that the host has enqueued all of the region's launches before the device
// reaches them: the events then measure device time, not host submission.
cudaError_t LaunchSpin(cudaStream_t stream, uint64_t ns);

// An empty kernel that waits for its predecessor and releases its dependents (the two PDL
// calls every library kernel makes), with the PDL launch attribute when `pdl`.
cudaError_t LaunchEmpty(cudaStream_t stream, dim3 grid, dim3 block, bool pdl);

// d[i] uniform in [-1, 1), never 0, from a counter-based hash of (seed, i).
cudaError_t FillRandom(float* d, int64_t n, uint64_t seed, cudaStream_t stream);

// Host twin of FillRandom's value for (seed, i), for inputs built on the host.
float RandomValue(uint64_t seed, uint64_t i);

// Compares d_out with `program` applied to d_in in float64 on the device. `d_acc` must hold
// three zeroed doubles: sum of (out - ref)^2, sum of ref^2, and the count of positions where
// out is not finite but ref is (unwritten outputs, poisoned with NaN, land there).
cudaError_t CheckElementwise(const float* d_in, const float* d_out, int64_t n,
                             const kernels::EwProgram& program, double* d_acc,
                             cudaStream_t stream);

}  // namespace gpupipe::bench
