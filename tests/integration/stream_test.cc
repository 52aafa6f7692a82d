// The streaming upload (Run) end to end with the real daemon on the CPU backend: a 2 GiB input
// through the CLI, and a slow reader that must not grow the daemon's memory.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "client/npy.h"
#include "gpupipe/v1/gpupipe.grpc.pb.h"
#include "nlohmann/json.hpp"
#include "tests/integration/binaries.h"
#include "tests/integration/process.h"

namespace gpupipe::testing {
namespace {

// A value of element `i` of the test inputs: k/16 for k in [-128, 128), spread by a hash. Any
// sum of up to 2^17 of them is a multiple of 1/16 below 2^21 in magnitude, so float32 sums are
// exact whatever the order: results compare bit for bit.
float PatternValue(uint64_t i) {
  const uint32_t h = static_cast<uint32_t>((i * 2654435761u) >> 7);
  return static_cast<float>(static_cast<int>(h & 255) - 128) / 16.0f;
}

void FillPattern(uint64_t first, float* out, size_t n) {
  for (size_t k = 0; k < n; ++k) out[k] = PatternValue(first + k);
}

int64_t ResidentBytes(pid_t pid) { return ProcStatusBytes(pid, "VmRSS"); }

using RunStream = grpc::ClientReaderWriter<v1::RunRequest, v1::JobEvent>;

// A relu job over `n` float32 pattern values: writes its spec on `stream` (false when that
// fails), then starts a thread that uploads the pattern in messages of `piece` bytes (whole
// floats), adding each message's bytes to `sent` and ending with WritesDone; `ok` goes false
// where a write fails.
bool StartReluUpload(RunStream* stream, int64_t n, int64_t piece, std::atomic<int64_t>* sent,
                     std::atomic<bool>* ok, std::thread* uploader) {
  v1::RunRequest message;
  v1::SubmitRequest* spec = message.mutable_spec();
  spec->mutable_input()->set_dtype(v1::DTYPE_FLOAT32);
  spec->mutable_input()->add_shape(n);
  spec->add_ops()->mutable_relu();
  if (!stream->Write(message)) return false;
  *uploader = std::thread([stream, bytes = n * 4, piece, sent, ok] {
    v1::RunRequest data_message;
    for (int64_t at = 0; at < bytes; at += piece) {
      const int64_t len = std::min(piece, bytes - at);
      std::string* data = data_message.mutable_data();
      data->resize(static_cast<size_t>(len));
      FillPattern(static_cast<uint64_t>(at / 4), reinterpret_cast<float*>(data->data()),
                  static_cast<size_t>(len / 4));
      if (!stream->Write(data_message)) {
        *ok = false;
        return;
      }
      *sent += len;
    }
    *ok = stream->WritesDone();
  });
  return true;
}

// Reads `stream` to its end and checks that its result chunks are relu of the pattern, in
// order, and that an OK Done came; returns the result's bytes.
int64_t ReadReluResult(RunStream* stream) {
  v1::JobEvent event;
  int64_t offset = 0;
  bool done = false;
  std::vector<float> want;
  while (stream->Read(&event)) {
    if (event.has_chunk()) {
      EXPECT_EQ(event.chunk().offset(), offset);
      const std::string& data = event.chunk().data();
      EXPECT_EQ(data.size() % 4, 0u);
      want.resize(data.size() / 4);
      FillPattern(static_cast<uint64_t>(offset / 4), want.data(), want.size());
      for (float& v : want) v = v > 0 ? v : 0.0f;
      EXPECT_EQ(std::memcmp(data.data(), want.data(), want.size() * 4), 0)
          << "wrong result near byte " << offset;
      offset += static_cast<int64_t>(data.size());
    } else if (event.has_done()) {
      EXPECT_EQ(event.done().code(), 0) << event.done().message();
      done = true;
    }
  }
  EXPECT_TRUE(done);
  return offset;
}

class StreamTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    daemon_ = new DaemonProcess(DaemonBinary(), {"--backend", "cpu", "--quiet"});
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(daemon_->port(), 0) << daemon_->error();
    char tmpl[] = "/tmp/gpupipe-stream-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  static inline DaemonProcess* daemon_ = nullptr;
  std::string dir_;
};

// A .npy of shape [rows, cols] float32 holding PatternValue, written piece by piece (the test
// never holds it whole); returns each row's sum of relu(x), exact.
std::vector<float> WritePatternNpy(const std::string& path, int64_t rows, int64_t cols) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                       std::to_string(rows) + ", " + std::to_string(cols) + "), }";
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::FILE* f = std::fopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr);
  const uint16_t len = static_cast<uint16_t>(header.size());
  std::fwrite("\x93NUMPY\x01\x00", 1, 8, f);
  std::fwrite(&len, 2, 1, f);
  std::fwrite(header.data(), 1, header.size(), f);
  std::vector<float> row(static_cast<size_t>(cols));
  std::vector<float> sums(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    FillPattern(static_cast<uint64_t>(r * cols), row.data(), row.size());
    int64_t sixteenths = 0;
    for (float v : row) sixteenths += v > 0 ? static_cast<int64_t>(v * 16) : 0;
    sums[static_cast<size_t>(r)] = static_cast<float>(sixteenths) / 16.0f;
    EXPECT_EQ(std::fwrite(row.data(), sizeof(float), row.size(), f), row.size());
  }
  EXPECT_EQ(std::fclose(f), 0);
  return sums;
}

