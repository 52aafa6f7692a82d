#include "server/engine/planning/split_row_merge.h"

#include "absl/strings/str_cat.h"
#include "kernels/cpu/topk_reference.h"
#include "server/engine/planning/kernel_types.h"

namespace gpupipe::engine {

SplitRowResizeMerger::SplitRowResizeMerger(const Plan& plan, const ChunkLayout& layout)
    : itemsize_(layout.out_itemsize) {
  if (layout.mode == ChunkLayout::Mode::kSplitRowResize) step_ = &plan.steps.back();
}

absl::StatusOr<SplitRowEmission> SplitRowResizeMerger::Add(const Chunk& chunk,
                                                           const char* result) {
  const int64_t bytes = chunk.out_elements * itemsize_;
  if (step_ == nullptr || step_->kind != StepKind::kRowTopk) {
    // cumsum and convolve pieces are final; a histogram's counts come with the last piece.
    return SplitRowEmission{chunk.out_offset * itemsize_, result, bytes};
  }
  if (chunk.piece == 0) candidates_.clear();
  candidates_.append(result, static_cast<size_t>(bytes));
  if (!chunk.last_piece) return SplitRowEmission{};
  const int64_t count = static_cast<int64_t>(candidates_.size()) / itemsize_;
  const int64_t k = step_->op.k;
  merged_.resize(static_cast<size_t>(k * itemsize_));
  if (!kernels::cpu::RowTopk(candidates_.data(), ToElementType(step_->in_dtype), merged_.data(),
                             1, count, static_cast<int32_t>(k))) {
    return absl::InternalError(absl::StrCat("topk: merging ", count, " candidates of row ",
                                            chunk.row, " into its top ", k, " failed"));
  }
  return SplitRowEmission{chunk.out_offset * itemsize_, merged_.data(),
                          static_cast<int64_t>(merged_.size())};
}

}  // namespace gpupipe::engine
