#include "server/engine/planning/chunk_plan.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/float16.h"
#include "server/engine/planning/kernel_types.h"

namespace gpupipe::engine {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

const char* RowOpName(const Plan& plan) {
  for (const PlanStep& s : plan.steps) {
    if (s.kind == StepKind::kRowSoftmax || s.kind == StepKind::kRowNormalize) return s.ops.c_str();
  }
  return plan.steps.empty() ? "" : plan.steps.front().ops.c_str();
}

// Bytes a piece's steps need per input element (its largest tensor per element: inputs, and
// the outputs of cumsum and convolve, which grow with the piece).
int64_t PieceBytesPerElement(const Plan& plan) {
  int64_t bytes = 1;
  for (const PlanStep& step : plan.steps) {
    bytes = std::max(bytes, step.input_itemsize());
    if (step.kind == StepKind::kElementwise || step.kind == StepKind::kRowCumsum ||
        step.kind == StepKind::kRowConvolve) {
      bytes = std::max(bytes, step.output_itemsize());
    }
  }
  return bytes;
}

// The largest tensor a (piece's) plan reads or writes, in bytes.
int64_t PlanMaxBytes(const Plan& plan) {
  int64_t bytes = 8;
  for (const PlanStep& step : plan.steps) {
    bytes = std::max({bytes, step.input_elements() * step.input_itemsize(),
                      step.output_elements() * step.output_itemsize()});
  }
  return bytes;
}

// The full-convolution output range of one row of a convolve step.
void ConvolveRange(const PlanStep& step, int64_t* begin, int64_t* count) {
  kernels::ConvolveOutputRange(step.cols, static_cast<int64_t>(step.op.taps.size()),
                               ToKernelConvolveMode(step.op.mode), begin, count);
}

}  // namespace

bool CanSplitRow(const Plan& plan) {
  return plan.steps.size() == 1 && plan.steps[0].reduces();
}

bool CanSplitRowResize(const Plan& plan) {
  const size_t n = plan.steps.size();
  return (n == 1 || (n == 2 && plan.steps[0].kind == StepKind::kElementwise)) &&
         plan.steps.back().resizes();
}

kernels::RowReduceKind PartialReduceKind(kernels::RowReduceKind kind) {
  return kind == kernels::RowReduceKind::kMean ? kernels::RowReduceKind::kSum : kind;
}

namespace {

// kSplitRowResize: pieces of about `chunk_bytes` (see chunk_plan.h), each within the capacity.
absl::StatusOr<ChunkLayout> SplitRowResizeLayout(const Plan& plan, int64_t chunk_bytes,
                                                 int64_t capacity_bytes, ChunkLayout layout) {
  const PlanStep& op = plan.steps.back();
  const int64_t n = layout.unit_elements;
  layout.mode = ChunkLayout::Mode::kSplitRowResize;
  layout.unit_out_elements = op.out_cols;
  const int64_t per_element = PieceBytesPerElement(plan);
  int64_t piece = std::max<int64_t>(1, std::min(chunk_bytes / per_element, n));
  int64_t pieces = 0;
  int64_t largest_in = 0;  // input elements of the largest piece
  switch (op.kind) {
    case StepKind::kRowConvolve: {
      // Pieces of the output; each reads its outputs' inputs, up to taps - 1 more.
      const int64_t halo = static_cast<int64_t>(op.op.taps.size()) - 1;
      int64_t begin = 0, count = 0;
      ConvolveRange(op, &begin, &count);
      piece = std::max<int64_t>(1, piece - halo);
      pieces = CeilDiv(count, piece);
      largest_in = std::min(n, piece + halo);
      break;
    }
    case StepKind::kRowTopk:
      // A piece holds at least k values, so that its top k is defined (the last piece may be
      // shorter: its candidates are all its values).
      piece = std::min(n, std::max(piece, op.op.k));
      pieces = CeilDiv(n, piece);
      largest_in = piece;
      break;
    default:
      pieces = CeilDiv(n, piece);
      largest_in = piece;
      break;
  }
  int64_t fixed = 8;  // cumsum's carry-sized partials at least
  if (op.kind == StepKind::kRowHistogram) fixed = op.op.bins * op.output_itemsize();
  const int64_t need = std::max(largest_in * per_element, fixed);
  if (need > capacity_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "input.shape: one piece of a row of ", op.ops, " needs ", need,
        " bytes on the device, over the ", capacity_bytes,
        " bytes a stream's chunk buffers hold (gpupiped --chunk-mib and --device-memory)"));
  }
  layout.piece_elements = piece;
  layout.pieces_per_unit = pieces;
  layout.chunk_count = layout.units * pieces;
  return layout;
}

