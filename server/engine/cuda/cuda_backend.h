// The CUDA backend: owns one GPU. At creation it creates the stream pool (non-blocking streams
// at every level of cudaDeviceGetStreamPriorityRange), one device arena (cudaMalloc once) that
// holds every lane's chunk buffers and workspace, one pinned host block for every lane's
// staging buffers, and the lanes' events, so running a job allocates nothing.
//
// API priorities map onto device levels: low -> least, normal -> the middle level,
// high -> greatest. A lane is a compute stream plus two copy streams (host-to-device and
// device-to-host, at the lane's priority) with three chunk slots and four pinned input
// buffers (the host copy of a chunk's input is a pipeline stage of its own); it runs one job
// at a time.
// A job runs in chunks (chunk_plan.h) through the slots: the copy in of chunk k+1 overlaps the
// kernels of chunk k and the copy out of chunk k-1, ordered across streams by events created
// with cudaEventDisableTiming and cudaStreamWaitEvent.
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
  // Largest input accepted (the engine's limit); no longer sizes buffers: jobs larger than a
  // lane's chunk slots run in chunks.
  int64_t max_input_bytes = int64_t{64} << 20;
  // Budget of the device arena: bytes when > 0, else this fraction of the device's memory.
  // The arena is what the lanes need for `chunk_bytes` slots, or the budget where that is less
  // (slots then shrink to fit).
  double device_memory_fraction = 0.25;
  int64_t device_memory_bytes = 0;
  // Input bytes per chunk slot: the default chunk of a job and the most a job may ask for.
  int64_t chunk_bytes = int64_t{16} << 20;
  // False runs the copies on the compute stream (no overlap), for the engine benchmark's
  // baseline.
  bool copy_streams = true;
  // Threads that help copy a chunk's input into pinned staging (one thread's memcpy is slower
  // than the PCIe DMA it feeds); shared by every lane.
  int host_copy_threads = 4;
  // Pinned host memory allocated at start for job inputs (Backend::NewInput, used by the Run
  // RPC): chunks of such an input are copied to the device straight from it, with no staging
  // copy. An input that finds no room falls back to pageable memory and pinned staging.
  // 0: none.
  int64_t pinned_input_bytes = 0;
  // Largest chunk of a low-priority job (0: no cap), so that a high-priority job waits behind
  // at most one short copy and one small grid per busy lane; not applied where it would split
  // rows that the job's own chunking keeps whole. 512 KiB: a DMA of about 10 us on PCIe 5 and
  // 128 blocks of an elementwise kernel (bench/engine, target c).
  int64_t low_priority_chunk_bytes = int64_t{512} << 10;
  // Strict priority at chunk boundaries: while a job of a higher priority runs, a job holds its
  // next chunk back for at most this long (then enqueues it and asks again for the one after),
  // so higher-priority work slows it without starving it. 0: no holding.
  int64_t max_priority_hold_us = 20000;
  int64_t max_chunk_bytes = (int64_t{1} << 20) - 4096;
  int default_stages = 2;
  // Instantiated CUDA graphs kept per lane (least recently used evicted first).
  int graph_cache_capacity = 32;
};

// Fails with UNAVAILABLE when no usable device exists (no driver, no device, ordinal out of
// range), or with RESOURCE_EXHAUSTED when the buffers do not fit.
absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const CudaBackendOptions& options);

}  // namespace gpupipe::engine
