// The CLI's memory on a large job: `gpupipe submit --output` sends a 4 GiB input from disk and
// writes the 4 GiB result to disk as it arrives, so its peak resident set stays a small fraction
// of either. GPUPIPE_CLI_MEMORY_TEST_GIB sets another size in GiB (whole, at least 1).
//
// The daemon (CPU backend) may hold the input and output whole; only the CLI is measured.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "client/npy.h"
#include "nlohmann/json.hpp"
#include "tests/integration/binaries.h"
#include "tests/integration/process.h"

namespace gpupipe::testing {
namespace {

constexpr int64_t kCols = int64_t{1} << 16;
// Files are written and compared in blocks of this many bytes. Above glibc's largest mmap
// threshold (32 MiB), so a freed block goes back to the system and does not count into the
// CLI's measured peak (see CommandResult::max_rss_kib).
constexpr int64_t kBlockBytes = int64_t{64} << 20;
constexpr int64_t kMaxCliRssKib = 256 << 10;
constexpr int64_t kMaxDaemonPeakBytes = int64_t{512} << 20;

int64_t TestGib() {
  const char* env = std::getenv("GPUPIPE_CLI_MEMORY_TEST_GIB");
  if (env == nullptr || *env == '\0') return 4;
  const int64_t gib = std::atoll(env);
  return gib >= 1 ? gib : 4;
}

// Element `i` of the input: k/16 for k in [-128, 128), spread by a multiplicative hash. Never
// -0 or NaN, so relu's result is one exact bit pattern.
float PatternValue(uint64_t i) {
  const uint32_t h = static_cast<uint32_t>((i * 2654435761u) >> 7);
  return static_cast<float>(static_cast<int>(h & 255) - 128) / 16.0f;
}

float Relu(float x) { return x > 0 ? x : 0.0f; }

// A float32 .npy header for `shape`, padded so the data starts 64-aligned.
std::string NpyHeader(const std::vector<int64_t>& shape) {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  for (int64_t d : shape) dict += std::to_string(d) + ", ";
  dict += "), }";
  dict.append((64 - (10 + dict.size() + 1) % 64) % 64, ' ');
  dict.push_back('\n');
  const uint16_t len = static_cast<uint16_t>(dict.size());
  return std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(len & 0xff) +
         static_cast<char>(len >> 8) + dict;
}

// pwrite/pread of a whole buffer at `offset`; false on any error or short end of file.
bool WriteAt(int fd, const char* data, int64_t n, int64_t offset) {
  while (n > 0) {
    const ssize_t w = pwrite(fd, data, static_cast<size_t>(n), offset);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= w;
    offset += w;
  }
  return true;
}
bool ReadAt(int fd, char* data, int64_t n, int64_t offset) {
  while (n > 0) {
    const ssize_t r = pread(fd, data, static_cast<size_t>(n), offset);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    data += r;
    n -= r;
    offset += r;
  }
  return true;
}

class CliMemoryTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    daemon_ = new DaemonProcess(
        DaemonBinary(),
        {"--backend", "cpu", "--quiet", "--max-stream-input-gib", std::to_string(TestGib() + 1)});
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(daemon_->port(), 0) << daemon_->error();
    char tmpl[] = "/tmp/gpupipe-cli-memory-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  // The multi-GiB files go whatever the outcome.
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static inline DaemonProcess* daemon_ = nullptr;
  std::string dir_;
};

// Writes the input, [rows, kCols] float32 of PatternValue, one block at a time.
void WriteInput(const std::string& path, int64_t rows) {
  const std::string header = NpyHeader({rows, kCols});
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << path << ": " << std::strerror(errno);
  bool ok = WriteAt(fd, header.data(), static_cast<int64_t>(header.size()), 0);
  const int64_t total = rows * kCols * 4;
  std::vector<float> block(kBlockBytes / 4);
  for (int64_t at = 0; ok && at < total; at += kBlockBytes) {
    const int64_t n = std::min(kBlockBytes, total - at);
    for (int64_t k = 0; k < n / 4; ++k) block[k] = PatternValue(static_cast<uint64_t>(at / 4 + k));
    ok = WriteAt(fd, reinterpret_cast<const char*>(block.data()), n,
                 static_cast<int64_t>(header.size()) + at);
  }
  EXPECT_TRUE(ok) << path << ": write failed: " << std::strerror(errno);
  EXPECT_EQ(close(fd), 0);
}

// Compares the output's data with relu of the input's, block by block, both read from disk.
void ExpectReluOf(const std::string& input, const std::string& output) {
  absl::StatusOr<client::NpyFileInfo> x = client::ReadNpyHeader(input);
  absl::StatusOr<client::NpyFileInfo> y = client::ReadNpyHeader(output);
  ASSERT_TRUE(x.ok()) << x.status();
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->dtype, v1::DTYPE_FLOAT32);
  ASSERT_EQ(y->shape, x->shape);
  ASSERT_EQ(y->data_bytes, x->data_bytes);
  const int xfd = open(input.c_str(), O_RDONLY | O_CLOEXEC);
  const int yfd = open(output.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(xfd, 0);
  ASSERT_GE(yfd, 0);
  std::vector<float> xs(kBlockBytes / 4), ys(kBlockBytes / 4);
  for (int64_t at = 0; at < x->data_bytes; at += kBlockBytes) {
    const int64_t n = std::min(kBlockBytes, x->data_bytes - at);
    ASSERT_TRUE(ReadAt(xfd, reinterpret_cast<char*>(xs.data()), n, x->data_offset + at));
    ASSERT_TRUE(ReadAt(yfd, reinterpret_cast<char*>(ys.data()), n, y->data_offset + at));
    for (int64_t k = 0; k < n / 4; ++k) {
      const float want = Relu(xs[k]);
      if (std::memcmp(&ys[k], &want, 4) != 0) {
        FAIL() << "element " << at / 4 + k << ": relu(" << xs[k] << ") is " << want << ", got "
               << ys[k];
      }
    }
  }
  close(xfd);
  close(yfd);
}

TEST_F(CliMemoryTest, ALargeResultGoesToDiskNotMemory) {
#if GPUPIPE_SANITIZED
  GTEST_SKIP() << "a resident-memory bound: the sanitizers' shadow memory and quarantine count "
                  "in the processes' RSS in this build";
#endif
  const int64_t gib = TestGib();
  const int64_t rows = gib << 12;  // rows x 2^16 float32 = `gib` GiB
  const std::string input = dir_ + "/x.npy", output = dir_ + "/y.npy";
  WriteInput(input, rows);
  ASSERT_FALSE(HasFailure());

  const auto start = std::chrono::steady_clock::now();
  const CommandResult r =
      RunCommand({CliBinary(), "submit", "--input", input, "--ops", "relu", "--output", output,
                  "--json", "--target", daemon_->target(), "--transport", "grpc"});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(r.exit_code, 0) << r.err << "\ndaemon log:\n" << daemon_->log();
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(j["upload"], "stream");
  EXPECT_EQ(j["output"]["path"], output);
  EXPECT_FALSE(j["output"].contains("values"));

  ExpectReluOf(input, output);
  // The temporary file was renamed over y.npy: nothing else is left beside it.
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"x.npy", "y.npy"}));

  // A few MiB of chunks in flight, gRPC's buffers and the binary itself, whatever the size.
  EXPECT_GT(r.max_rss_kib, 0);
  EXPECT_LT(r.max_rss_kib, kMaxCliRssKib)
      << "the CLI's peak RSS was " << r.max_rss_kib / 1024 << " MiB for a " << gib
      << " GiB job";
  // The daemon held the upload's ring (64 MiB by default), a CPU lane's chunk buffers and its
  // gRPC buffers, never the input or the result.
  const int64_t daemon_peak = ProcStatusBytes(daemon_->pid(), "VmHWM");
  EXPECT_GT(daemon_peak, 0);
  EXPECT_LT(daemon_peak, kMaxDaemonPeakBytes)
      << "the daemon's peak RSS was " << (daemon_peak >> 20) << " MiB for a " << gib
      << " GiB job";
  std::printf("%lld GiB through the CLI and back to disk: %.1f s, CLI peak RSS %lld MiB, "
              "daemon peak RSS %lld MiB\n",
              static_cast<long long>(gib), seconds, static_cast<long long>(r.max_rss_kib / 1024),
              static_cast<long long>(daemon_peak >> 20));
}

}  // namespace
}  // namespace gpupipe::testing
