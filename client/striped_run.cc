#include "client/striped_run.h"

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/random_id.h"

namespace gpupipe {
namespace client {
namespace {

// How many calls a streamed job is split over when the caller leaves it to the library: one
// below kMinBytesToSplit (a split costs a round of call setup per stripe), then one more per
// kBytesPerCall, at most kMaxAutoCalls. Chosen by bench/results/dataplane-h200.md ("streamed
// through loopback TCP"), where two calls were as fast as four and faster than eight: more
// connections for nothing.
constexpr int64_t kMinBytesToSplit = int64_t{64} << 20;
constexpr int64_t kBytesPerCall = int64_t{64} << 20;
constexpr int kMaxAutoCalls = 2;

using RunStream = grpc::ClientReaderWriter<v1::RunRequest, v1::JobEvent>;

struct Call {
  grpc::ClientContext context;
  std::unique_ptr<RunStream> stream;
  bool accepted = false;  // its Accepted was read (calls after the first)
  bool ended = false;     // its Done was read, or its stream ended
};

// The upload's shared state: message m is read from the input only after message m - 1, by the
// thread of call m % calls, so the input is read once, in order, while the writes of the
// calls go on at the same time.
class Upload {
 public:
  Upload(int64_t input_bytes, const InputReader& read, const UploadProgress& on_progress)
      : input_bytes_(input_bytes), read_(read), on_progress_(on_progress) {}

  int64_t messages() const { return (input_bytes_ + kUploadChunkBytes - 1) / kUploadChunkBytes; }

  // Reads message m into `data`; false when the upload stopped (or `read` failed).
  bool Read(int64_t m, std::string* data) {
    const int64_t n = std::min(kUploadChunkBytes, input_bytes_ - m * kUploadChunkBytes);
    data->resize(static_cast<size_t>(n));
    std::unique_lock<std::mutex> lock(mu_);
    turn_changed_.wait(lock, [&] { return stopped_ || turn_ == m; });
    if (stopped_) return false;
    lock.unlock();
    absl::Status s = read_(data->data(), n);  // only this thread has the turn
    lock.lock();
    if (!s.ok()) {
      if (error_.ok()) error_ = std::move(s);
      StopLocked();
      return false;
    }
    ++turn_;
    turn_changed_.notify_all();
    return true;
  }

  // Message of `n` bytes handed to gRPC.
  void Sent(int64_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    sent_ += n;
    if (on_progress_) on_progress_(sent_, input_bytes_);
  }

  void Stop() {
    std::lock_guard<std::mutex> lock(mu_);
    StopLocked();
  }

  // The input's error, once `read` failed.
  absl::Status error() const {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }

 private:
  void StopLocked() {
    stopped_ = true;
    turn_changed_.notify_all();
  }

  const int64_t input_bytes_;
  const InputReader& read_;
  const UploadProgress& on_progress_;
  mutable std::mutex mu_;
  std::condition_variable turn_changed_;
  int64_t turn_ = 0;
  int64_t sent_ = 0;
  bool stopped_ = false;
  absl::Status error_;
};

absl::Status DoneStatus(const v1::Done& done) {
  if (done.code() == 0) return absl::OkStatus();
  return absl::Status(done.code() > 0 && done.code() <= 16
                          ? static_cast<absl::StatusCode>(done.code())
                          : absl::StatusCode::kUnknown,
                      done.message());
}

// Reads the events of the calls back into one ordered stream for the assembler.
class EventMerger {
 public:
  EventMerger(std::vector<std::unique_ptr<Call>>& calls, ResultAssembler& assembler,
              const EventCallback& on_event)
      : calls_(calls), assembler_(assembler), on_event_(on_event) {}