TEST_F(StreamTest, TwoGiBInputThroughTheCli) {
  // 2^29 float32 = 2 GiB: 32x the daemon's Submit limit, so only Run can carry it. relu | sum
  // keeps the result small (the slow-reader test below streams a large result); the daemon
  // holds the input twice (upload buffer, CPU backend copy), about 4 GiB.
  const int64_t rows = 1 << 15, cols = 1 << 14;
  const std::string input = dir_ + "/x.npy", output = dir_ + "/y.npy";
  const std::vector<float> want = WritePatternNpy(input, rows, cols);
  const auto start = std::chrono::steady_clock::now();
  const CommandResult r =
      RunCommand({CliBinary(), "--target", daemon_->target(), "--json", "submit", "--input", input,
                  "--ops", "relu | sum", "--output", output, "--transport", "grpc"});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(r.exit_code, 0) << r.err << "\ndaemon log:\n" << daemon_->log();
  // Not a terminal: no progress bar.
  EXPECT_EQ(r.err, "");
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["upload"], "stream");
  EXPECT_EQ(j["timing"]["bytes_in"], int64_t{2} << 30);
  absl::StatusOr<client::NpyArray> y = client::ReadNpy(output);
  ASSERT_TRUE(y.ok()) << y.status();
  ASSERT_EQ(y->shape, std::vector<int64_t>{rows});
  ASSERT_EQ(y->data.size(), want.size() * sizeof(float));
  EXPECT_EQ(std::memcmp(y->data.data(), want.data(), y->data.size()), 0);
  std::printf("2 GiB through Run and back: %.1f s\n", seconds);
}

TEST_F(StreamTest, ASlowReaderHoldsTheJobNotTheDaemonsMemory) {
  // relu on 2^28 float32: 1 GiB in, 1 GiB out.
  const int64_t n = int64_t{1} << 28;
  auto channel = grpc::CreateChannel(daemon_->target(), grpc::InsecureChannelCredentials());
  auto stub = v1::JobService::NewStub(channel);
  grpc::ClientContext context;
  std::unique_ptr<RunStream> stream = stub->Run(&context);
  // The upload runs beside the reader, as a streaming client's must: the daemon takes input
  // only as fast as the job consumes it, and the job waits for the reader.
  std::atomic<int64_t> sent{0};
  std::atomic<bool> upload_ok{true};
  std::thread uploader;
  ASSERT_TRUE(StartReluUpload(stream.get(), n, (1 << 20) - 4096, &sent, &upload_ok, &uploader));

  // Read nothing for 10 s while the job computes and then wants to stream its 1 GiB result.
  int64_t peak = 0;
  for (int i = 0; i < 40; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    peak = std::max(peak, ResidentBytes(daemon_->pid()));
  }
  // The daemon holds the upload's ring (64 MiB by default), the CPU lane's chunk buffers (a
  // few 16 MiB chunks), at most 4 queued result events of under 1 MiB plus one in flight, and
  // gRPC's own buffers (flow-control windows, a few MiB). A daemon that held the input or
  // buffered the result for the slow reader would pass 1 GiB.
  const int64_t bound = int64_t{512} << 20;
  EXPECT_GT(peak, 0);
  EXPECT_LT(peak, bound) << "peak VmRSS " << (peak >> 20) << " MiB while the client read nothing";

  // Now read everything: the result is whole and right.
  EXPECT_EQ(ReadReluResult(stream.get()), n * 4);
  uploader.join();
  EXPECT_TRUE(upload_ok);
  const grpc::Status status = stream->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  std::printf("peak daemon VmRSS while the reader stalled: %lld MiB (bound %lld MiB)\n",
              static_cast<long long>(peak >> 20), static_cast<long long>(bound >> 20));
}

