// engine_bench: the chunked pipeline of the CUDA backend, driven in process through the Engine
// API exactly as the daemon runs jobs (no gRPC). Three measurements, each one JSON line on
// stdout (report.py turns them into bench/results/engine-h200.md), progress on stderr:
//
//  overlap   a chunked job whose copy in, kernels and copy out take about the same time (the op
//            chain is calibrated on the device first): the job's device span (first copy in to
//            last copy out, from its timeline) against the longest of the three stage totals,
//            beside the same job on a backend whose lanes run copies on the compute stream.
//  staging   a 1 GiB elementwise job: the device time of its chunked copies in and out against
//            one raw cudaMemcpyAsync of 1 GiB from/to pinned memory in the same process, and
//            against both raw copies at once (the pipeline's copies in and out overlap); the
//            job's input pageable (through pinned staging), then in the pinned input pool.
//  (report.py's LIMITS says what limits each target.)
//  priority  a small high-priority job's device span (p50/p99) on an idle GPU, while low-
//            priority jobs keep the GPU busy, and while the same load runs at its own priority.
//
// Finishes in well under three minutes on an H200.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/engine/backends/cuda/cuda_backend.h"
#include "server/engine/engine.h"

namespace gpupipe::engine {
namespace {

using Clock = std::chrono::steady_clock;

// A sink that keeps nothing but the byte count, the timing and the status: the benchmark
// measures the engine, not a reader.
class CountingSink final : public JobSink {
 public:
  void OnAccepted(const AcceptedInfo&) override {}
  void OnPlan(const PlanDescription&) override {}
  absl::Status OnChunk(int64_t, const char*, int64_t size) override {
    bytes_ += size;
    return absl::OkStatus();
  }
  void OnTiming(const JobTiming& timing) override { timing_ = timing; }
  void OnDone(const absl::Status& status) override {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = status;
    done_ = true;
    cv_.notify_all();
  }
  absl::Status ReaderStatus() const override { return absl::OkStatus(); }

  absl::Status Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_; });
    return status_;
  }
  const JobTiming& timing() const { return timing_; }
  int64_t bytes() const { return bytes_; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  absl::Status status_;
  JobTiming timing_;
  int64_t bytes_ = 0;
};

std::string Filled(int64_t floats) {
  std::string bytes(static_cast<size_t>(floats) * 4, '\0');
  auto* f = reinterpret_cast<float*>(bytes.data());
  uint32_t s = 12345;
  for (int64_t i = 0; i < floats; ++i) {
    s = s * 1664525u + 1013904223u;
    f[i] = static_cast<float>(s >> 8) * (8.0f / 16777216.0f) - 4.0f;
  }
  return bytes;
}

struct Run {
  absl::Status status;
  JobTiming timing;
  double wall_us = 0;
};

// Jobs share one complete InputSource per input (read-only once complete), so submitters do
// not spend their time copying request bytes.
Run Submit(Engine& engine, const JobSpec& spec, const std::shared_ptr<InputSource>& input) {
  auto sink = std::make_shared<CountingSink>();
  const auto start = Clock::now();
  Run r;
  r.status = engine.Submit(spec, input, sink);
  if (r.status.ok()) r.status = sink->Wait();
  r.wall_us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  r.timing = sink->timing();
  return r;
}

// A streamed job: its input lands in a page-locked ring (the Run RPC's path), written from
// this thread as the job frees buffers, so the time includes the upload's host copy.
Run SubmitStreamed(Engine& engine, const JobSpec& spec, const std::string& bytes) {
  auto sink = std::make_shared<CountingSink>();
  const auto start = Clock::now();
  Run r;
  absl::StatusOr<std::shared_ptr<InputRing>> ring = engine.SubmitStreamed(spec, sink);
  r.status = ring.status();
  if (r.status.ok()) r.status = WriteAll(**ring, bytes);
  if (r.status.ok()) r.status = sink->Wait();
  r.wall_us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  r.timing = sink->timing();
  return r;
}

// First copy in to last copy out, from the job's timeline.
double DeviceSpan(const JobTiming& t) {
  double lo = 1e300, hi = 0;
  for (const auto& e : t.timeline) {
    lo = std::min(lo, e.start_us);
    hi = std::max(hi, e.end_us);
  }
  return t.timeline.empty() ? 0 : hi - lo;
}

