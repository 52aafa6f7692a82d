// The host side of kSplitRowResize chunks (chunk_plan.h): what each piece's result becomes in
// the job's output. cumsum and convolve pieces are final and go out as they are; a histogram's
// counts go out with the row's last piece; topk pieces are candidates, merged into the row's
// top k with the CPU reference once the row's last piece is in (the top k of the pieces' top
// ks is the row's top k; NaN largest, descending).
//
// Thread safety: none; one job's runner uses it, adding the chunks in order.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "server/engine/planning/chunk_plan.h"
#include "server/engine/planning/plan.h"

namespace gpupipe::engine {

// Output bytes to emit now: `size` bytes at `data` belong at output byte `offset` (size 0:
// nothing yet). `data` stays valid until the next Add.
struct SplitRowEmission {
  int64_t offset = 0;
  const char* data = nullptr;
  int64_t size = 0;
};

class SplitRowResizeMerger {
 public:
  SplitRowResizeMerger(const Plan& plan, const ChunkLayout& layout);

  // Takes `chunk`'s result (chunk.out_elements of the output dtype at `result`). INTERNAL if
  // the CPU reference rejects the merge of a topk row.
  absl::StatusOr<SplitRowEmission> Add(const Chunk& chunk, const char* result);

 private:
  const PlanStep* step_ = nullptr;  // the resize step; null unless the layout splits one
  int64_t itemsize_ = 4;
  std::string candidates_;  // topk: the row's pieces' top values so far
  std::string merged_;      // topk: the row's top k
};

}  // namespace gpupipe::engine
