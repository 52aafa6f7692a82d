// Tuning of RowHistogram (kernels/cuda/histogram.cu): after CUB's DeviceHistogram, privatized
// shared-memory counters and a persistent grid. For sm_90; values only, the figures live in the
// bench/results section the provenance line names.
#pragma once

namespace gpupipe::kernels::cuda::tuning {

// Provenance: bench/results/kernels-h200.md, "Tuning notes: histogram".
struct HistogramPolicy {
  // Threads per block of every histogram kernel (at most one shared-memory sub-histogram a
  // warp).
  static constexpr int kThreads = 512;
  // 16-byte vectors in flight per thread.
  static constexpr int kUnroll = 4;
  // Blocks an SM of the counting kernels (their launch bounds and the persistent grid). The
  // branch-free float paths (kSharedAdjacent, kSharedPow2) need no more than 32 registers, so
  // four blocks are resident (2048 threads, 4 x 48 KiB of shared memory); the other paths take
  // up to 40 registers and three blocks. Two blocks an SM leave too few loads in flight.
  static constexpr int kLeanBlocksPerSm = 4;
  static constexpr int kBlocksPerSm = 3;
  // Grid cap, in blocks an SM, of the kernel that zeroes the counts before a split row's blocks
  // add into them.
  static constexpr int kZeroBlocksPerSm = 4;
};

}  // namespace gpupipe::kernels::cuda::tuning