// 14 uploads of 256 MiB each that stop 4 KiB before their end, from clients that read their
// results: each holds at most its ring, so the daemon stays within the configured ring pool
// (plus its lanes' working memory) instead of holding 3.5 GiB, and serves a job afterwards.
TEST(StalledUploads, HoldOnlyTheirRings) {
#if GPUPIPE_SANITIZED
  GTEST_SKIP() << "a resident-memory bound: the sanitizers' shadow memory and quarantine count "
                  "in the processes' RSS in this build";
#endif
  DaemonProcess daemon(DaemonBinary(), {"--backend", "cpu", "--quiet", "--input-ring-mib", "16",
                                        "--input-ring-total-mib", "256", "--rpc-memory-mib",
                                        "128", "--chunk-mib", "4"});
  ASSERT_NE(daemon.port(), 0) << daemon.error();
  const int64_t baseline = ResidentBytes(daemon.pid());
  constexpr int kUploads = 14;
  const int64_t n = int64_t{1} << 26;  // 256 MiB of float32
  const int64_t stop_at = n * 4 - 4096;
  auto channel = grpc::CreateChannel(daemon.target(), grpc::InsecureChannelCredentials());
  auto stub = v1::JobService::NewStub(channel);
  struct Upload {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReaderWriter<v1::RunRequest, v1::JobEvent>> stream;
    std::thread writer, reader;
    std::atomic<int64_t> sent{0};
  };
  std::vector<std::unique_ptr<Upload>> uploads;
  for (int u = 0; u < kUploads; ++u) {
    auto up = std::make_unique<Upload>();
    up->stream = stub->Run(&up->context);
    Upload* p = up.get();
    up->writer = std::thread([p, n, stop_at] {
      v1::RunRequest message;
      v1::SubmitRequest* spec = message.mutable_spec();
      spec->mutable_input()->set_dtype(v1::DTYPE_FLOAT32);
      spec->mutable_input()->add_shape(n);
      spec->add_ops()->mutable_relu();
      if (!p->stream->Write(message)) return;
      v1::RunRequest data;
      const int64_t piece = (1 << 20) - 4096;
      for (int64_t at = 0; at < stop_at; at += piece) {
        const int64_t len = std::min(piece, stop_at - at);
        data.mutable_data()->assign(static_cast<size_t>(len), '\1');
        if (!p->stream->Write(data)) return;
        p->sent = at + len;
      }
    });
    up->reader = std::thread([p] {
      v1::JobEvent event;
      while (p->stream->Read(&event)) {
      }
    });
    uploads.push_back(std::move(up));
  }
  // Wait until no upload moves for 2 s: each is stalled at its end, or on its full ring.
  int64_t last = -1, total = 0;
  for (int i = 0; i < 120; ++i) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    total = 0;
    for (const auto& up : uploads) total += up->sent;
    if (total == last) break;
    last = total;
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const int64_t resident = ResidentBytes(daemon.pid());
  const int64_t peak = ProcStatusBytes(daemon.pid(), "VmHWM");
  // What the configuration allows: the ring pool (256 MiB), gRPC's quota (128 MiB, which gRPC
  // meets by shrinking windows, so it may overshoot a little), the running jobs' lanes (two
  // CPU lanes of normal priority, three 4 MiB chunk buffers each) and 64 MiB for the
  // allocator's slack.
  const int64_t bound = baseline + (int64_t{256 + 128 + 24 + 64} << 20);
  EXPECT_LT(peak, bound) << "peak " << (peak >> 20) << " MiB, baseline " << (baseline >> 20)
                         << " MiB, after " << (total >> 20) << " MiB sent";
  std::printf("14 stalled uploads: %lld MiB sent, daemon VmRSS %lld MiB, VmHWM %lld MiB "
              "(baseline %lld MiB, bound %lld MiB)\n",
              static_cast<long long>(total >> 20), static_cast<long long>(resident >> 20),
              static_cast<long long>(peak >> 20), static_cast<long long>(baseline >> 20),
              static_cast<long long>(bound >> 20));
  for (const auto& up : uploads) up->context.TryCancel();
  for (const auto& up : uploads) {
    up->writer.join();
    up->reader.join();
    up->stream->Finish();
  }
  // The daemon serves a normal job afterwards.
  CommandResult r = RunCommand({CliBinary(), "describe", "--target", daemon.target()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// An upload whose job has stopped (its client reads no results) gets ahead of the job by at
// most what the daemon bounds: its ring, the job's chunks and queued results, and the stream
// window gRPC offers (--rpc-stream-window-kib), which also bounds what the sockets carry. The
// client's channel pins its own window too, so every buffer on the way is bounded. The job
// then completes whole.
TEST(StalledUploads, AStalledUploadIsAheadOnlyByItsRingAndTheWindows) {
  DaemonProcess daemon(DaemonBinary(), {"--backend", "cpu", "--quiet", "--input-ring-mib", "2",
                                        "--chunk-mib", "1", "--rpc-stream-window-kib", "256"});
  ASSERT_NE(daemon.port(), 0) << daemon.error();
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 256 << 10);
  auto channel =
      grpc::CreateCustomChannel(daemon.target(), grpc::InsecureChannelCredentials(), args);
  auto stub = v1::JobService::NewStub(channel);
  grpc::ClientContext context;
  std::unique_ptr<RunStream> stream = stub->Run(&context);
  const int64_t n = int64_t{1} << 25;  // 128 MiB of float32
  std::atomic<int64_t> sent{0};
  std::atomic<bool> upload_ok{true};
  std::thread uploader;
  ASSERT_TRUE(StartReluUpload(stream.get(), n, int64_t{1} << 18, &sent, &upload_ok, &uploader));
  // Read nothing until the upload has not moved for 1 s.
  int64_t last = -1;
  for (int i = 0; i < 60 && sent != last; ++i) {
    last = sent;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  // The ring (2 MiB), the daemon's window (256 KiB), and the job's own: the CPU lane's 1 MiB
  // chunks and the results queued for the client, within 4 MiB. gRPC's automatic window alone
  // would be 4 MiB or more.
  const int64_t ahead = sent;
  const int64_t bound = (int64_t{2} << 20) + (int64_t{256} << 10) + (int64_t{4} << 20);
  EXPECT_LE(ahead, bound) << "the upload got " << ahead << " bytes ahead of a stalled job";
  EXPECT_GT(ahead, 0);
  std::printf("a stalled upload got %.2f MiB ahead of its job (bound %.2f MiB)\n",
              static_cast<double>(ahead) / (1 << 20), static_cast<double>(bound) / (1 << 20));
  EXPECT_EQ(ReadReluResult(stream.get()), n * 4);
  uploader.join();
  EXPECT_TRUE(upload_ok);
  const grpc::Status status = stream->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
}

// Uploads that send their spec and then nothing, one per lane of every priority: each job ends
// with DEADLINE_EXCEEDED once the idle timeout passes, and a job of every priority then runs.
TEST(StalledUploads, AnIdleUploadFreesItsLaneAfterTheIdleTimeout) {
  DaemonProcess daemon(DaemonBinary(), {"--backend", "cpu", "--quiet", "--streams-per-priority",
                                        "1", "--upload-idle-timeout-seconds", "1"});
  ASSERT_NE(daemon.port(), 0) << daemon.error();
  auto channel = grpc::CreateChannel(daemon.target(), grpc::InsecureChannelCredentials());
  auto stub = v1::JobService::NewStub(channel);
  const v1::Priority priorities[] = {v1::PRIORITY_LOW, v1::PRIORITY_NORMAL, v1::PRIORITY_HIGH};
  struct Idle {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReaderWriter<v1::RunRequest, v1::JobEvent>> stream;
  };
  std::vector<std::unique_ptr<Idle>> idle;
  for (v1::Priority p : priorities) {
    auto up = std::make_unique<Idle>();
    up->stream = stub->Run(&up->context);
    v1::RunRequest message;
    v1::SubmitRequest* spec = message.mutable_spec();
    spec->mutable_input()->set_dtype(v1::DTYPE_FLOAT32);
    spec->mutable_input()->add_shape(1 << 20);
    spec->add_ops()->mutable_relu();
    spec->set_priority(p);
    ASSERT_TRUE(up->stream->Write(message));
    idle.push_back(std::move(up));
  }
  const auto start = std::chrono::steady_clock::now();
  for (v1::Priority p : priorities) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    v1::SubmitRequest request;
    request.mutable_input()->set_dtype(v1::DTYPE_FLOAT32);
    request.mutable_input()->add_shape(1);
    const float one = 1.0f;
    request.mutable_input()->set_data(&one, sizeof(one));
    request.add_ops()->mutable_relu();
    request.set_priority(p);
    auto reader = stub->Submit(&context, request);
    v1::JobEvent event;
    int done_code = -1;
    while (reader->Read(&event)) {
      if (event.has_done()) done_code = event.done().code();
    }
    const grpc::Status status = reader->Finish();
    EXPECT_TRUE(status.ok()) << v1::Priority_Name(p) << ": " << status.error_message();
    EXPECT_EQ(done_code, 0) << v1::Priority_Name(p);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  for (const auto& up : idle) {
    v1::JobEvent event;
    int done_code = -1;
    while (up->stream->Read(&event)) {
      if (event.has_done()) done_code = event.done().code();
    }
    const grpc::Status status = up->stream->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
    EXPECT_EQ(done_code, static_cast<int>(grpc::StatusCode::DEADLINE_EXCEEDED));
    EXPECT_NE(status.error_message().find("--upload-idle-timeout-seconds"), std::string::npos)
        << status.error_message();
  }
}

}  // namespace
}  // namespace gpupipe::testing
