#include "server/engine/regions/region_io.h"

#include <new>
#include <utility>

#include "absl/strings/str_cat.h"

namespace gpupipe::engine {
namespace {

// Chunks a copying region input holds at once: enough for a host lane's window of one chunk
// in flight, one staged and one arriving, and a bound on the job's memory.
constexpr int64_t kCopiedChunks = 3;

class RegionInputSource final : public InputSource {
 public:
  RegionInputSource(std::shared_ptr<Region> region, int64_t offset, int64_t length, bool direct)
      : region_(std::move(region)), offset_(offset), length_(length), direct_(direct) {}

  int64_t size() const override { return length_; }
  int64_t max_held_chunks() const override {
    return direct_ ? InputSource::max_held_chunks() : kCopiedChunks;
  }
  bool Ready(int64_t, const ByteRange&) const override { return true; }

  absl::StatusOr<InputChunk> Acquire(int64_t k, const ByteRange& range) override {
    if (range.begin < 0 || range.end < range.begin || range.end > length_) {
      return absl::InternalError(absl::StrCat("input chunk [", range.begin, ", ", range.end,
                                              ") outside the input's ", length_, " bytes"));
    }
    if (direct_) {
      InputChunk chunk{region_->data() + offset_ + range.begin, range, region_->pinned()};
      chunk.device = region_->device();
      return chunk;
    }
    std::string& copy = copies_[k];
    copy.resize(static_cast<size_t>(range.size()));
    if (absl::Status s =
            region_->CopyOut(copy.data(), offset_ + range.begin, range.size(), "input_region");
        !s.ok()) {
      return s;
    }
    return InputChunk{copy.data(), range, /*pinned=*/false};
  }

  void Release(int64_t k) override { copies_.erase(copies_.begin(), copies_.upper_bound(k)); }
  void Fail(absl::Status) override {}

 private:
  const std::shared_ptr<Region> region_;
  const int64_t offset_;
  const int64_t length_;
  const bool direct_;
  std::map<int64_t, std::string> copies_;  // acquired chunk -> its bytes, when copying
};

}  // namespace

std::shared_ptr<InputSource> RegionInput(std::shared_ptr<Region> region, int64_t offset,
                                         int64_t length, bool direct) {
  return std::make_shared<RegionInputSource>(std::move(region), offset, length, direct);
}

absl::Status RegionOutputSink::OnChunk(int64_t offset, const char* data, int64_t size) {
  if (data == region_->data() + offset_ + offset) return absl::OkStatus();  // written in place
  return region_->CopyIn(offset_ + offset, data, size, "output_region");
}

}  // namespace gpupipe::engine
