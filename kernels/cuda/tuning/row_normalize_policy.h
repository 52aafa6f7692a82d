// Tuning of the row normalizations (RowSoftmax, RowNormalize: l2normalize and standardize) beyond
// the shared row plan: the single-pass paths that read a row once (register-resident rows,
// detail/row_resident.cuh; wide rows, detail/row_wide.cuh; shared-memory rows,
// detail/row_smem.cuh), the two-kernel path's prefetch, and what only softmax uses. For sm_90;
// values only, the figures live in the bench/results section each provenance line names.
#pragma once

#include <cstdint>

namespace gpupipe::kernels::cuda::tuning {

// Provenance: bench/results/kernels-h200.md, "Tuning notes: row normalizations".
struct RowNormalizePolicy {
  // Elements a thread of a register-resident row holds: the block path keeps rows of up to
  // RowPlanPolicy::kThreads times this many columns in registers.
  static constexpr int kResidentPerThread = 32;
  // Block rows up to RowPlanPolicy::kThreads times this many columns use a shorter array, a
  // block a row: a warp a row holding 32 values a lane would give 1024 rows of 1024 only 128
  // blocks, under one an SM, where a block a row gives 1024.
  static constexpr int kResidentMidPerThread = 8;
  // Group rows of at most this many elements a lane use a short register array (cols <= 128
  // with the group sizing of PlanRows), so tiny rows do not pay for kResidentPerThread.
  static constexpr int kResidentShortPerThread = 4;
  // Wide rows: a block of kWideThreads a row, each thread holding kWidePerThread compute values
  // of it as 16-byte vectors. 512 x 32 covers a row of 16384 4-byte values (64 KiB), the
  // longest row the path takes. Two blocks an SM (__launch_bounds__ holds the kernels to the 64
  // registers a thread that allows) keep one block's loads in flight while the other reduces
  // and writes. The grid gives every row a block (RowPlanPolicy::kSegmentGridMaxWaves waves of
  // the capped row grid), so the hardware hands rows to SMs as blocks finish; a persistent
  // grid of two blocks an SM that copies each block's next row into shared memory while it
  // reduces the current one keeps DRAM less busy.
  static constexpr int kWideThreads = 512;
  static constexpr int kWidePerThread = 32;
  static constexpr int kWideBlocksPerSm = 2;
  // Shared-memory rows: 512 threads with 64 KiB rows (16384 float32) give 3 blocks (1536
  // threads, 192 KiB of an sm_90 SM's 228 KiB of shared memory) an SM; __launch_bounds__ asks
  // for that occupancy, so the load loop keeps kSmemUnroll 16-byte loads a thread in flight
  // without spilling (3 x 512 x 4 x 16 B = 96 KiB in flight an SM).
  static constexpr int kSmemThreads = 512;
  static constexpr int kSmemMinBlocksPerSm = 3;
  static constexpr int kSmemUnroll = 4;
  // Largest row, in bytes of the compute type, held in shared memory: 192 KiB is 48K float32 or
  // float16 (held as float32) and 24K float64 columns, below the 227 KiB per-block opt-in limit
  // of sm_90. Rows this long run one block an SM; longer rows take the two-kernel path.
  static constexpr int64_t kSmemMaxRowBytes = int64_t{192} << 10;
  // Bytes of its first segment each normalization block of the two-kernel path asks L2 for
  // before its grid dependency wait (8192 floats); not swept on its own.
  static constexpr int64_t kPrefetchBytes = 32768;
};

// Provenance: bench/results/kernels-h200.md, "Tuning notes: row normalizations".
struct RowSoftmaxPolicy {
  // Block-per-row rows of at most kNarrowThreads * RowNormalizePolicy::kResidentMidPerThread
  // columns run with blocks of this many threads: each thread then holds kResidentMidPerThread
  // values (8 loads in flight, one program dispatch per 8 values) instead of half of them idle,
  // and twice the blocks fit an SM.
  static constexpr int kNarrowThreads = 128;
  // Few long rows split into segments of RowPlanPolicy::kThreads times this many columns, each
  // held in registers by its block: the statistics are then an exact max and a sum of
  // exp(x - max) (no online rescaling per element), and the normalization loads its segment
  // before it waits on the statistics. 16 gives one row of 2^20 256 segments of 4096, about two
  // blocks an SM for each of the two kernels, so both kernels' blocks fit on an SM at once.
  static constexpr int kSegmentPerThread = 16;
};

}  // namespace gpupipe::kernels::cuda::tuning