// Time a stage's stream sat idle between the job's first and last interval of that stage: what
// the stages before it (for h2d: the host's staging copies) left it waiting.
double StageIdle(const JobTiming& t, const std::string& stage) {
  double first = 1e300, last = 0, busy = 0;
  for (const auto& e : t.timeline) {
    if (e.stage != stage) continue;
    first = std::min(first, e.start_us);
    last = std::max(last, e.end_us);
    busy += e.end_us - e.start_us;
  }
  return busy == 0 ? 0 : (last - first) - busy;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5));
  return v[i];
}

// Threads that help stage pageable input (--copy-threads).
int g_copy_threads = 8;

// A complete input in page-locked memory: the pipeline with no host stage, as an input that
// arrives in an upload's ring is copied to the device.
class PinnedInput final : public InputSource {
 public:
  explicit PinnedInput(const std::string& bytes) : size_(static_cast<int64_t>(bytes.size())) {
    if (cudaHostAlloc(reinterpret_cast<void**>(&data_), bytes.size(), cudaHostAllocDefault) ==
        cudaSuccess) {
      std::memcpy(data_, bytes.data(), bytes.size());
    } else {
      data_ = nullptr;
    }
  }
  ~PinnedInput() override {
    if (data_) cudaFreeHost(data_);
  }
  bool ok() const { return data_ != nullptr; }
  int64_t size() const override { return size_; }
  bool Ready(int64_t, const ByteRange&) const override { return true; }
  absl::StatusOr<InputChunk> Acquire(int64_t, const ByteRange& range) override {
    return InputChunk{data_ + range.begin, range, /*pinned=*/true};
  }
  void Release(int64_t) override {}
  void Fail(absl::Status) override {}

 private:
  const int64_t size_;
  char* data_ = nullptr;
};

std::unique_ptr<Engine> MakeEngine(int lanes, int64_t chunk_bytes, bool copy_streams,
                                   int64_t max_input_bytes, std::string* summary,
                                   bool streaming_host_copies =
                                       CudaBackendOptions{}.streaming_host_copies) {
  CudaBackendOptions options;
  options.streaming_host_copies = streaming_host_copies;
  options.lanes_per_level = lanes;
  options.chunk_bytes = chunk_bytes;
  options.copy_streams = copy_streams;
  options.host_copy_threads = g_copy_threads;
  options.device_memory_fraction = 0.5;
  absl::StatusOr<std::unique_ptr<Backend>> backend = CreateCudaBackend(options);
  if (!backend.ok()) {
    std::fprintf(stderr, "engine_bench: %s\n", backend.status().ToString().c_str());
    return nullptr;
  }
  if (summary) *summary = (*backend)->MemorySummary();
  EngineOptions engine_options;
  engine_options.limits.max_input_bytes = max_input_bytes;
  engine_options.limits.max_stream_input_bytes = max_input_bytes;
  engine_options.limits.max_ops = 256;
  engine_options.admission.max_queued_bytes = int64_t{8} << 30;
  return Engine::Create(*std::move(backend), engine_options);
}

std::vector<OpSpec> Chain(int n) {
  std::vector<OpSpec> ops;
  for (int i = 0; i < n; ++i) ops.push_back({i % 2 ? OpKind::kSigmoid : OpKind::kTanh});
  return ops;
}

