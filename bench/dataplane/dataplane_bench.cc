// dataplane_bench: a large job's end-to-end rate for a client on the daemon's host, through
// shared-memory regions, against the raw page-locked copy rate measured in the same run.
//
// Peers, each repeated --reps times (median reported):
//   raw      cudaMemcpyAsync of --mib MiB from and to page-locked memory, both directions at
//            once on two streams (a chunked job's copies in and out overlap, so this is its
//            ceiling per direction), and each direction alone;
//   regions  gpupiped as a process (--backend cuda) and a C++ client on this host: the input
//            and output in two registered regions, `relu` over [rows, 2^18] float32, timed
//            from Submit to its Done;
//   stream   the same job through Run (bytes streamed over gRPC over loopback TCP), the path a
//            remote client takes, split over each of --streams N calls (one connection each),
//            twice each, the faster kept.
// The regions' result is checked against the CPU's relu of fresh random input on every rep.
//
// Prints one JSON line per measurement and a summary line; report.py makes the Markdown.
//
// usage: dataplane_bench --daemon PATH [--mib N] [--reps R] [--stream 0|1] [--streams 1,2,4]
//                        [--daemon-args "--rpc-memory-mib 1024 ..."]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "client/job_client.h"
#include "client/shared_memory.h"
#include "tests/integration/process.h"
#include "tests/testing/random_tensor.h"

namespace gpupipe::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string daemon;
  int64_t mib = 1024;
  int reps = 5;
  bool stream = true;
  std::vector<int> streams = {1, 2, 4, 8};
  std::vector<std::string> daemon_args;  // --daemon-args "A B": more flags for gpupiped
};

bool ParseOptions(int argc, char** argv, Options* o) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const char* v = argv[i + 1];
    int flag = 0;
    bool ok = true;
    if (a == "--daemon")
      o->daemon = v;
    else if (a == "--mib")
      ok = absl::SimpleAtoi(v, &o->mib) && o->mib >= 1;
    else if (a == "--reps")
      ok = absl::SimpleAtoi(v, &o->reps) && o->reps >= 1;
    else if (a == "--stream") {
      ok = absl::SimpleAtoi(v, &flag);
      o->stream = flag != 0;
    } else if (a == "--daemon-args") {
      for (absl::string_view arg : absl::StrSplit(v, ' ', absl::SkipEmpty())) {
        o->daemon_args.emplace_back(arg);
      }
    } else if (a == "--streams") {
      o->streams.clear();
      for (absl::string_view n : absl::StrSplit(v, ',')) {
        int calls = 0;
        ok = ok && absl::SimpleAtoi(n, &calls) && calls >= 1;
        o->streams.push_back(calls);
      }
    } else
      return false;
    if (!ok) return false;
  }
  return argc % 2 == 1 && !o->daemon.empty();
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double Gbs(int64_t bytes, double seconds) { return seconds > 0 ? bytes / seconds / 1e9 : 0; }

struct Raw {
  std::vector<double> both_in, both_out, in, out;  // GB/s
};

// Raw page-locked copies, each direction alone and both at once.
bool MeasureRaw(int64_t bytes, int reps, Raw* raw) {
  void *h_in = nullptr, *h_out = nullptr, *d_in = nullptr, *d_out = nullptr;
  cudaStream_t s_in = nullptr, s_out = nullptr;
  cudaEvent_t a0, a1, b0, b1;
  if (cudaHostAlloc(&h_in, bytes, cudaHostAllocDefault) != cudaSuccess ||
      cudaHostAlloc(&h_out, bytes, cudaHostAllocDefault) != cudaSuccess ||
      cudaMalloc(&d_in, bytes) != cudaSuccess || cudaMalloc(&d_out, bytes) != cudaSuccess ||
      cudaStreamCreateWithFlags(&s_in, cudaStreamNonBlocking) != cudaSuccess ||
      cudaStreamCreateWithFlags(&s_out, cudaStreamNonBlocking) != cudaSuccess) {
    std::fprintf(stderr, "raw: %s\n", cudaGetErrorString(cudaGetLastError()));
    return false;
  }
  std::memset(h_in, 1, bytes);
  std::memset(h_out, 2, bytes);
  cudaEventCreate(&a0);
  cudaEventCreate(&a1);
  cudaEventCreate(&b0);
  cudaEventCreate(&b1);
  const auto ms = [](cudaEvent_t x, cudaEvent_t y) {
    float t = 0;
    cudaEventElapsedTime(&t, x, y);
    return t / 1e3;
  };
  for (int rep = 0; rep <= reps; ++rep) {  // rep 0 warms up
    cudaEventRecord(a0, s_in);
    cudaMemcpyAsync(d_in, h_in, bytes, cudaMemcpyHostToDevice, s_in);
    cudaEventRecord(a1, s_in);
    cudaEventSynchronize(a1);
    const double in = ms(a0, a1);
    cudaEventRecord(b0, s_out);
    cudaMemcpyAsync(h_out, d_out, bytes, cudaMemcpyDeviceToHost, s_out);
    cudaEventRecord(b1, s_out);
    cudaEventSynchronize(b1);
    const double out = ms(b0, b1);
    cudaEventRecord(a0, s_in);
    cudaEventRecord(b0, s_out);
    cudaMemcpyAsync(d_in, h_in, bytes, cudaMemcpyHostToDevice, s_in);
    cudaMemcpyAsync(h_out, d_out, bytes, cudaMemcpyDeviceToHost, s_out);
    cudaEventRecord(a1, s_in);
    cudaEventRecord(b1, s_out);
    cudaEventSynchronize(a1);
    cudaEventSynchronize(b1);
    if (rep == 0) continue;
    raw->in.push_back(Gbs(bytes, in));
    raw->out.push_back(Gbs(bytes, out));
    raw->both_in.push_back(Gbs(bytes, ms(a0, a1)));
    raw->both_out.push_back(Gbs(bytes, ms(b0, b1)));
    std::printf(
        "{\"peer\":\"raw\",\"rep\":%d,\"h2d_gbs\":%.2f,\"d2h_gbs\":%.2f,"
        "\"both_h2d_gbs\":%.2f,\"both_d2h_gbs\":%.2f}\n",
        rep, raw->in.back(), raw->out.back(), raw->both_in.back(), raw->both_out.back());
  }
  cudaFreeHost(h_in);
  cudaFreeHost(h_out);
  cudaFree(d_in);
  cudaFree(d_out);
  cudaStreamDestroy(s_in);
  cudaStreamDestroy(s_out);
  return true;
}