// Where kSplitRowResize piece `c.index` reads and writes; `op` is the job's resize step.
void SplitRowResizeSpan(const PlanStep& op, const ChunkLayout& layout, Chunk& c) {
  c.row = c.index / layout.pieces_per_unit;
  c.piece = c.index % layout.pieces_per_unit;
  c.last_piece = c.piece == layout.pieces_per_unit - 1;
  const int64_t n = layout.unit_elements;
  const int64_t row_in = c.row * n;
  const int64_t row_out = c.row * layout.unit_out_elements;
  if (op.kind == StepKind::kRowConvolve) {
    int64_t begin = 0, count = 0;
    ConvolveRange(op, &begin, &count);
    kernels::ConvolveWindow& w = c.window;
    w.row_length = n;
    w.out_begin = begin + c.piece * layout.piece_elements;
    w.out_count = std::min(layout.piece_elements, begin + count - w.out_begin);
    kernels::ConvolveWindowInput(n, static_cast<int64_t>(op.op.taps.size()), w.out_begin,
                                 w.out_count, &w.in_begin, &w.in_count);
    c.in_offset = row_in + w.in_begin;
    c.in_elements = w.in_count;
    c.out_offset = row_out + (w.out_begin - begin);
    c.out_elements = w.out_count;
    return;
  }
  const int64_t start = c.piece * layout.piece_elements;
  c.in_offset = row_in + start;
  c.in_elements = std::min(layout.piece_elements, n - start);
  switch (op.kind) {
    case StepKind::kRowCumsum:
      c.out_offset = row_in + start;  // cumsum keeps the row's length
      c.out_elements = c.in_elements;
      break;
    case StepKind::kRowHistogram:
      c.out_offset = row_out;
      c.out_elements = c.last_piece ? op.op.bins : 0;
      break;
    default:  // topk: the piece's top min(k, piece) values
      c.out_offset = row_out;
      c.out_elements = std::min(op.op.k, c.in_elements);
      break;
  }
}

// The plan of kSplitRowResize piece `c` (c.plan is the job's plan; the span is set).
void SplitRowResizePlan(Chunk& c) {
  PlanStep& op = c.plan.steps.back();
  if (op.kind == StepKind::kRowTopk) op.op.k = c.out_elements;
  for (PlanStep& step : c.plan.steps) {
    step.rows = 1;
    step.cols = c.in_elements;
  }
  op.out_cols = op.kind == StepKind::kRowHistogram ? op.op.bins
                : op.kind == StepKind::kRowTopk    ? op.op.k
                                                   : c.out_elements;
  c.plan.input_elements = c.in_elements;
  c.plan.output_elements = c.out_elements;
  c.plan.output_shape = {c.out_elements};
  c.plan.max_bytes = PlanMaxBytes(c.plan);
}

}  // namespace

absl::StatusOr<ChunkLayout> MakeChunkLayout(const JobSpec& spec, const Plan& plan,
                                            int64_t chunk_bytes, int64_t capacity_bytes) {
  ChunkLayout layout;
  layout.in_itemsize = DTypeSize(spec.dtype);
  layout.out_itemsize = DTypeSize(plan.output_dtype);
  chunk_bytes = std::max<int64_t>(1, std::min(chunk_bytes, capacity_bytes));
  // The outermost row op has the fewest rows; every step's rows (or elements) are a multiple
  // of its row count, since row ops work along trailing dimensions.
  layout.units = plan.input_elements;
  for (const PlanStep& step : plan.steps) {
    if (step.kind != StepKind::kElementwise) layout.units = std::min(layout.units, step.rows);
  }
  layout.units = std::max<int64_t>(1, layout.units);
  layout.unit_elements = plan.input_elements / layout.units;
  // Every tensor of the plan scales with the units a chunk holds (the planner's max_bytes
  // covers every step's input and output in their dtypes).
  const int64_t unit_bytes = CeilDiv(plan.max_bytes, layout.units);
  layout.unit_bytes = unit_bytes;

  const bool splits = CanSplitRow(plan) || CanSplitRowResize(plan);
  if (unit_bytes <= chunk_bytes || (unit_bytes <= capacity_bytes && !splits)) {
    layout.mode = ChunkLayout::Mode::kRows;
    layout.units_per_chunk = std::max<int64_t>(1, chunk_bytes / unit_bytes);
    layout.units_per_chunk = std::min(layout.units_per_chunk, layout.units);
    layout.chunk_count = CeilDiv(layout.units, layout.units_per_chunk);
    return layout;
  }
  if (!splits) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "input.shape: one row of ", RowOpName(plan), " needs ", unit_bytes,
        " bytes on the device (input and intermediate results of ", layout.unit_elements,
        " elements), over the ", capacity_bytes,
        " bytes a stream's chunk buffers hold (gpupiped --chunk-mib and --device-memory); only "
        "reductions, argmax, cumsum, histogram, convolve and topk (after at most one "
        "elementwise step) split a row across chunks"));
  }
  if (CanSplitRowResize(plan)) {
    return SplitRowResizeLayout(plan, chunk_bytes, capacity_bytes, layout);
  }
  // A piece's largest tensor is its input (its partial is one value of at most 8 bytes).
  layout.mode = ChunkLayout::Mode::kSplitRow;
  const int64_t per_element = std::max<int64_t>(layout.in_itemsize, 4);
  layout.piece_elements =
      std::max<int64_t>(1, std::min(chunk_bytes / per_element, layout.unit_elements));
  if (std::max<int64_t>(layout.piece_elements * per_element, 8) > capacity_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the server's chunk buffers of ", capacity_bytes, " bytes are too small for a job"));
  }
  layout.pieces_per_unit = CeilDiv(layout.unit_elements, layout.piece_elements);
  layout.chunk_count = layout.units * layout.pieces_per_unit;
  return layout;
}

