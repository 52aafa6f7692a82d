// The CUDA backend: owns one GPU. At creation it maps the API priorities onto the levels of
// cudaDeviceGetStreamPriorityRange (low -> least, normal -> the middle level, high ->
// greatest), creates the lanes and their memory (a LanePool, lane_pool.h: streams, events, one
// device arena and one pinned block, so running a job allocates nothing) and warms every kernel
// family up. Each lane's per-chunk verbs are a CudaLane (cuda_lane.h), driven by the engine's
// chunk pipeline. Input rings (the engine's streamed uploads) are page-locked
// (AllocateInputMemory), so their chunks are copied to the device straight from them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/engine/backends/backend.h"

namespace gpupipe::engine {

// How the daemon's threads wait for the GPU (cudaSetDeviceFlags' schedule). kAuto leaves CUDA's
// own choice: spin unless the process has more active contexts than the host has cores, then
// yield. kSpin polls, the quickest to notice a job's end, holding a core meanwhile; kYield polls
// and gives the core to other threads between polls; kBlock sleeps until the device
// interrupts, the least CPU and the slowest to wake.
enum class CudaWait { kAuto, kSpin, kYield, kBlock };

struct CudaBackendOptions {
  int device = 0;
  CudaWait wait = CudaWait::kAuto;
  // Lanes (streams with their own buffers) per API priority level.
  int lanes_per_level = 2;
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
  // Threads that help copy a pageable chunk input into pinned staging (one thread's memcpy is
  // slower than the PCIe DMA it feeds); shared by every lane.
  int host_copy_threads = 4;
  // Those copies with non-temporal stores (StreamingCopy) instead of memcpy, for the engine
  // benchmark's comparison: the pipeline stages a chunk one ahead, so memcpy's lines have left
  // the CPU's caches by the time the DMA reads them, and memcpy is the faster copy
  // (bench/results/engine-h200.md, overlap).
  bool streaming_host_copies = false;
  int default_stages = 2;
  // The largest one-chunk job, in bytes of input and of output each, that runs with no copies:
  // its kernels read the staged input from the lane's pinned buffer and write the result to
  // the slot's pinned buffer, both mapped into the device's address space, which takes less
  // than the fixed latency of a copy each way at these sizes (CudaLane). Pipelines of
  // elementwise, reduction, argmax, softmax and normalize steps only, with auto staging
  // (RunsOnMappedHostMemory); 0: every job copies, and the pinned buffers are not mapped. The
  // value is chosen by bench/service/mapped_io.sh (bench/results/service-h200.md, "Small jobs
  // without copies").
  int64_t mapped_io_max_bytes = int64_t{64} << 10;
  // Instantiated CUDA graphs kept per lane (least recently used evicted first).
  int graph_cache_capacity = 32;
  // Test builds only (GPUPIPE_FAULT_INJECTION; CreateCudaBackend refuses it elsewhere): the
  // job numbered `inject_fault_at_job` (counting every lane's jobs from 1) launches the fault
  // `inject_fault` ("sticky" or "launch", fault_injection.h) before its first chunk.
  std::string inject_fault;
  int64_t inject_fault_at_job = 0;
};

// Fails with UNAVAILABLE when no usable device exists (no driver, no device, ordinal out of
// range), or with RESOURCE_EXHAUSTED when the buffers do not fit.
absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const CudaBackendOptions& options);

}  // namespace gpupipe::engine
