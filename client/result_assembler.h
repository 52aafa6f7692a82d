// Turns the event stream of one Submit call into a result, checking that the server kept the
// protocol: Accepted first, then at most one Plan, then ResultChunks that cover the output
// exactly once and in order, then Timing, then exactly one Done, last. A CompleteJob event is
// checked as the events it stands for. A dry run (a request with
// dry_run set) is Accepted, Plan, Done: no chunks, and no output bytes are expected.
//
// The output's bytes are either kept in the result (the default) or handed, checked, to a
// ResultSink as they arrive, so that a result larger than memory should hold can go straight to
// a file. The protocol checks are the same either way.
//
// No I/O of its own, so that the checks are testable without a server. Not thread-safe: one
// assembler serves one stream, fed from one thread, which also calls the sink.
#ifndef GPUPIPE_CLIENT_RESULT_ASSEMBLER_H_
#define GPUPIPE_CLIENT_RESULT_ASSEMBLER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gpupipe/v1/gpupipe.pb.h"

namespace gpupipe {
namespace client {

struct JobResult {
  v1::Accepted accepted;  // job id, backend, output dtype and shape
  // The assembled result: dtype, shape and all data bytes. In a dry run, or when a ResultSink
  // took the bytes, dtype and shape only.
  v1::Tensor output;
  v1::Timing timing;      // empty when the server sent no Timing event
  bool has_timing = false;
  v1::Plan plan;          // empty when the server sent no Plan event
  bool has_plan = false;
  bool dry_run = false;   // the job was only planned; `output` holds no data
  // The request named an output region: the bytes are there, and `output` holds none.
  bool output_in_region = false;
  // The daemon that ran the job, as grpc::ClientContext::peer() spells its address
  // ("ipv4:10.0.0.7:50051"): set by JobClient::Submit and SubmitAsync, empty otherwise.
  std::string peer;
};

// Takes a running job's output bytes from a ResultAssembler instead of the assembler keeping
// them. An error returned by either method ends the stream: ResultAssembler::Add returns it
// unchanged (JobClient then cancels the job), and the sink is not called again.
class ResultSink {
 public:
  virtual ~ResultSink() = default;
  // The output's dtype and shape, from the Accepted event, before any bytes; the assembler has
  // checked that they make a valid size. Not called in a dry run.
  virtual absl::Status Begin(v1::DType dtype, const std::vector<int64_t>& shape) = 0;
  // The bytes of one non-empty ResultChunk, at byte `offset` of the output. Chunks come in
  // order, each starting where the previous one ended, none past the output's end. `data` is
  // valid only during the call.
  virtual absl::Status Write(int64_t offset, absl::string_view data) = 0;
};

// Calls `fn` with each event that `event` stands for: the parts of a CompleteJob event
// (JobEvent.complete) as the Accepted, ResultChunk, Timing and Done events they replace, in
// that order; any other event as it is. Returns `fn`'s first error, after which it stops.
absl::Status ForEachEvent(const v1::JobEvent& event,
                          const std::function<absl::Status(const v1::JobEvent&)>& fn);

class ResultAssembler {
 public:
  ResultAssembler() = default;
  // `dry_run`: the request had dry_run set, so the stream must carry a Plan and no chunks.
  // `sink`, when not null, receives the output bytes, which the result then does not hold; it
  // must outlive the assembler.
  // `output_in_region`: the request named an output region, so the stream must carry no
  // chunks (the bytes are in the region).
  explicit ResultAssembler(bool dry_run, ResultSink* sink = nullptr, bool output_in_region = false)
      : sink_(sink) {
    result_.dry_run = dry_run;
    result_.output_in_region = output_in_region;
  }
  ResultAssembler(const ResultAssembler&) = delete;
  ResultAssembler& operator=(const ResultAssembler&) = delete;

  // Consumes the next event. A Done with a non-zero code yields that code (as absl::StatusCode,
  // which numbers google.rpc.Code the same way) and the server's message. Any protocol breach
  // (event before Accepted or after Done, a second Accepted or Plan, a Plan after a chunk or
  // Timing, a chunk that is not contiguous or overruns the output or comes in a dry run, an
  // unknown output dtype) yields DATA_LOSS naming it. A sink's error is returned as it is. After
  // an error the assembler must not be fed further.
  absl::Status Add(const v1::JobEvent& event);
  // The same for a whole job in one message (SubmitSmall's response), as Add would take a
  // JobEvent carrying it, but moving its parts into the result instead of copying them: the
  // result's bytes among them, which is most of a small job's reading. The job's id is its
  // Accepted's (Add would fall back to the event's). `job` is left unspecified.
  absl::Status AddComplete(v1::CompleteJob* job);

  // True once a Done event has been consumed.
  bool done() const { return done_; }
  // True once an Accepted event has been consumed.
  bool accepted() const { return accepted_; }

  // The result, once a Done with code 0 arrived and the chunks filled the output exactly (in a
  // dry run: once a Done with code 0 followed a Plan). Moves the output out: call at most once.
  // With a sink, a successful Finish means the sink was given every output byte exactly once.
  absl::StatusOr<JobResult> Finish();

 private:
  // Whether a ResultChunk may come now (after Accepted, in a job that returns its bytes).
  absl::Status ChunkAllowed() const;
  // `take` (may be null): the chunk's own bytes, which may be moved into the result instead of
  // copied.
  absl::Status AddChunk(const v1::ResultChunk& chunk, std::string* take = nullptr);

  JobResult result_;
  ResultSink* const sink_ = nullptr;
  int64_t expected_bytes_ = 0;
  int64_t received_bytes_ = 0;  // contiguous from offset 0, whether kept or handed to the sink
  bool accepted_ = false;
  bool chunked_ = false;  // a ResultChunk arrived (empty ones included)
  bool done_ = false;
};

}  // namespace client
}  // namespace gpupipe

#endif  // GPUPIPE_CLIENT_RESULT_ASSEMBLER_H_