// (a) overlap
void BenchOverlap(int64_t job_bytes, int64_t chunk_bytes) {
  std::string summary;
  auto overlapped = MakeEngine(1, chunk_bytes, true, job_bytes, &summary);
  // The backend's default host copies, and the other kind for comparison.
  const bool default_streaming = CudaBackendOptions{}.streaming_host_copies;
  auto other = MakeEngine(1, chunk_bytes, true, job_bytes, nullptr, !default_streaming);
  auto serial = MakeEngine(1, chunk_bytes, false, job_bytes, nullptr);
  if (!overlapped || !other || !serial) return;
  const std::string bytes = Filled(job_bytes / 4);
  const auto input = InputSource::Complete(bytes);
  const auto pinned = std::make_shared<PinnedInput>(bytes);
  if (!pinned->ok()) return;
  JobSpec spec;
  spec.shape = {job_bytes / 4};
  spec.timeline = true;
  spec.priority = Priority::kNormal;
  // Calibrate the chain so that the kernels take about as long as the copy in.
  int ops = 16;
  for (int i = 0; i < 4; ++i) {
    spec.ops = Chain(ops);
    Run r = Submit(*overlapped, spec, input);
    if (!r.status.ok()) {
      std::fprintf(stderr, "overlap: %s\n", r.status.ToString().c_str());
      return;
    }
    const double scale = r.timing.h2d_us / std::max(1.0, r.timing.compute_us);
    std::fprintf(stderr, "overlap calibration: %d ops: h2d %.0f us, compute %.0f us\n", ops,
                 r.timing.h2d_us, r.timing.compute_us);
    const int next = std::clamp(static_cast<int>(ops * scale + 0.5), 1, 256);
    if (std::abs(next - ops) <= std::max(1, ops / 20)) break;
    ops = next;
  }
  spec.ops = Chain(ops);
  // The pipeline with the backend's host staging copies, the same with the other kind
  // (memcpy or non-temporal stores), and everything on one stream. Last, the pipeline on a
  // page-locked input: no host stage at all.
  struct Variant {
    Engine* engine;
    bool copy_streams;
    const char* host_copies;
    bool backend_default;
    std::shared_ptr<InputSource> input;
  };
  const char* default_copies = default_streaming ? "streaming" : "memcpy";
  const char* other_copies = default_streaming ? "memcpy" : "streaming";
  for (const Variant& v : {Variant{overlapped.get(), true, default_copies, true, input},
                           Variant{other.get(), true, other_copies, false, input},
                           Variant{serial.get(), false, default_copies, true, input},
                           Variant{overlapped.get(), true, "none (pinned input)", true, pinned}}) {
    Engine& engine = *v.engine;
    const bool copy_streams = v.copy_streams;
    std::vector<Run> runs;
    for (int rep = 0; rep < 6; ++rep) runs.push_back(Submit(engine, spec, v.input));
    runs.erase(runs.begin());  // graphs captured on the first run
    std::vector<double> span, h2d, compute, d2h, wall, host, h2d_idle, compute_idle;
    for (const Run& r : runs) {
      if (!r.status.ok()) {
        std::fprintf(stderr, "overlap: %s\n", r.status.ToString().c_str());
        return;
      }
      span.push_back(DeviceSpan(r.timing));
      h2d.push_back(r.timing.h2d_us);
      compute.push_back(r.timing.compute_us);
      d2h.push_back(r.timing.d2h_us);
      wall.push_back(r.wall_us);
      host.push_back(r.timing.host_staging_us);
      h2d_idle.push_back(StageIdle(r.timing, "h2d"));
      compute_idle.push_back(StageIdle(r.timing, "compute"));
    }
    const double longest = std::max({Percentile(h2d, 0.5), Percentile(compute, 0.5),
                                     Percentile(d2h, 0.5)});
    // On pageable input the host's staging copy is a stage of the pipeline too (the lane's
    // Stage), and usually its longest.
    const double longest_all = std::max(longest, Percentile(host, 0.5));
    std::printf(
        "{\"bench\":\"overlap\",\"copy_streams\":%s,\"host_copies\":\"%s\","
        "\"backend_default\":%s,"
        "\"job_bytes\":%lld,\"chunk_bytes\":%lld,"
        "\"chunks\":%d,\"ops\":%d,\"span_us\":%.1f,\"h2d_us\":%.1f,\"compute_us\":%.1f,"
        "\"d2h_us\":%.1f,\"longest_us\":%.1f,\"ratio\":%.3f,\"ratio_all\":%.3f,"
        "\"wall_us\":%.1f,"
        "\"host_staging_us\":%.1f,\"h2d_idle_us\":%.1f,\"compute_idle_us\":%.1f,"
        "\"memory\":\"%s\"}\n",
        copy_streams ? "true" : "false", v.host_copies, v.backend_default ? "true" : "false",
        static_cast<long long>(job_bytes),
        static_cast<long long>(chunk_bytes), runs.back().timing.chunks, ops,
        Percentile(span, 0.5), Percentile(h2d, 0.5), Percentile(compute, 0.5),
        Percentile(d2h, 0.5), longest, Percentile(span, 0.5) / longest,
        Percentile(span, 0.5) / longest_all, Percentile(wall, 0.5),
        Percentile(host, 0.5), Percentile(h2d_idle, 0.5), Percentile(compute_idle, 0.5),
        summary.c_str());
    std::fflush(stdout);
  }
}