Chunk ChunkSpan(const Plan& plan, const ChunkLayout& layout, int64_t index) {
  Chunk c;
  c.index = index;
  if (layout.mode == ChunkLayout::Mode::kSplitRowResize) {
    SplitRowResizeSpan(plan.steps.back(), layout, c);
    return c;
  }
  if (layout.mode == ChunkLayout::Mode::kSplitRow) {
    const int64_t unit = index / layout.pieces_per_unit;
    c.piece = index % layout.pieces_per_unit;
    const int64_t start = c.piece * layout.piece_elements;
    c.in_offset = unit * layout.unit_elements + start;
    c.in_elements = std::min(layout.piece_elements, layout.unit_elements - start);
    c.out_offset = unit;
    c.row = unit;
    c.out_elements = 1;
    c.last_piece = c.piece == layout.pieces_per_unit - 1;
    return c;
  }
  const int64_t first_unit = index * layout.units_per_chunk;
  const int64_t units = std::min(layout.units_per_chunk, layout.units - first_unit);
  c.in_offset = first_unit * layout.unit_elements;
  c.in_elements = units * layout.unit_elements;
  c.out_offset = plan.output_elements / layout.units * first_unit;
  c.out_elements = plan.output_elements / layout.units * units;
  return c;
}

Chunk ChunkAt(const Plan& plan, const ChunkLayout& layout, int64_t index) {
  Chunk c = ChunkSpan(plan, layout, index);
  c.plan = plan;
  if (layout.mode == ChunkLayout::Mode::kSplitRowResize) {
    SplitRowResizePlan(c);
    return c;
  }
  if (layout.mode == ChunkLayout::Mode::kSplitRow) {
    PlanStep& step = c.plan.steps[0];
    step.rows = 1;
    step.cols = c.in_elements;
    step.reduce = PartialReduceKind(step.reduce);
    c.plan.input_elements = c.in_elements;
    c.plan.output_elements = 1;
    c.plan.output_shape = {};
    c.plan.max_bytes = std::max<int64_t>(c.in_elements * layout.in_itemsize, 8);
    return c;
  }
  // Every step's rows (elementwise steps: elements) scale with the units the chunk holds.
  const int64_t units = c.in_elements / layout.unit_elements;
  const auto scale = [&](int64_t whole) { return whole / layout.units * units; };
  for (PlanStep& step : c.plan.steps) {
    if (step.kind == StepKind::kElementwise) {
      step.cols = scale(step.cols);
    } else {
      step.rows = scale(step.rows);
    }
  }
  c.plan.input_elements = c.in_elements;
  c.plan.output_elements = c.out_elements;
  c.plan.output_shape = {c.out_elements};
  c.plan.max_bytes = layout.unit_bytes * units;
  return c;
}

SplitRowCombiner::SplitRowCombiner(const Plan& plan, const ChunkLayout& layout)
    : step_(plan.steps.at(0)), cols_(layout.unit_elements) {}

