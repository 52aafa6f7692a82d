// Tuning of cumsum (kernels/cuda/cumsum.cu: warp rows, block rows and the look-back kernel of a
// block a tile; kernels/cuda/cumsum_streamed.cu: the persistent streamed look-back of float32).
// For sm_90; values only, the figures live in the bench/results section each provenance line
// names.
#pragma once

#include <cstdint>

namespace gpupipe::kernels::cuda::tuning {

// Provenance: bench/results/kernels-h200.md, "Tuning notes: cumsum".
struct CumsumPolicy {
  // Warp-rows and block-rows paths: CUB's scan policies' starting point, 256-thread blocks and
  // 16 items a thread (tiles of 4096); not swept.
  static constexpr int kThreads = 256;
  static constexpr int kItems = 16;
  // Items a lane of the warp-rows path (tiles of 256 a warp).
  static constexpr int kWarpItems = 8;
  // Rows up to this many columns: one warp a row.
  static constexpr int64_t kWarpRowsMaxCols = 2048;
  // Longer rows, at least this many an SM: one block a row; fewer: the look-back kernels.
  static constexpr int kBlockRowsMinRowsPerSm = 4;
  // Grid caps, in blocks an SM, of the warp-rows, block-rows and status-reset kernels.
  static constexpr int kWarpRowsBlocksPerSm = 16;
  static constexpr int kBlockRowsBlocksPerSm = 4;
  static constexpr int kInitBlocksPerSm = 4;
  // Look-back kernel (a block a tile): 512-thread blocks of 32 items a thread (tiles of 16384)
  // for 4-byte accumulators, 16 (tiles of 8192) for 8-byte ones, which would otherwise need
  // over 128 registers. The tile is the largest such a block holds in registers at
  // kLookbackMinBlocksPerSm: every tile costs one look-back and one status record, so longer
  // tiles spend less of the scan on them.
  static constexpr int kLookbackThreads = 512;
  static constexpr int kLookbackItemsNarrow = 32;
  static constexpr int kLookbackItemsWide = 16;
  // Two look-back blocks an SM (64 registers a thread): while one block's warp 0 looks back,
  // the other block loads and scans. Without the cap ptxas gives the 8-byte accumulators more
  // than 64 registers and one block an SM; with it, and warp 0's items parked in shared memory
  // during the look-back, int32 spills nothing and float64 little.
  static constexpr int kLookbackMinBlocksPerSm = 2;
  // Look-back backoff of both look-back kernels while predecessors run: __nanosleep from the
  // first, doubling up to the second, so that waiting warps leave issue slots and L2 bandwidth
  // to the tiles they wait for.
  static constexpr unsigned kSpinMinNs = 8;
  static constexpr unsigned kSpinMaxNs = 256;
};

// Provenance: bench/results/kernels-h200.md, "Tuning notes: cumsum".
struct StreamedScanPolicy {
  // Compute warps a block (plus one producer and one look-back warp: 320 threads, one block an
  // SM), and a compute thread's items a tile: tiles of kTile (tiles half as long would double
  // the look-backs an element).
  static constexpr int kComputeWarps = 8;
  static constexpr int kItems = 32;
  static constexpr int64_t kTile = int64_t{kComputeWarps} * 32 * kItems;
  // Shared-memory tiles in a block's ring: two keep the next tile's copy in flight while the
  // current one scans. A deeper ring spreads a block's tiles further apart in the counter's
  // order, so each look-back reads further back and waits for tiles still queued in other
  // blocks' rings. The slot count is a launch parameter, up to kMaxSlots (the header's arrays).
  static constexpr int kSlots = 2;
  static constexpr int kMaxSlots = 6;
  // Look-back windows of 32 tiles read in one round. A look-back reads back to the block's own
  // previous tile, about kSlots grids of tiles; 16 windows (512 tiles) cover that on a
  // 132-SM device in one round, where 8 (256 tiles, against 264) need a second round, and more
  // windows add loads to every round.
  static constexpr int kWindows = 16;
  // Tiles a compute warp scans before it stores a scanned tile, whose prefix the look-back warp
  // finds meanwhile. With one, a warp would wait for the prefix of the tile it scanned just
  // before, whose look-back has had only one tile's scan to finish; a third scanned tile in
  // registers spills at the registers a 320-thread block gets at one block an SM.
  static constexpr int kLag = 2;
  // Mailboxes between the compute warps and the look-back warp: more than kLag, so that a
  // mailbox is always free by the time the compute warps mail a tile into it (the barrier notes
  // of cumsum_streamed.cu).
  static constexpr int kMailboxes = 4;
};

}  // namespace gpupipe::kernels::cuda::tuning