// (b) pinned staging
void BenchStaging(int64_t job_bytes, int64_t chunk_bytes) {
  const std::string bytes = Filled(job_bytes / 4);
  // The input in pageable memory (through pinned staging), then in the engine's pinned input
  // pool (copied to the device from where it is), as the Run RPC's upload lands it; relu moves
  // as many bytes out as in, so its copies in share the link with copies out. Last, a sum of
  // the same input from the pool: its output is a few bytes, so its copies in run alone.
  struct Case {
    bool pinned;
    OpKind op;
  };
  constexpr Case kCases[] = {{false, OpKind::kRelu}, {true, OpKind::kRelu}, {true, OpKind::kSum}};
  constexpr int kCaseCount = sizeof(kCases) / sizeof(kCases[0]);
  struct Timed {
    std::vector<double> h2d, d2h, wall, span;
  };
  Timed timed[kCaseCount];
  for (int c = 0; c < kCaseCount; ++c) {
    const bool pinned = kCases[c].pinned;
    JobSpec spec;
    spec.shape = {job_bytes / 4};
    spec.ops = {{kCases[c].op}};
    spec.timeline = true;
    auto engine = MakeEngine(1, chunk_bytes, true, job_bytes, nullptr);
    if (!engine) return;
    const std::shared_ptr<InputSource> input = InputSource::Complete(bytes);
    Timed& t = timed[c];
    for (int rep = 0; rep < 4; ++rep) {
      Run r = pinned ? SubmitStreamed(*engine, spec, bytes) : Submit(*engine, spec, input);
      if (!r.status.ok()) {
        std::fprintf(stderr, "staging: %s\n", r.status.ToString().c_str());
        return;
      }
      if (rep == 0) continue;
      t.h2d.push_back(r.timing.h2d_us);
      t.d2h.push_back(r.timing.d2h_us);
      t.wall.push_back(r.wall_us);
      t.span.push_back(DeviceSpan(r.timing));
    }
  }
  // Raw: one copy each way between pinned host memory and the device, timed with events.
  void* h = nullptr;
  void* d = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  if (cudaHostAlloc(&h, job_bytes, cudaHostAllocDefault) != cudaSuccess ||
      cudaMalloc(&d, job_bytes) != cudaSuccess ||
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    std::fprintf(stderr, "staging: raw buffers: %s\n", cudaGetErrorString(cudaGetLastError()));
    return;
  }
  std::memcpy(h, bytes.data(), static_cast<size_t>(job_bytes));
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<double> raw_h2d, raw_d2h, both_h2d, both_d2h;
  for (int rep = 0; rep < 4; ++rep) {
    for (bool to_device : {true, false}) {
      cudaEventRecord(e0, stream);
      cudaMemcpyAsync(to_device ? d : h, to_device ? h : d, job_bytes,
                      to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, stream);
      cudaEventRecord(e1, stream);
      cudaEventSynchronize(e1);
      float ms = 0;
      cudaEventElapsedTime(&ms, e0, e1);
      if (rep > 0) (to_device ? raw_h2d : raw_d2h).push_back(ms * 1000.0);
    }
  }
  // Raw both ways at once, as the pipeline copies (the copy in of chunk k+1 runs beside the
  // copy out of chunk k-1): the link's and the host's bidirectional limit, which a chunked
  // job's per-direction rate cannot exceed.
  void* h2 = nullptr;
  void* d2 = nullptr;
  cudaStream_t stream2 = nullptr;
  cudaEvent_t f0 = nullptr, f1 = nullptr;
  if (cudaHostAlloc(&h2, job_bytes, cudaHostAllocDefault) == cudaSuccess &&
      cudaMalloc(&d2, job_bytes) == cudaSuccess &&
      cudaStreamCreateWithFlags(&stream2, cudaStreamNonBlocking) == cudaSuccess) {
    cudaEventCreate(&f0);
    cudaEventCreate(&f1);
    for (int rep = 0; rep < 4; ++rep) {
      cudaEventRecord(e0, stream);
      cudaEventRecord(f0, stream2);
      cudaMemcpyAsync(d, h, job_bytes, cudaMemcpyHostToDevice, stream);
      cudaMemcpyAsync(h2, d2, job_bytes, cudaMemcpyDeviceToHost, stream2);
      cudaEventRecord(e1, stream);
      cudaEventRecord(f1, stream2);
      cudaEventSynchronize(e1);
      cudaEventSynchronize(f1);
      float ms_in = 0, ms_out = 0;
      cudaEventElapsedTime(&ms_in, e0, e1);
      cudaEventElapsedTime(&ms_out, f0, f1);
      if (rep > 0) {
        both_h2d.push_back(ms_in * 1000.0);
        both_d2h.push_back(ms_out * 1000.0);
      }
    }
    cudaEventDestroy(f0);
    cudaEventDestroy(f1);
  } else {
    std::fprintf(stderr, "staging: bidirectional buffers: %s\n",
                 cudaGetErrorString(cudaGetLastError()));
  }
  if (stream2) cudaStreamDestroy(stream2);
  if (d2) cudaFree(d2);
  if (h2) cudaFreeHost(h2);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaStreamDestroy(stream);
  cudaFree(d);
  cudaFreeHost(h);
  const auto gbs = [&](double us) { return us > 0 ? job_bytes / (us * 1e3) : 0.0; };
  for (int c = 0; c < kCaseCount; ++c) {
    const Timed& t = timed[c];
    const double h2d = Percentile(t.h2d, 0.5), d2h = Percentile(t.d2h, 0.5);
    std::printf(
        "{\"bench\":\"staging\",\"input\":\"%s\",\"op\":\"%s\",\"job_bytes\":%lld,"
        "\"chunk_bytes\":%lld,"
        "\"h2d_us\":%.1f,\"d2h_us\":%.1f,\"raw_h2d_us\":%.1f,\"raw_d2h_us\":%.1f,"
        "\"h2d_gbs\":%.2f,\"d2h_gbs\":%.2f,\"raw_h2d_gbs\":%.2f,\"raw_d2h_gbs\":%.2f,"
        "\"both_h2d_gbs\":%.2f,\"both_d2h_gbs\":%.2f,\"span_us\":%.1f,\"wall_us\":%.1f}\n",
        kCases[c].pinned ? "pinned" : "pageable", kCases[c].op == OpKind::kSum ? "sum" : "relu",
        static_cast<long long>(job_bytes),
        static_cast<long long>(chunk_bytes), h2d, d2h, Percentile(raw_h2d, 0.5),
        Percentile(raw_d2h, 0.5), gbs(h2d), gbs(d2h), gbs(Percentile(raw_h2d, 0.5)),
        gbs(Percentile(raw_d2h, 0.5)), gbs(Percentile(both_h2d, 0.5)),
        gbs(Percentile(both_d2h, 0.5)), Percentile(t.span, 0.5), Percentile(t.wall, 0.5));
  }
  std::fflush(stdout);
}

