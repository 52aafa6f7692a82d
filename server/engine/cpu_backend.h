// The CPU backend: runs plans with the reference ops of kernels/cpu. It is the service's
// fallback where no GPU is usable and the semantics every GPU result is checked against.
#pragma once

#include <memory>

#include "server/engine/backend.h"

namespace gpupipe::engine {

struct CpuBackendOptions {
  int lanes_per_level = 1;
  int64_t max_chunk_bytes = (int64_t{1} << 20) - 4096;
};

std::unique_ptr<Backend> CreateCpuBackend(const CpuBackendOptions& options);

}  // namespace gpupipe::engine
