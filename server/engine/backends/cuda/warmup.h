// Start-up warm-up of the CUDA backend: launches every kernel family once on every lane and
// waits, so that module loading and other first-launch costs are paid at start and never by a
// job.
#pragma once

#include "absl/status/status.h"
#include "kernels/cuda/device_caps.h"
#include "server/engine/backends/cuda/lane_pool.h"

namespace gpupipe::engine {

// Every staging strategy the device runs (`caps`) of every element type's elementwise,
// reduce, argmax, normalize and softmax kernels, on zeros in each lane's first slot; `stages`
// as jobs launch them.
absl::Status WarmUpLanes(LanePool& pool, int stages, const kernels::cuda::DeviceCaps& caps);

}  // namespace gpupipe::engine