  // OK once every call ended with the same successful Done; else the first error: a failed
  // Done, a protocol breach (DATA_LOSS), the sink's error. A call whose stream ended without
  // Done gives OK here (its RPC status tells why).
  absl::Status Merge() {
    const int n = static_cast<int>(calls_.size());
    int64_t chunks = 0;
    int at = 0;  // the call the next event of the ordered stream comes on
    v1::JobEvent event;
    // Accepted and Plan on call 0, then the chunks round-robin, until a call has no chunk left
    // for its turn: it sends its Timing (call 0) or Done instead, and the result is complete.
    while (true) {
      if (!Next(at, &event)) return breach_;
      if (!event.has_chunk()) {
        if (at == 0 && (event.has_accepted() || event.has_plan())) {
          if (absl::Status s = Feed(event); !s.ok()) return s;
          continue;
        }
        break;
      }
      if (absl::Status s = Feed(event); !s.ok()) return s;
      at = static_cast<int>(++chunks % n);
    }
    // `event` is the first event after the chunks, on call `at`: the rest of each call.
    for (int i = 0; i < n; ++i) {
      const int c = (at + i) % n;
      bool have = i == 0;
      while (have || Next(c, &event)) {
        have = false;
        if (absl::Status s = c == 0 ? Feed(event) : Check(c, event); !s.ok()) return s;
        if (event.has_done()) break;
      }
    }
    return breach_;
  }

 private:
  // The next event of call c, after the Accepted every call but the first begins with, which
  // must name the job call 0's did (read first, always); false once the stream ended, or with
  // breach_ set when that Accepted is missing or names another job.
  bool Next(int c, v1::JobEvent* event) {
    Call& call = *calls_[static_cast<size_t>(c)];
    if (call.ended) return false;
    while (call.stream->Read(event)) {
      if (c == 0 || call.accepted) return true;
      call.accepted = true;
      if (!event->has_accepted() || event->accepted().job_id() != job_id_) {
        breach_ = absl::DataLossError(absl::StrCat(
            "call ", c, " of the run did not begin with the Accepted of job ", job_id_));
        return false;
      }
    }
    call.ended = true;
    return false;
  }

  absl::Status Feed(const v1::JobEvent& event) {
    if (absl::Status s = assembler_.Add(event); !s.ok()) return s;
    if (event.has_accepted()) job_id_ = event.accepted().job_id();
    if (event.has_done()) done_ = event.done();
    if (on_event_) on_event_(event);
    return absl::OkStatus();
  }

  // An event of call c > 0 after the chunks: only its Done, the same as the job's.
  absl::Status Check(int c, const v1::JobEvent& event) {
    if (!event.has_done()) {
      return absl::DataLossError(absl::StrCat(
          "call ", c, " of the run sent an event other than Done after the result's last chunk"));
    }
    if (absl::Status s = DoneStatus(event.done()); !s.ok()) return s;
    if (done_.has_value() && done_->code() != 0) return DoneStatus(*done_);
    calls_[static_cast<size_t>(c)]->ended = true;
    return absl::OkStatus();
  }

