// The CPU backend: runs plans with the reference ops of kernels/cpu. It is the service's
// fallback where no GPU is usable and the semantics every GPU result is checked against.
#pragma once

#include <memory>

#include "server/engine/backends/backend.h"

namespace gpupipe::engine {

struct CpuBackendOptions {
  int lanes_per_level = 1;
  // Input bytes per chunk when a job does not ask (JobSpec::chunk_bytes): jobs run chunk by
  // chunk exactly as on the CUDA backend (see chunk_plan.h), so chunk invariance is tested here.
  int64_t chunk_bytes = int64_t{16} << 20;
  // What a chunk's largest tensor may hold (a row op's row must fit unless it can be split);
  // the CUDA backend's is its lane buffers. Bounded, so that a lane's working memory (a few
  // chunk-sized buffers) follows the configuration, never the job.
  int64_t chunk_capacity_bytes = int64_t{64} << 20;
};

std::unique_ptr<Backend> CreateCpuBackend(const CpuBackendOptions& options);

}  // namespace gpupipe::engine