v1::SubmitRequest ReluRequest(int64_t rows, int64_t cols) {
  v1::SubmitRequest request;
  request.mutable_input()->set_dtype(v1::DTYPE_FLOAT32);
  request.mutable_input()->add_shape(rows);
  request.mutable_input()->add_shape(cols);
  request.add_ops()->mutable_relu();
  return request;
}

// Elements where `out` is not relu(`in`).
int64_t Mismatches(const float* in, const float* out, int64_t n) {
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float want = in[i] > 0 ? in[i] : 0.0f;
    bad += std::memcmp(&want, &out[i], 4) != 0;
  }
  return bad;
}

int Main(const Options& o) {
  const int64_t cols = int64_t{1} << 18;
  const int64_t rows = std::max<int64_t>(1, (o.mib << 20) / (cols * 4));
  const int64_t bytes = rows * cols * 4;

  Raw raw;
  if (!MeasureRaw(bytes, o.reps, &raw)) return 1;
  cudaDeviceReset();  // the daemon owns the device from here

  std::vector<std::string> daemon_args = {
      "--backend",       "cuda", "--metrics-listen",        "",   "--quiet",
      "--max-input-mib", "64",   "--max-stream-input-gib",  "64", "--max-region-gib",
      "64",              "--max-client-region-gib",          "64"};
  daemon_args.insert(daemon_args.end(), o.daemon_args.begin(), o.daemon_args.end());
  testing::DaemonProcess daemon(o.daemon, daemon_args);
  if (daemon.port() == 0) {
    std::fprintf(stderr, "daemon: %s\n", daemon.error().c_str());
    return 1;
  }
  client::ClientOptions options;
  options.deadline_seconds = 600;
  auto client = client::JobClient::Create(daemon.target(), options);
  if (!client.ok()) return 1;
  auto in = client::SharedMemory::Create(bytes, "gpupipe-bench");
  auto out = client::SharedMemory::Create(bytes, "gpupipe-bench");
  if (!in.ok() || !out.ok()) {
    std::fprintf(stderr, "shm: %s %s\n", in.status().ToString().c_str(),
                 out.status().ToString().c_str());
    return 1;
  }
  const Clock::time_point reg0 = Clock::now();
  auto in_region = (*client)->RegisterRegion((*in)->name());
  auto out_region = (*client)->RegisterRegion((*out)->name());
  const double register_s = std::chrono::duration<double>(Clock::now() - reg0).count();
  if (!in_region.ok() || !out_region.ok()) {
    std::fprintf(stderr, "register: %s %s\n", in_region.status().ToString().c_str(),
                 out_region.status().ToString().c_str());
    return 1;
  }
  std::vector<double> region_gbs;
  int64_t mismatches = 0;
  int failures = 0;
  double last_device_us = 0;
  for (int rep = 0; rep <= o.reps; ++rep) {  // rep 0 warms up
    const uint64_t seed = testing::FreshSeed();
    const std::vector<float> x = testing::RandomFloats(rows * cols, seed);
    std::memcpy((*in)->data(), x.data(), static_cast<size_t>(bytes));
    v1::SubmitRequest request = ReluRequest(rows, cols);
    request.mutable_input_region()->set_region_id(in_region->region_id());
    request.mutable_output_region()->set_region_id(out_region->region_id());
    const Clock::time_point t0 = Clock::now();
    absl::StatusOr<client::JobResult> result = (*client)->Submit(request);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!result.ok()) {
      std::fprintf(stderr, "regions rep %d: %s\n", rep, result.status().ToString().c_str());
      ++failures;
      continue;
    }
    const int64_t bad =
        Mismatches(x.data(), reinterpret_cast<const float*>((*out)->data()), rows * cols);
    mismatches += bad;
    const v1::Timing& t = result->timing;
    last_device_us = t.h2d_us() + t.compute_us() + t.d2h_us();
    std::printf(
        "{\"peer\":\"regions\",\"rep\":%d,\"seconds\":%.4f,\"gbs_each_way\":%.2f,"
        "\"server_total_us\":%.0f,\"h2d_us\":%.0f,\"compute_us\":%.0f,\"d2h_us\":%.0f,"
        "\"host_staging_us\":%.0f,\"chunks\":%d,\"mismatches\":%lld,\"seed\":%llu}\n",
        rep, s, Gbs(bytes, s), t.total_us(), t.h2d_us(), t.compute_us(), t.d2h_us(), 0.0,
        t.chunks(), static_cast<long long>(bad), static_cast<unsigned long long>(seed));
    if (rep > 0) region_gbs.push_back(Gbs(bytes, s));
  }
  double stream_gbs = 0;  // over one call
  for (int calls : o.stream ? o.streams : std::vector<int>()) {
    double best = 0;
    for (int rep = 0; rep < 2; ++rep) {
      const std::vector<float> x = testing::RandomFloats(rows * cols, testing::FreshSeed());
      const char* src = reinterpret_cast<const char*>(x.data());
      int64_t sent = 0;
      std::vector<char> got(static_cast<size_t>(bytes));
      struct Sink : client::ResultSink {
        char* to;
        absl::Status Begin(v1::DType, const std::vector<int64_t>&) override {
          return absl::OkStatus();
        }
        absl::Status Write(int64_t offset, absl::string_view data) override {
          std::memcpy(to + offset, data.data(), data.size());
          return absl::OkStatus();
        }
      } sink;
      sink.to = got.data();
      const Clock::time_point t0 = Clock::now();
      absl::StatusOr<client::JobResult> result = (*client)->Run(
          ReluRequest(rows, cols), bytes,
          [&](char* buffer, int64_t n) {
            std::memcpy(buffer, src + sent, static_cast<size_t>(n));
            sent += n;
            return absl::OkStatus();
          },
          {}, {}, &sink, calls);
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      if (!result.ok()) {
        ++failures;
        std::fprintf(stderr, "stream x%d: %s\n", calls, result.status().ToString().c_str());
        continue;
      }
      const int64_t bad =
          Mismatches(x.data(), reinterpret_cast<const float*>(got.data()), rows * cols);
      mismatches += bad;
      best = std::max(best, Gbs(bytes, s));
      std::printf(
          "{\"peer\":\"stream\",\"streams\":%d,\"rep\":%d,\"seconds\":%.3f,"
          "\"gbs_each_way\":%.3f,\"mismatches\":%lld}\n",
          calls, rep, s, Gbs(bytes, s), static_cast<long long>(bad));
    }
    if (calls == 1) stream_gbs = best;
  }
  (*client)->UnregisterRegion(in_region->region_id()).IgnoreError();
  (*client)->UnregisterRegion(out_region->region_id()).IgnoreError();
  const double both = std::min(Median(raw.both_in), Median(raw.both_out));
  std::printf(
      "{\"summary\":true,\"bytes\":%lld,\"rows\":%lld,\"cols\":%lld,\"reps\":%d,"
      "\"raw_h2d_gbs\":%.2f,\"raw_d2h_gbs\":%.2f,\"raw_both_h2d_gbs\":%.2f,"
      "\"raw_both_d2h_gbs\":%.2f,\"regions_gbs\":%.2f,\"regions_vs_raw_both\":%.3f,"
      "\"stream_gbs\":%.3f,\"register_seconds\":%.3f,\"region_pinned\":%s,"
      "\"device_us\":%.0f,\"mismatches\":%lld,\"failures\":%d}\n",
      static_cast<long long>(bytes), static_cast<long long>(rows), static_cast<long long>(cols),
      o.reps, Median(raw.in), Median(raw.out), Median(raw.both_in), Median(raw.both_out),
      Median(region_gbs), both > 0 ? Median(region_gbs) / both : 0.0, stream_gbs, register_s,
      in_region->pinned() ? "true" : "false", last_device_us, static_cast<long long>(mismatches),
      failures);
  return failures == 0 && mismatches == 0 ? 0 : 1;
}

}  // namespace
}  // namespace gpupipe::bench

int main(int argc, char** argv) {
  gpupipe::bench::Options o;
  if (!gpupipe::bench::ParseOptions(argc, argv, &o)) {
    std::fprintf(stderr,
                 "usage: dataplane_bench --daemon PATH [--mib N] [--reps R] [--stream 0|1] "
                 "[--streams 1,2,4]\n");
    return 2;
  }
  return gpupipe::bench::Main(o);
}
