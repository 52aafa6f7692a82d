// Where `gpupipe submit` puts a job's result as it arrives: into the --output file, through
// client::NpyFileWriter, when there is one; and into memory only when the result is small
// enough to be printed (kMaxShownElements), so that a large result is never held whole.
//
// Not thread-safe: the client's event-reading thread feeds it, the same thread finishes it.
#ifndef GPUPIPE_CLIENT_CLI_SUBMIT_OUTPUT_H_
#define GPUPIPE_CLIENT_CLI_SUBMIT_OUTPUT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "client/npy.h"
#include "client/result_assembler.h"
#include "gpupipe/v1/gpupipe.pb.h"

namespace gpupipe {
namespace cli {

class SubmitOutput : public client::ResultSink {
 public:
  // `path`: the --output file, or "" for none. Nothing is created before Begin.
  explicit SubmitOutput(std::string path) : path_(std::move(path)) {}

  // Creates the output's writer (its temporary file and header) when there is a path.
  absl::Status Begin(v1::DType dtype, const std::vector<int64_t>& shape) override;
  absl::Status Write(int64_t offset, absl::string_view data) override;

  // Once the job succeeded: completes the output file (NpyFileWriter::Finish), so that it
  // appears at the path. OK when there is no path. Without a successful Finish, destroying this
  // removes the partial file and leaves the path as it was.
  absl::Status Finish();

  // The first error that Begin, Write or Finish returned, OK if none: a failed job whose error
  // is this one failed on the local file, not at the server.
  const absl::Status& error() const { return error_; }

  // The result's bytes when it has at most kMaxShownElements elements (what the report
  // prints), else "". Moves them out.
  std::string TakeShown() { return std::move(shown_); }

 private:
  absl::Status Record(absl::Status status);

  const std::string path_;
  std::unique_ptr<client::NpyFileWriter> writer_;
  bool keep_shown_ = false;
  std::string shown_;
  absl::Status error_;
};

}  // namespace cli
}  // namespace gpupipe

#endif  // GPUPIPE_CLIENT_CLI_SUBMIT_OUTPUT_H_
