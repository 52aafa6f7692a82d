#include "server/engine/pipeline/input_source.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace gpupipe::engine {
namespace {

class CompleteInput final : public InputSource {
 public:
  explicit CompleteInput(std::string bytes) : bytes_(std::move(bytes)) {}

  int64_t size() const override { return static_cast<int64_t>(bytes_.size()); }
  bool Ready(int64_t, const ByteRange&) const override { return true; }

  absl::StatusOr<InputChunk> Acquire(int64_t, const ByteRange& range) override {
    if (range.begin < 0 || range.end < range.begin || range.end > size()) {
      return absl::InternalError(absl::StrCat("input chunk [", range.begin, ", ", range.end,
                                              ") outside the input's ", size(), " bytes"));
    }
    return InputChunk{bytes_.data() + range.begin, range, /*pinned=*/false};
  }
  void Release(int64_t) override {}
  void Fail(absl::Status) override {}

 private:
  const std::string bytes_;
};

}  // namespace

std::shared_ptr<InputSource> InputSource::Complete(std::string bytes) {
  return std::make_shared<CompleteInput>(std::move(bytes));
}

}  // namespace gpupipe::engine
