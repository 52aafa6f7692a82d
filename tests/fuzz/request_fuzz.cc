// libFuzzer target: whatever bytes a client sends as a request. Decoding and validation must
// answer every input with a status (never crash, hang or allocate without bound), and a request
// they accept must plan, pass the work limit check or fail it cleanly, and lay out in chunks.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "google/protobuf/stubs/logging.h"
#include "gpupipe/v1/gpupipe.pb.h"
#include "server/engine/backends/cpu/cpu_backend.h"
#include "server/engine/job/validate.h"
#include "server/engine/pipeline/chunk_pipeline.h"
#include "server/engine/planning/step_work.h"
#include "server/rpc/convert.h"

namespace {

void Check(const gpupipe::v1::SubmitRequest& request, gpupipe::engine::InputPath path) {
  namespace engine = gpupipe::engine;
  absl::StatusOr<engine::JobSpec> spec = gpupipe::rpc::DecodeJobSpec(request);
  if (!spec.ok()) return;
  const engine::Limits limits;
  const int64_t input_bytes = static_cast<int64_t>(request.input().data().size());
  if (!engine::ValidateJob(*spec, input_bytes, limits, path).ok()) return;
  absl::StatusOr<engine::Plan> plan = engine::PlanJob(*spec);
  if (!plan.ok()) __builtin_trap();  // validation accepted what the planner cannot plan
  if (!engine::CheckWork(*plan, limits.max_work_per_byte).ok()) return;
  static const std::unique_ptr<engine::Backend> cpu = engine::CreateCpuBackend({});
  absl::StatusOr<engine::ChunkLayout> layout =
      engine::ChooseLayout(*spec, *plan, *cpu, engine::ChunkPolicy{});
  if (!layout.ok()) return;
  // Every chunk's span lies inside the input.
  const int64_t total = engine::ElementCount(spec->shape);
  for (int64_t k = 0; k < layout->chunk_count && k < 64; ++k) {
    const engine::Chunk chunk = engine::ChunkSpan(*plan, *layout, k);
    if (chunk.in_offset < 0 || chunk.in_offset + chunk.in_elements > total) __builtin_trap();
  }
}

}  // namespace

// Protobuf logs every string field that is not UTF-8; the fuzzer sends many.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gpupipe::v1::RunRequest run;
  if (run.ParseFromArray(data, static_cast<int>(size)) && run.has_spec()) {
    Check(run.spec(), gpupipe::engine::InputPath::kStreamed);
  }
  gpupipe::v1::SubmitRequest submit;
  if (submit.ParseFromArray(data, static_cast<int>(size))) {
    Check(submit, gpupipe::engine::InputPath::kInline);
  }
  return 0;
}
