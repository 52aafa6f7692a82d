#include "server/engine/regions/region_io.h"

#include <new>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/engine/regions/guarded_copy.h"

namespace gpupipe::engine {
namespace {

// Chunks a copying region input holds at once: enough for a host lane's window of one chunk
// in flight, one staged and one arriving, and a bound on the job's memory.
constexpr int64_t kCopiedChunks = 3;

class RegionInputSource final : public InputSource {
 public:
  RegionInputSource(std::shared_ptr<HostRegion> region, int64_t offset, int64_t length, bool direct)
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
    const char* at = region_->data() + offset_ + range.begin;
    if (direct_) return InputChunk{at, range, /*pinned=*/true};
    std::string& copy = copies_[k];
    copy.resize(static_cast<size_t>(range.size()));
    if (absl::Status s = GuardedCopy(copy.data(), at, copy.size(), "input_region"); !s.ok()) {
      return s;
    }
    return InputChunk{copy.data(), range, /*pinned=*/false};
  }

  void Release(int64_t k) override { copies_.erase(copies_.begin(), copies_.upper_bound(k)); }
  void Fail(absl::Status) override {}

 private:
  const std::shared_ptr<HostRegion> region_;
  const int64_t offset_;
  const int64_t length_;
  const bool direct_;
  std::map<int64_t, std::string> copies_;  // acquired chunk -> its bytes, when copying
};

}  // namespace

std::shared_ptr<InputSource> RegionInput(std::shared_ptr<HostRegion> region, int64_t offset,
                                         int64_t length, bool direct) {
  return std::make_shared<RegionInputSource>(std::move(region), offset, length, direct);
}

absl::Status RegionOutputSink::OnChunk(int64_t offset, const char* data, int64_t size) {
  char* to = region_->data() + offset_ + offset;
  if (data == to) return absl::OkStatus();  // the lane wrote it in place
  return GuardedCopy(to, data, static_cast<size_t>(size), "output_region");
}

}  // namespace gpupipe::engine