// (c) priority isolation
constexpr int kLoaders = 3;

void BenchPriority(int probes, int64_t load_bytes, int64_t load_chunk, int load_ops) {
  auto engine = MakeEngine(kLoaders + 1, 16 << 20, true, int64_t{1} << 30, nullptr);
  if (!engine) return;
  JobSpec probe;
  probe.shape = {32, 1024};
  probe.ops = {{OpKind::kSoftmax}};
  probe.timeline = true;
  const auto probe_input = InputSource::Complete(Filled(32 * 1024));
  JobSpec load;
  load.shape = {load_bytes / 4};
  load.ops = Chain(load_ops);
  load.chunk_bytes = load_chunk;
  const auto load_input = InputSource::Complete(Filled(load_bytes / 4));

  struct Case {
    const char* name;
    bool loaded;
    Priority load_priority;
    Priority probe_priority;
  };
  const Case cases[] = {{"idle", false, Priority::kLow, Priority::kHigh},
                        {"low-priority load", true, Priority::kLow, Priority::kHigh},
                        {"same-priority load", true, Priority::kNormal, Priority::kNormal}};
  for (const Case& c : cases) {
    std::atomic<bool> stop{false};
    std::atomic<int64_t> load_jobs{0};
    std::vector<std::thread> loaders;
    if (c.loaded) {
      // kLoaders submitters keep as many lanes of the load's level busy; one more lane of that
      // level stays free for the probe in the same-priority case, so probes do not queue.
      for (int t = 0; t < kLoaders; ++t) {
        loaders.emplace_back([&] {
          JobSpec spec = load;
          spec.priority = c.load_priority;
          while (!stop) {
            Run r = Submit(*engine, spec, load_input);
            if (!r.status.ok()) {
              std::fprintf(stderr, "priority load: %s\n", r.status.ToString().c_str());
              return;
            }
            ++load_jobs;
          }
        });
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    std::vector<double> span, wall;
    probe.priority = c.probe_priority;
    for (int i = 0; i < probes + 10; ++i) {
      Run r = Submit(*engine, probe, probe_input);
      if (!r.status.ok()) {
        std::fprintf(stderr, "priority probe: %s\n", r.status.ToString().c_str());
        break;
      }
      if (i >= 10) {
        span.push_back(DeviceSpan(r.timing));
        wall.push_back(r.wall_us);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    stop = true;
    for (std::thread& t : loaders) t.join();
    std::printf(
        "{\"bench\":\"priority\",\"case\":\"%s\",\"probes\":%zu,\"probe\":\"softmax [32, 1024]\","
        "\"load\":\"%d-op chain on %lld MiB in %lld KiB chunks\",\"load_jobs\":%lld,"
        "\"span_p50_us\":%.1f,\"span_p99_us\":%.1f,\"wall_p50_us\":%.1f,\"wall_p99_us\":%.1f}\n",
        c.name, span.size(), load_ops, static_cast<long long>(load_bytes >> 20),
        static_cast<long long>(load_chunk >> 10), static_cast<long long>(load_jobs.load()),
        Percentile(span, 0.5), Percentile(span, 0.99), Percentile(wall, 0.5),
        Percentile(wall, 0.99));
    std::fflush(stdout);
  }
}

int Main(int argc, char** argv) {
  std::string only;
  int probes = 400;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--only" && i + 1 < argc) only = argv[++i];
    else if (a == "--probes" && i + 1 < argc) probes = std::atoi(argv[++i]);
    else if (a == "--copy-threads" && i + 1 < argc) g_copy_threads = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr,
                   "usage: engine_bench [--only overlap|staging|priority] [--probes N] "
                   "[--copy-threads N]\n");
      return 2;
    }
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    std::fprintf(stderr, "engine_bench: no usable CUDA device\n");
    return 1;
  }
  std::printf("{\"bench\":\"device\",\"name\":\"%s\",\"sms\":%d,\"memory_gib\":%.1f}\n", prop.name,
              prop.multiProcessorCount, prop.totalGlobalMem / double(1 << 30));
  const auto t0 = Clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  if (only.empty() || only == "overlap") {
    BenchOverlap(int64_t{256} << 20, int64_t{8} << 20);
    std::fprintf(stderr, "engine_bench: overlap done after %.1f s\n", elapsed());
  }
  if (only.empty() || only == "staging") {
    BenchStaging(int64_t{1} << 30, int64_t{16} << 20);
    std::fprintf(stderr, "engine_bench: staging done after %.1f s\n", elapsed());
  }
  if (only.empty() || only == "priority") {
    BenchPriority(probes, int64_t{64} << 20, int64_t{2} << 20, 64);
    std::fprintf(stderr, "engine_bench: priority done after %.1f s\n", elapsed());
  }
  return 0;
}

}  // namespace
}  // namespace gpupipe::engine

int main(int argc, char** argv) { return gpupipe::engine::Main(argc, argv); }