  std::vector<std::unique_ptr<Call>>& calls_;
  ResultAssembler& assembler_;
  const EventCallback& on_event_;
  std::string job_id_;
  absl::Status breach_;  // a call that broke the protocol (Next)
  std::optional<v1::Done> done_;
};

}  // namespace

int CallsForUpload(int64_t input_bytes, int max_calls) {
  if (input_bytes < kMinBytesToSplit || max_calls < 2) return 1;
  const int64_t calls = 1 + input_bytes / kBytesPerCall;
  return static_cast<int>(std::min<int64_t>({calls, kMaxAutoCalls, max_calls}));
}

absl::StatusOr<JobResult> RunOverCalls(const std::vector<v1::JobService::Stub*>& stubs,
                                       const std::function<void(grpc::ClientContext*)>& prepare,
                                       const v1::SubmitRequest& spec, int64_t input_bytes,
                                       const InputReader& read, const EventCallback& on_event,
                                       const UploadProgress& on_progress, ResultSink* sink) {
  if (!spec.input().data().empty()) {
    return absl::InvalidArgumentError(
        "Run: the spec's input must carry no data (the bytes are streamed)");
  }
  const int n = static_cast<int>(stubs.size());
  if (n < 1) return absl::InvalidArgumentError("Run: no call to run over");
  const std::string key = n > 1 ? RandomHex128() : std::string();
  std::vector<std::unique_ptr<Call>> calls;
  for (int i = 0; i < n; ++i) {
    calls.push_back(std::make_unique<Call>());
    prepare(&calls.back()->context);
    calls.back()->stream = stubs[static_cast<size_t>(i)]->Run(&calls.back()->context);
  }
  const auto cancel_all = [&] {
    for (const std::unique_ptr<Call>& call : calls) call->context.TryCancel();
  };

  // One upload thread per call, so that events (results included) are read while the upload
  // goes on; gRPC allows one reader and one writer on a stream at the same time.
  Upload upload(input_bytes, read, on_progress);
  std::vector<std::thread> uploads;
  for (int i = 0; i < n; ++i) {
    uploads.emplace_back([&, i] {
      RunStream& stream = *calls[static_cast<size_t>(i)]->stream;
      v1::RunRequest message;
      v1::RunStripes* stripes = nullptr;
      if (i == 0) {
        *message.mutable_spec() = spec;
        if (n > 1) stripes = message.mutable_stripes();
      } else {
        stripes = message.mutable_join();
      }
      if (stripes != nullptr) {
        stripes->set_key(key);
        stripes->set_index(static_cast<uint32_t>(i));
        stripes->set_count(static_cast<uint32_t>(n));
      }
      bool ok = stream.Write(message);
      message.Clear();
      // A dry run reads no input: the daemon answers the spec alone.
      const int64_t messages = spec.dry_run() ? 0 : upload.messages();
      for (int64_t m = i; ok && m < messages; m += n) {
        std::string* data = message.mutable_data();
        if (!upload.Read(m, data)) {
          if (!upload.error().ok()) cancel_all();
          return;
        }
        // Write returns once the message is serialized and handed on, so the buffer is reused.
        ok = stream.Write(message);
        if (ok) upload.Sent(static_cast<int64_t>(data->size()));
      }
      if (!ok) {
        // The call ended: its status says why, and the daemon ends the run's other calls.
        // (Cancelling them here would replace the statuses they carry with CANCELLED.)
        upload.Stop();
        return;
      }
      stream.WritesDone();
    });
  }

  ResultAssembler assembler(spec.dry_run(), sink);
  EventMerger merger(calls, assembler, on_event);
  const absl::Status stream_error = merger.Merge();
  // Stop the job rather than wait for the rest of it (after a Done the server is finishing
  // anyway), stop the upload, and drain, as Finish requires. A call whose stream has ended
  // already keeps the status the server sent (a cancel now would replace it).
  if (!assembler.done()) {
    for (const std::unique_ptr<Call>& call : calls) {
      if (!call->ended) call->context.TryCancel();
    }
  }
  upload.Stop();
  v1::JobEvent ignored;
  for (const std::unique_ptr<Call>& call : calls) {
    while (call->stream->Read(&ignored)) {
    }
  }
  for (std::thread& thread : uploads) thread.join();
  // The daemon's own status over a CANCELLED that this client's cancel may have made.
  absl::Status rpc_error;
  for (const std::unique_ptr<Call>& call : calls) {
    const grpc::Status status = call->stream->Finish();
    if (status.ok() || (!rpc_error.ok() && status.error_code() == grpc::StatusCode::CANCELLED)) {
      continue;
    }
    if (rpc_error.ok() || rpc_error.code() == absl::StatusCode::kCancelled) {
      rpc_error = FromGrpcStatus(status);
    }
  }
  if (absl::Status s = upload.error(); !s.ok()) return s;
  // A failed Done is the job's own verdict and carries the server's message; report it even
  // though the RPCs then fail with the same status.
  if (!stream_error.ok()) return stream_error;
  if (!rpc_error.ok()) return rpc_error;
  return assembler.Finish();
}

}  // namespace client
}  // namespace gpupipe
