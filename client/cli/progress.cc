#include "client/cli/progress.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace gpupipe {
namespace cli {
namespace {

constexpr int kBarWidth = 20;
// Redraws at most this often: fast enough to look live, rare enough to cost nothing.
constexpr auto kRedrawInterval = std::chrono::milliseconds(100);

}  // namespace

std::string RenderProgressLine(const std::string& phase, int64_t done, int64_t total,
                               double seconds) {
  const double fraction =
      total > 0 ? std::clamp(static_cast<double>(done) / static_cast<double>(total), 0.0, 1.0)
                : 1.0;
  const int filled = static_cast<int>(fraction * kBarWidth);
  const double rate = seconds > 0 ? static_cast<double>(done) / 1e6 / seconds : 0.0;
  return absl::StrFormat("%-6s %3d%% [%s%s] %7.1f/%.1f MB %7.1f MB/s", phase,
                         static_cast<int>(fraction * 100), std::string(filled, '#'),
                         std::string(kBarWidth - filled, ' '), static_cast<double>(done) / 1e6,
                         static_cast<double>(total) / 1e6, rate);
}

ProgressBar::ProgressBar(bool enabled, std::FILE* out) : enabled_(enabled), out_(out) {}

ProgressBar::~ProgressBar() { Close(); }

void ProgressBar::Upload(int64_t sent, int64_t total) { Draw("upload", sent, total, sent == total); }

void ProgressBar::Result(int64_t received, int64_t total) {
  Draw("result", received, total, received == total);
}

void ProgressBar::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  closed_ = true;
  if (drawn_) {
    std::fputs("\r\033[K", out_);  // back to the line's start and erase it
    std::fflush(out_);
  }
}

void ProgressBar::Draw(const std::string& phase, int64_t done, int64_t total, bool force) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  const auto now = std::chrono::steady_clock::now();
  auto& start = phase == "upload" ? upload_start_ : result_start_;
  if (start == std::chrono::steady_clock::time_point{}) {
    start = now;
    force = true;
  }
  if (!force && now - last_draw_ < kRedrawInterval) return;
  last_draw_ = now;
  const double seconds = std::chrono::duration<double>(now - start).count();
  std::fprintf(out_, "\r\033[K%s", RenderProgressLine(phase, done, total, seconds).c_str());
  std::fflush(out_);
  drawn_ = true;
}

}  // namespace cli
}  // namespace gpupipe
