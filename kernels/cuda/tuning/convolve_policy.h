// Tuning of RowConvolve (kernels/cuda/convolve.cu: the general tile kernel, every tap count and
// float16; kernels/cuda/convolve_short.cu: the short-tap kernel of float32 and float64): which
// kernel a tap count takes, and each kernel's tile shape per type. For sm_90; values only, the
// figures live in the bench/results section the provenance line names.
#pragma once

namespace gpupipe::kernels::cuda::tuning {

// Provenance: bench/results/kernels-h200.md, "Tuning notes: convolve".
struct ConvolvePolicy {
  // Tap counts the short-tap kernel takes (float32, float64); longer ones, and float16, use the
  // general tile kernel. The short kernel's taps sit in the kernel parameters in correlation
  // order, so every FFMA reads its tap as a constant operand (no shared-memory loads or
  // registers for taps), and its tiles' input arrives by cp.async (with the resident grid
  // below, into a second buffer while the block computes the first): at a few dozen taps the
  // work is FMA issue, so the instructions saved around the FMAs are what counts. Its loops
  // unroll over the whole tap range, which keeps the range short. float16 stays on the
  // general kernel: its staged copy is converted to float32, which a cp.async copy cannot do.
  static constexpr int kShortMaxTaps = 64;

  // The general tile kernel's tile per compute type Acc: threads a block, consecutive outputs a
  // thread (R) and blocks an SM (the grid: all resident at once, which __launch_bounds__
  // guarantees; each block loops over tiles with the next tile's loads in flight). 128 threads
  // of 16 outputs make a tap block 256 FMAs per 8 shared loads; with the padded shared layout
  // the kernel is bound by FMA issue, not by bank conflicts, and the next tile's loads overlap
  // the current tile's FMAs. Doubles take 8 outputs a thread to fit the register budget (their
  // FMA rate is half, so the load share matters less). A 63-tap halo adds 62 inputs to a tile
  // of 2048 (float) or 1024 (double) outputs. Blocks an SM follow from the register budget.
  template <typename Acc>
  struct Tile;

  // The short-tap kernel's tile per type T, on the same terms; which tap counts take its
  // lead-first arrangement (detail::TapArrangement): those whose blocks of kPerThread taps
  // miss a number of taps ("lead", 1 to kPerThread - 1) whose bit is set in kLeadFirstLeads.
  // Which arrangement costs fewer instructions around the FMAs depends on how ptxas lays out
  // the guarded taps and the jump, not monotonically on the lead, so the set is measured
  // lead by lead; and its grid: up to
  // kTileGridMaxTaps taps a block a tile, so that the hardware hands tiles to SMs as blocks
  // finish and a block's copies are in flight while the other blocks of its SM compute; with
  // more taps, where a tile's FMAs take long enough to cover the next tile's copy, the resident
  // grid, whose blocks prefetch their next tile while computing the current one.
  template <typename T>
  struct ShortTile;
};

template <>
struct ConvolvePolicy::Tile<float> {
  static constexpr int kThreads = 128;
  static constexpr int kPerThread = 16;
  static constexpr int kBlocksPerSm = 5;  // resident blocks: <= 102 registers a thread
};
template <>
struct ConvolvePolicy::Tile<double> {
  static constexpr int kThreads = 128;
  static constexpr int kPerThread = 8;
  static constexpr int kBlocksPerSm = 4;  // <= 128 registers
};

template <>
struct ConvolvePolicy::ShortTile<float> {
  static constexpr int kThreads = 128;
  static constexpr int kPerThread = 16;
  static constexpr int kBlocksPerSm = 7;  // <= 73 registers; 31 KiB of shared memory a block
  static constexpr int kTileGridMaxTaps = 32;
  // Leads 1 and 8 to 14.
  static constexpr unsigned kLeadFirstLeads = 0x7f02u;
};
template <>
struct ConvolvePolicy::ShortTile<double> {
  static constexpr int kThreads = 128;
  static constexpr int kPerThread = 8;
  static constexpr int kBlocksPerSm = 6;  // <= 85 registers
  static constexpr int kTileGridMaxTaps = kShortMaxTaps;  // every tap count
  // Leads 1 and 4 to 7 (measured at 33 to 64 taps; counts up to 32 take the same set).
  static constexpr unsigned kLeadFirstLeads = 0xf2u;
};

}  // namespace gpupipe::kernels::cuda::tuning
