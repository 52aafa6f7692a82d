// Turns the event stream of one Submit call into a result, checking that the server kept the
// protocol: Accepted first, then ResultChunks that cover the output exactly once and in order,
// then Timing, then exactly one Done, last.
//
// Pure (no I/O), so that the checks are testable without a server. Not thread-safe: one
// assembler serves one stream, fed from one thread.
#ifndef GPUPIPE_CLIENT_RESULT_ASSEMBLER_H_
#define GPUPIPE_CLIENT_RESULT_ASSEMBLER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpupipe/v1/gpupipe.pb.h"

namespace gpupipe {
namespace client {

struct JobResult {
  v1::Accepted accepted;  // job id, backend, output dtype and shape
  v1::Tensor output;      // the assembled result: dtype, shape and all data bytes
  v1::Timing timing;      // empty when the server sent no Timing event
  bool has_timing = false;
};

class ResultAssembler {
 public:
  ResultAssembler() = default;
  ResultAssembler(const ResultAssembler&) = delete;
  ResultAssembler& operator=(const ResultAssembler&) = delete;

  // Consumes the next event. A Done with a non-zero code yields that code (as absl::StatusCode,
  // which numbers google.rpc.Code the same way) and the server's message. Any protocol breach
  // (event before Accepted or after Done, a second Accepted, a chunk that is not contiguous or
  // overruns the output, an unknown output dtype) yields DATA_LOSS or INVALID_ARGUMENT naming
  // it. After an error the assembler must not be fed further.
  absl::Status Add(const v1::JobEvent& event);

  // True once a Done event has been consumed.
  bool done() const { return done_; }
  // True once an Accepted event has been consumed.
  bool accepted() const { return accepted_; }

  // The result, once a Done with code 0 arrived and the chunks filled the output exactly.
  // Moves the output out: call at most once.
  absl::StatusOr<JobResult> Finish();

 private:
  JobResult result_;
  int64_t expected_bytes_ = 0;
  bool accepted_ = false;
  bool done_ = false;
};

}  // namespace client
}  // namespace gpupipe

#endif  // GPUPIPE_CLIENT_RESULT_ASSEMBLER_H_
