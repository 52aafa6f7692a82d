// The progress bar of `gpupipe submit` on a terminal: the upload (percent, MB/s), then the
// result as it arrives. One line on stderr, redrawn in place at most every 100 ms and erased
// when done, so stdout (the report) stays clean.
//
// Thread safety: Upload() is called from the client's upload thread and Result() from the
// event-reading thread; all methods lock.
#ifndef GPUPIPE_CLIENT_CLI_PROGRESS_H_
#define GPUPIPE_CLIENT_CLI_PROGRESS_H_

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>

namespace gpupipe {
namespace cli {

// One line of the bar, e.g. "upload  42% [########            ]  512.0/1220.0 MB  873.1 MB/s".
// Pure, for tests.
std::string RenderProgressLine(const std::string& phase, int64_t done, int64_t total,
                               double seconds);

class ProgressBar {
 public:
  // Draws on `out` only when `enabled` (the CLI passes: stderr is a terminal and no --json).
  ProgressBar(bool enabled, std::FILE* out);
  ~ProgressBar();  // erases the line

  void Upload(int64_t sent, int64_t total);
  // Result bytes received so far of `total`.
  void Result(int64_t received, int64_t total);
  // Erases the line; later calls draw nothing.
  void Close();

 private:
  void Draw(const std::string& phase, int64_t done, int64_t total, bool force);

  const bool enabled_;
  std::FILE* const out_;
  std::mutex mu_;
  bool drawn_ = false;
  bool closed_ = false;
  // Each phase's rate counts from its own first report (with a backend that streams results
  // during the upload, the two phases interleave).
  std::chrono::steady_clock::time_point upload_start_;
  std::chrono::steady_clock::time_point result_start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace cli
}  // namespace gpupipe

#endif  // GPUPIPE_CLIENT_CLI_PROGRESS_H_
