// Tuning of the elementwise kernels (kernels/cuda/elementwise.cu), for sm_90. Values only: the
// kernels and their dispatch read them; what a value was measured against lives in the
// bench/results section the provenance line names.
#pragma once

namespace gpupipe::kernels::cuda::tuning {

// Provenance: bench/results/kernels-h200.md, "Tuning notes: elementwise".
struct ElementwisePolicy {
  // Threads per block of every elementwise kernel (at most 256: every stage count then keeps at
  // least one staged vector per thread within the staging budget).
  static constexpr int kThreads = 256;
  // 16-byte vectors per program dispatch in the staged consumer: a rank's vectors of a tile are
  // taken in groups of this many, then one at a time, so the interpreter's dispatch is paid once
  // per group while the group's values stay in registers.
  static constexpr int kStagedGroup = 4;
  // Persistent-grid size of the staged strategies, in blocks an SM; each block streams its
  // share of the tiles through its `stages` buffers.
  static constexpr int kStagedBlocksPerSm = 4;
  // Independent 16-byte loads in flight per thread in the direct path; the program runs over
  // all of their values at once.
  static constexpr int kDirectUnroll = 4;
};

}  // namespace gpupipe::kernels::cuda::tuning
