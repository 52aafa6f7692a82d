// How a job runs in chunks: the backend-independent part of the overlapped pipeline (copy a
// chunk in, run the plan on it, copy its result out), shared by the CUDA and CPU backends so
// chunk invariance can be tested without a GPU.
//
// Three layouts:
//  - kRows: each chunk is a whole number of *units*, where a unit is the input elements one row
//    of the plan's outermost row op covers (the row op with the fewest rows: row ops work along
//    trailing dimensions, so every step's row count is a multiple of its; 1 element for purely
//    elementwise plans). Each step of the chunk's plan is the job's step with its rows (or
//    elements) scaled by the chunk's share of the units, and the chunk's output is a contiguous
//    slice of the job's output, so it is emitted as soon as it is on the host.
//  - kSplitRow: a single reduction or argmax step (elementwise prologue included) whose rows
//    do not fit in a chunk. Each chunk is one piece of one row; the piece's reduction is a
//    partial result that SplitRowCombiner merges on the host; a row's result is emitted once
//    its last piece is in.
//  - kSplitRowResize: a cumsum, histogram, convolve or topk step (after at most one
//    elementwise step, which each piece runs first) whose rows do not fit in a chunk. Each
//    chunk is one piece of one row, run in order on one lane:
//     - cumsum: pieces of the input in order with the kernel's carry (one accumulator, kept in
//       the lane's state, zeroed for piece 0); each piece's output is final, at out_offset;
//     - histogram: pieces with accumulate=true into counts kept in the lane's state (not in a
//       slot), which the row's last piece copies into its result; only that piece has one;
//     - convolve: pieces of the row's output (full-convolution indices, `window`), each
//       reading the input window its outputs need (its halo: up to taps - 1 elements before
//       them); each piece's output is final, at out_offset;
//     - topk: each piece's top min(k, piece) values (pieces hold at least k values but the
//       last), merged on the host into the row's top k (SplitRowResizeMerger).
// Softmax, l2normalize and standardize need a whole row on the device (their second pass
// reads the row again), as do plans with steps after a cumsum .. topk; a row of theirs larger
// than a lane's buffers is RESOURCE_EXHAUSTED, naming the limit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/common/convolve_geometry.h"
#include "server/engine/planning/plan.h"
#include "server/engine/job/types.h"

