// Start-up warm-up of the CUDA backend: launches every kernel family once on every lane and
// waits, so that module loading and other first-launch costs are paid at start and never by a
// job.
#pragma once

#include "absl/status/status.h"
#include "server/engine/backends/cuda/lane_pool.h"

namespace gpupipe::engine {

// Every staging strategy of every element type's elementwise, reduce, argmax, normalize and
// softmax kernels, on zeros in each lane's first slot; `stages` and `multiprocessors` as jobs
// launch them.
absl::Status WarmUpLanes(LanePool& pool, int stages, int multiprocessors);

}  // namespace gpupipe::engine