namespace {

// One element of a float type (float32, float64, float16) as a double.
double LoadFloat(const void* p, DType dtype) {
  switch (dtype) {
    case DType::kFloat64: {
      double v = 0;
      std::memcpy(&v, p, sizeof(v));
      return v;
    }
    case DType::kFloat16: {
      gpupipe::HalfBits h = 0;
      std::memcpy(&h, p, sizeof(h));
      return gpupipe::HalfToFloat(h);
    }
    default: {
      float v = 0;
      std::memcpy(&v, p, sizeof(v));
      return v;
    }
  }
}

template <typename T>
T LoadAs(const void* p) {
  T v{};
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// ApplyEw(program, x) in the compute type of `dtype` (float32 for float16), as a double (which
// holds every value of each compute type exactly, so comparisons keep their order).
double PrologueValue(const kernels::EwProgram& program, const char* input, int64_t index,
                     DType dtype) {
  switch (dtype) {
    case DType::kFloat64:
      return kernels::ApplyEw(program, LoadAs<double>(input + index * 8));
    case DType::kFloat16:
      return kernels::ApplyEw(
          program, gpupipe::HalfToFloat(LoadAs<gpupipe::HalfBits>(input + index * 2)));
    case DType::kInt32:
      return kernels::ApplyEw(program, LoadAs<int32_t>(input + index * 4));
    default:
      return kernels::ApplyEw(program, LoadAs<float>(input + index * 4));
  }
}

}  // namespace

void SplitRowCombiner::Add(const Chunk& chunk, const void* partial, const void* input) {
  if (chunk.piece == 0) {
    acc_ = 0;
    iacc_ = 0;
    seen_ = false;
    nan_ = false;
    best_index_ = 0;
  }
  if (step_.kind == StepKind::kRowArgmax) {
    const int64_t local = LoadAs<int64_t>(partial);
    const double v =
        PrologueValue(step_.program, static_cast<const char*>(input), local, step_.in_dtype);
    const int64_t column = chunk.in_offset - chunk.out_offset * cols_ + local;
    // The first maximum wins: a later piece replaces it only when strictly greater, or when it
    // holds the row's first NaN.
    if (!seen_ || (!nan_ && (std::isnan(v) || v > extreme_))) {
      extreme_ = v;
      best_index_ = column;
      nan_ = std::isnan(v);
    }
    seen_ = true;
    return;
  }
  if (step_.in_dtype == DType::kInt32) {
    if (step_.reduce == kernels::RowReduceKind::kSum) {
      // int64 partial sums; the total wraps modulo 2^64 like the reference's accumulator.
      iacc_ += static_cast<uint64_t>(LoadAs<int64_t>(partial));
    } else {
      const int32_t p = LoadAs<int32_t>(partial);
      if (!seen_ || (step_.reduce == kernels::RowReduceKind::kMin ? p < iextreme_
                                                                   : p > iextreme_)) {
        iextreme_ = p;
      }
      seen_ = true;
    }
    return;
  }
  const double p = LoadFloat(partial, step_.out_dtype);
  switch (step_.reduce) {
    case kernels::RowReduceKind::kSum:
    case kernels::RowReduceKind::kMean:
      acc_ += p;
      break;
    case kernels::RowReduceKind::kNorm2:
      acc_ += static_cast<long double>(p) * p;
      break;
    case kernels::RowReduceKind::kMin:
    case kernels::RowReduceKind::kMax:
      if (std::isnan(p)) {
        nan_ = true;
      } else if (!seen_ || (step_.reduce == kernels::RowReduceKind::kMin ? p < extreme_
                                                                         : p > extreme_)) {
        extreme_ = p;
      }
      seen_ = true;
      break;
  }
}

std::string SplitRowCombiner::Finish(const Chunk& chunk) {
  (void)chunk;
  const auto bytes = [](const auto& value) {
    return std::string(reinterpret_cast<const char*>(&value), sizeof(value));
  };
  if (step_.kind == StepKind::kRowArgmax) return bytes(best_index_);
  if (step_.in_dtype == DType::kInt32) {
    if (step_.reduce == kernels::RowReduceKind::kSum) return bytes(static_cast<int64_t>(iacc_));
    return bytes(iextreme_);
  }
  long double out = 0;
  switch (step_.reduce) {
    case kernels::RowReduceKind::kSum: out = acc_; break;
    case kernels::RowReduceKind::kMean: out = acc_ / static_cast<long double>(cols_); break;
    case kernels::RowReduceKind::kNorm2: out = std::sqrt(acc_); break;
    case kernels::RowReduceKind::kMin:
    case kernels::RowReduceKind::kMax:
      out = nan_ ? std::numeric_limits<double>::quiet_NaN() : extreme_;
      break;
  }
  switch (step_.out_dtype) {
    case DType::kFloat64: return bytes(static_cast<double>(out));
    case DType::kFloat16: return bytes(gpupipe::FloatToHalf(static_cast<float>(out)));
    default: return bytes(static_cast<float>(out));
  }
}

}  // namespace gpupipe::engine
