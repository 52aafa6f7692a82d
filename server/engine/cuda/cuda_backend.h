// The CUDA backend: owns one GPU. At creation it creates the stream pool (non-blocking streams
// at every level of cudaDeviceGetStreamPriorityRange), and for each lane its device buffers,
// pinned staging buffers and timing events, so running a job allocates nothing.
//
// API priorities map onto device levels: low -> least, normal -> the middle level,
// high -> greatest. A lane is one stream with its buffers; it runs one job at a time.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "server/engine/backend.h"

namespace gpupipe::engine {

struct CudaBackendOptions {
  int device = 0;
  // Lanes (streams with their own buffers) per API priority level.
  int lanes_per_level = 2;
  // Streams created at each device priority level not used by an API level.
  int idle_streams_per_level = 1;
  // Largest input a lane must hold; sizes every lane's buffers.
  int64_t max_input_bytes = int64_t{64} << 20;
  int64_t max_chunk_bytes = (int64_t{1} << 20) - 4096;
  int default_stages = 2;
  // Instantiated CUDA graphs kept per lane (least recently used evicted first).
  int graph_cache_capacity = 32;
};

// Fails with UNAVAILABLE when no usable device exists (no driver, no device, ordinal out of
// range), or with RESOURCE_EXHAUSTED when the buffers do not fit.
absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const CudaBackendOptions& options);

}  // namespace gpupipe::engine