namespace gpupipe::engine {

struct ChunkLayout {
  enum class Mode { kRows, kSplitRow, kSplitRowResize };
  Mode mode = Mode::kRows;
  int64_t unit_elements = 1;     // input elements per unit (row of the outermost row op)
  int64_t unit_bytes = 0;        // device bytes a unit needs (its largest tensor, any step)
  int64_t units = 0;             // units in the job
  int64_t units_per_chunk = 1;   // kRows
  // kSplitRow, kSplitRowResize: input elements per piece (the last one shorter); convolve:
  // output elements per piece.
  int64_t piece_elements = 0;
  int64_t pieces_per_unit = 0;   // kSplitRow, kSplitRowResize
  int64_t unit_out_elements = 0; // kSplitRowResize: output elements of one row
  int64_t chunk_count = 0;
  int64_t in_itemsize = 4;       // bytes of one input element
  int64_t out_itemsize = 4;      // bytes of one output element
};

// One chunk of a layout: which input elements it reads, and where its result goes.
struct Chunk {
  int64_t index = 0;
  int64_t in_offset = 0;    // first input element
  int64_t in_elements = 0;
  // kRows: output elements [out_offset, out_offset + out_elements) of the job's output.
  // kSplitRow: the row (unit) this piece belongs to, in out_offset; out_elements = 1 partial.
  // kSplitRowResize: out_elements of the output dtype are the piece's result (copied to the
  // host); cumsum and convolve: they belong at out_offset; histogram: the row's counts, at the
  // last piece only (0 before), at out_offset; topk: the piece's top values, candidates for
  // the row's top k at out_offset.
  int64_t out_offset = 0;
  int64_t out_elements = 0;
  int64_t piece = 0;        // kSplitRow: piece index within the row
  bool last_piece = false;  // kSplitRow*: the row's result is complete after this chunk
  int64_t row = 0;          // kSplitRow*: the row (unit)
  kernels::ConvolveWindow window;  // kSplitRowResize of convolve: the piece's outputs and input
  Plan plan;                // the plan over this chunk's elements
};

// Plans the chunks of `plan` for chunks of about `chunk_bytes` input bytes (a request), on a
// backend whose buffers hold `capacity_bytes` for a chunk's largest tensor (input,
// intermediate or output). kRows chunks hold at least one unit when it fits the capacity, so a
// small request still runs a normalization one row at a time; a reduction over rows larger than
// the request is split inside the row. RESOURCE_EXHAUSTED when a unit exceeds the capacity and
// the plan cannot be split inside a row.
absl::StatusOr<ChunkLayout> MakeChunkLayout(const JobSpec& spec, const Plan& plan,
                                            int64_t chunk_bytes, int64_t capacity_bytes);

// Chunk `index` (0 <= index < layout.chunk_count) of `plan`.
Chunk ChunkAt(const Plan& plan, const ChunkLayout& layout, int64_t index);
// The same chunk's offsets, sizes, piece and window only, with an empty plan: what the input
// rings ask for every chunk, without copying the job's plan.
Chunk ChunkSpan(const Plan& plan, const ChunkLayout& layout, int64_t index);

// Whether a plan may run kSplitRow: one reduction or argmax step.
bool CanSplitRow(const Plan& plan);

// Whether a plan may run kSplitRowResize: a cumsum, histogram, convolve or topk step, alone or
// after one elementwise step.
bool CanSplitRowResize(const Plan& plan);

// Merges the per-piece partial results of kSplitRow chunks into each row's result, as the
// reference defines the op. Partials come in the step's output dtype (what the piece's kernel
// writes): float32, float64 or float16 for float reductions, int64 for sums of int32, int32
// for int32 min and max, an int64 column for argmax.
//  - float sum and mean add the partial sums in long double and round once to the output type
//    (mean divides by the row length first); norm2 is sqrt of the sum of the squared partial
//    norms. float16 partials were already rounded to float16 by their piece, so a split float16
//    row is within float16's reduction tolerance of the reference, not bit-identical (and a
//    piece whose partial sum exceeds float16's range gives inf);
//  - float min and max propagate NaN; int32 min and max are exact;
//  - int32 sums add the int64 partials modulo 2^64, as the reference's int64 accumulator, so
//    they are exact;
//  - argmax keeps the first maximum (a NaN wins, the first NaN first) across pieces, comparing
//    ApplyEw(prologue, x) of each piece's winner in the compute type (float32 for float16,
//    double for float64, int32 for int32): exact.
//
// Thread safety: none; one job's runner uses it.
class SplitRowCombiner {
 public:
  SplitRowCombiner(const Plan& plan, const ChunkLayout& layout);

  // Adds `chunk`'s partial: `partial` points to its one output value (see above); `input` is
  // the chunk's own input bytes (chunk.in_elements of the step's input dtype, for argmax
  // values).
  void Add(const Chunk& chunk, const void* partial, const void* input);
  // The row's result in the output dtype's bytes, after its last piece was added.
  std::string Finish(const Chunk& chunk);

 private:
  const PlanStep& step_;
  int64_t cols_;
  long double acc_ = 0;    // float sums
  uint64_t iacc_ = 0;      // int32 sums, modulo 2^64
  double extreme_ = 0;     // float min/max, argmax's best value
  int32_t iextreme_ = 0;   // int32 min/max
  bool seen_ = false;
  bool nan_ = false;
  int64_t best_index_ = 0;
};

// The reduction a kSplitRow piece computes (mean pieces are sums; the row's mean divides).
kernels::RowReduceKind PartialReduceKind(kernels::RowReduceKind kind);

}  // namespace gpupipe::engine
