#include "client/result_assembler.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/dtype.h"

namespace gpupipe {
namespace client {
namespace {

// Reserve the whole output up front only below this size: the size comes from the server and
// a bogus shape should fail on the chunks, not on a giant allocation.
constexpr int64_t kMaxReserve = int64_t{1} << 30;

absl::Status Protocol(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("protocol error: ", what));
}

}  // namespace

absl::Status ForEachEvent(const v1::JobEvent& event,
                          const std::function<absl::Status(const v1::JobEvent&)>& fn) {
  if (!event.has_complete()) return fn(event);
  const v1::CompleteJob& job = event.complete();
  v1::JobEvent part;
  part.set_job_id(event.job_id());
  if (job.has_accepted()) {
    *part.mutable_accepted() = job.accepted();
    if (absl::Status s = fn(part); !s.ok()) return s;
  }
  if (job.has_chunk()) {
    *part.mutable_chunk() = job.chunk();
    if (absl::Status s = fn(part); !s.ok()) return s;
  }
  if (job.has_timing()) {
    *part.mutable_timing() = job.timing();
    if (absl::Status s = fn(part); !s.ok()) return s;
  }
  if (!job.has_done()) return Protocol("CompleteJob without Done");
  *part.mutable_done() = job.done();
  return fn(part);
}

absl::Status ResultAssembler::Add(const v1::JobEvent& event) {
  if (done_) return Protocol("event after Done");
  switch (event.event_case()) {
    case v1::JobEvent::kComplete:
      if (accepted_) return Protocol("CompleteJob after other events");
      return ForEachEvent(event, [this](const v1::JobEvent& part) { return Add(part); });
    case v1::JobEvent::kAccepted: {
      if (accepted_) return Protocol("second Accepted event");
      const v1::Accepted& a = event.accepted();
      const std::vector<int64_t> shape(a.output_shape().begin(), a.output_shape().end());
      absl::StatusOr<int64_t> bytes = TensorBytes(a.output_dtype(), shape);
      if (!bytes.ok()) {
        return absl::DataLossError(
            absl::StrCat("protocol error: Accepted output: ", bytes.status().message()));
      }
      accepted_ = true;
      expected_bytes_ = *bytes;
      result_.accepted = a;
      if (result_.accepted.job_id().empty()) result_.accepted.set_job_id(event.job_id());
      result_.output.set_dtype(a.output_dtype());
      *result_.output.mutable_shape() = a.output_shape();
      if (result_.dry_run || result_.output_in_region) return absl::OkStatus();
      if (sink_ != nullptr) return sink_->Begin(a.output_dtype(), shape);
      if (expected_bytes_ <= kMaxReserve) {
        result_.output.mutable_data()->reserve(static_cast<size_t>(expected_bytes_));
      }
      return absl::OkStatus();
    }
    case v1::JobEvent::kPlan:
      if (!accepted_) return Protocol("Plan before Accepted");
      if (result_.has_plan) return Protocol("second Plan event");
      if (chunked_) return Protocol("Plan after ResultChunk");
      if (result_.has_timing) return Protocol("Plan after Timing");
      result_.plan = event.plan();
      result_.has_plan = true;
      return absl::OkStatus();
    case v1::JobEvent::kChunk:
      if (absl::Status s = ChunkAllowed(); !s.ok()) return s;
      chunked_ = true;
      return AddChunk(event.chunk());
    case v1::JobEvent::kTiming:
      if (!accepted_) return Protocol("Timing before Accepted");
      result_.timing = event.timing();
      result_.has_timing = true;
      return absl::OkStatus();
    case v1::JobEvent::kDone: {
      done_ = true;
      const v1::Done& d = event.done();
      if (d.code() != 0) {
        // google.rpc.Code and absl::StatusCode share numbering; unknown values map to UNKNOWN.
        const absl::StatusCode code = d.code() > 0 && d.code() <= 16
                                          ? static_cast<absl::StatusCode>(d.code())
                                          : absl::StatusCode::kUnknown;
        return absl::Status(code, d.message());
      }
      if (!accepted_) return Protocol("Done without Accepted");
      return absl::OkStatus();
    }
    case v1::JobEvent::EVENT_NOT_SET:
      // A newer server's event kind: skipping it keeps this client compatible.
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

absl::Status ResultAssembler::AddComplete(v1::CompleteJob* job) {
  if (done_) return Protocol("event after Done");
  if (accepted_) return Protocol("CompleteJob after other events");
  // The parts in ForEachEvent's order, each checked as Add checks it.
  v1::JobEvent part;
  if (job->has_accepted()) {
    part.mutable_accepted()->Swap(job->mutable_accepted());
    if (absl::Status s = Add(part); !s.ok()) return s;
  }
  if (job->has_chunk()) {
    if (absl::Status s = ChunkAllowed(); !s.ok()) return s;
    chunked_ = true;
    if (absl::Status s = AddChunk(job->chunk(), job->mutable_chunk()->mutable_data()); !s.ok()) {
      return s;
    }
  }
  if (job->has_timing()) {
    part.mutable_timing()->Swap(job->mutable_timing());
    if (absl::Status s = Add(part); !s.ok()) return s;
  }
  if (!job->has_done()) return Protocol("CompleteJob without Done");
  part.mutable_done()->Swap(job->mutable_done());
  return Add(part);
}

absl::Status ResultAssembler::ChunkAllowed() const {
  if (!accepted_) return Protocol("ResultChunk before Accepted");
  // A server that ignores dry_run runs the job; saying so beats a confusing size error.
  if (result_.dry_run) return Protocol("ResultChunk in a dry run (the job ran)");
  if (result_.output_in_region) {
    return Protocol("ResultChunk for a job whose output goes to a region");
  }
  return absl::OkStatus();
}

absl::Status ResultAssembler::AddChunk(const v1::ResultChunk& chunk, std::string* take) {
  const int64_t have = received_bytes_;
  if (chunk.offset() != have) {
    return Protocol(
        absl::StrCat("ResultChunk at offset ", chunk.offset(), ", expected offset ", have));
  }
  const int64_t size = static_cast<int64_t>(chunk.data().size());
  if (size > expected_bytes_ - have) {
    return Protocol(absl::StrCat("ResultChunk [", have, ", ", have + size, ") overruns the ",
                                 expected_bytes_, "-byte output"));
  }
  if (size == 0) return absl::OkStatus();
  if (sink_ != nullptr) {
    if (absl::Status s = sink_->Write(have, chunk.data()); !s.ok()) return s;
  } else if (take != nullptr && result_.output.data().empty()) {
    // The whole output so far: the chunk's bytes become the result's (the reservation made at
    // Accepted goes with the old, empty string).
    result_.output.mutable_data()->swap(*take);
  } else {
    result_.output.mutable_data()->append(chunk.data());
  }
  received_bytes_ += size;
  return absl::OkStatus();
}

absl::StatusOr<JobResult> ResultAssembler::Finish() {
  if (!done_) return Protocol("stream ended without a Done event");
  if (result_.dry_run) {
    if (!result_.has_plan) return Protocol("dry run ended without a Plan event");
    return std::move(result_);
  }
  if (!result_.output_in_region && received_bytes_ != expected_bytes_) {
    return Protocol(absl::StrCat("output is ", received_bytes_, " bytes but shape ",
                                 ShapeString({result_.output.shape().begin(),
                                              result_.output.shape().end()}),
                                 " of ", DTypeName(result_.output.dtype()), " needs ",
                                 expected_bytes_));
  }
  return std::move(result_);
}

}  // namespace client
}  // namespace gpupipe
