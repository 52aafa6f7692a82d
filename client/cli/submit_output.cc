#include "client/cli/submit_output.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "client/cli/render.h"
#include "client/dtype.h"

namespace gpupipe {
namespace cli {

absl::Status SubmitOutput::Record(absl::Status status) {
  if (!status.ok() && error_.ok()) error_ = status;
  return status;
}

absl::Status SubmitOutput::Begin(v1::DType dtype, const std::vector<int64_t>& shape) {
  // The assembler has checked the shape; a failure here would be a bug, not the server's.
  keep_shown_ = client::NumElements(shape).value_or(kMaxShownElements + 1) <= kMaxShownElements;
  if (path_.empty()) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<client::NpyFileWriter>> writer =
      client::NpyFileWriter::Create(path_, dtype, shape);
  if (!writer.ok()) return Record(writer.status());
  writer_ = *std::move(writer);
  return absl::OkStatus();
}

absl::Status SubmitOutput::Write(int64_t offset, absl::string_view data) {
  if (keep_shown_) shown_.append(data.data(), data.size());
  if (writer_ == nullptr) return absl::OkStatus();
  return Record(writer_->Write(offset, data));
}

absl::Status SubmitOutput::Finish() {
  if (path_.empty()) return absl::OkStatus();
  if (writer_ == nullptr) {
    return Record(absl::FailedPreconditionError(
        absl::StrCat(path_, ": no result arrived to write (the job was never accepted)")));
  }
  return Record(writer_->Finish());
}

}  // namespace cli
}  // namespace gpupipe
