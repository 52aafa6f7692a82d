// Running jobs never makes an implicitly synchronizing CUDA call (the hazards of the CUDA
// guide's "implicit synchronization": allocations, synchronous memset/memcpy, device-wide
// synchronization, work on the NULL stream). CUPTI's runtime-API callbacks count every call
// the process makes while a steady-state batch of mixed jobs runs, after a warm-up that sees
// each job shape once (graphs are captured then; replays are what a busy service does).
#include <cupti.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "server/engine/backends/cuda/cuda_backend.h"
#include "server/engine/engine.h"
#include "tests/testing/random_tensor.h"
#include "tests/testing/recording_sink.h"

namespace gpupipe::engine {
namespace {

using gpupipe::testing::AsBytes;
using gpupipe::testing::RecordingSink;

struct ApiCounts {
  std::mutex mu;
  std::map<CUpti_CallbackId, int> calls;        // every runtime API call
  std::map<CUpti_CallbackId, std::string> names;
  std::map<std::string, int> null_stream;       // stream-ordered calls on the NULL stream
  std::atomic<bool> recording{false};

  int count(CUpti_CallbackId cbid) {
    std::lock_guard<std::mutex> lock(mu);
    return calls.count(cbid) ? calls[cbid] : 0;
  }
};

bool IsNullStream(cudaStream_t s) {
  return s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread;
}

void CUPTIAPI OnRuntimeApi(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                           const void* data) {
  auto* counts = static_cast<ApiCounts*>(userdata);
  const auto* info = static_cast<const CUpti_CallbackData*>(data);
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API || info->callbackSite != CUPTI_API_ENTER ||
      !counts->recording) {
    return;
  }
  // Only stream-ordered calls name a stream; the others cannot touch the NULL stream.
  bool ordered = true;
  cudaStream_t stream = nullptr;
  switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060:
      stream = static_cast<const cudaLaunchKernelExC_v11060_params*>(info->functionParams)
                   ->config->stream;
      break;
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020:
      stream = static_cast<const cudaMemcpyAsync_v3020_params*>(info->functionParams)->stream;
      break;
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020:
      stream = static_cast<const cudaEventRecord_v3020_params*>(info->functionParams)->stream;
      break;
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000:
      stream = static_cast<const cudaGraphLaunch_v10000_params*>(info->functionParams)->stream;
      break;
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020:
      stream = static_cast<const cudaStreamWaitEvent_v3020_params*>(info->functionParams)->stream;
      break;
    default:
      ordered = false;
      break;
  }
  std::lock_guard<std::mutex> lock(counts->mu);
  ++counts->calls[cbid];
  counts->names[cbid] = info->functionName;
  if (ordered && IsNullStream(stream)) ++counts->null_stream[info->functionName];
}

TEST(HotPath, SteadyStateJobsMakeNoImplicitlySynchronizingCalls) {
  CudaBackendOptions options;
  options.lanes_per_level = 2;
  absl::StatusOr<std::unique_ptr<Backend>> backend = CreateCudaBackend(options);
  if (!backend.ok()) GTEST_SKIP() << "no usable CUDA device: " << backend.status();
  EngineOptions engine_options;
  engine_options.limits.max_input_bytes = 64 << 20;
  engine_options.chunk_policy.min_chunk_bytes = 0;  // jobs that ask for small chunks
  std::unique_ptr<Engine> engine = Engine::Create(*std::move(backend), engine_options);

  ApiCounts counts;
  CUpti_SubscriberHandle subscriber;
  ASSERT_EQ(cuptiSubscribe(&subscriber, reinterpret_cast<CUpti_CallbackFunc>(OnRuntimeApi),
                           &counts),
            CUPTI_SUCCESS);
  ASSERT_EQ(cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API), CUPTI_SUCCESS);

  const uint64_t seed = gpupipe::testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  struct Job {
    std::vector<int64_t> shape;
    std::vector<OpSpec> ops;
    LaunchMode launch;
    int64_t chunk_bytes = 0;  // 0: whole; else the job runs in chunks through the lane's slots
  };
  const std::vector<Job> jobs = {
      {{1 << 20}, {{OpKind::kAffine, 2, 1}, {OpKind::kRelu}}, LaunchMode::kStream},
      {{256, 1000}, {{OpKind::kSoftmax}, {OpKind::kSum}}, LaunchMode::kPdl},
      {{2, 1 << 19}, {{OpKind::kAbs}, {OpKind::kStandardize}}, LaunchMode::kGraph},
      {{4096, 33}, {{OpKind::kSqrt}, {OpKind::kArgmax}}, LaunchMode::kGraphPdl},
      {{1000, 1000}, {{OpKind::kL2Normalize}, {OpKind::kMax}}, LaunchMode::kGraphPdl},
      // Chunked: the copy streams, cross-stream events and per-chunk graphs of the pipeline.
      {{1 << 20}, {{OpKind::kAffine, 2, 1}}, LaunchMode::kAuto, 256 << 10},
      {{512, 1000}, {{OpKind::kSoftmax}}, LaunchMode::kGraphPdl, 100 * 4000 + 12},
      {{3, 100000}, {{OpKind::kSum}}, LaunchMode::kPdl, 30000 * 4},
      {{2, 50000}, {{OpKind::kArgmax}}, LaunchMode::kStream, 4000 * 4},
  };
  auto run_batch = [&](int rounds) {
    std::vector<std::shared_ptr<RecordingSink>> sinks;
    for (int r = 0; r < rounds; ++r) {
      for (size_t j = 0; j < jobs.size(); ++j) {
        JobSpec spec;
        spec.shape = jobs[j].shape;
        spec.ops = jobs[j].ops;
        spec.launch = jobs[j].launch;
        spec.chunk_bytes = jobs[j].chunk_bytes;
        spec.priority = static_cast<Priority>((r + j) % kPriorityLevels);
        int64_t n = 1;
        for (int64_t d : spec.shape) n *= d;
        std::string input = AsBytes(gpupipe::testing::RandomFloats(n, seed + r * 31 + j));
        auto sink = std::make_shared<RecordingSink>();
        EXPECT_TRUE(engine->Submit(spec, input, sink).ok());
        sinks.push_back(sink);
      }
    }
    for (auto& sink : sinks) {
      EXPECT_TRUE(sink->WaitDone(std::chrono::seconds(60)));
      EXPECT_TRUE(sink->status().ok()) << sink->status();
    }
  };
  // Warm-up: every shape once on every lane it can meet (3 levels x 2 lanes). The device
  // arena and pinned staging are allocated once at creation (cudaMalloc, cudaHostAlloc),  and a
  // chunked job only reuses its lane's slots: no allocation, pool or otherwise, per job.
  run_batch(6);
  counts.recording = true;
  run_batch(12);
  counts.recording = false;
  cuptiUnsubscribe(subscriber);

  std::string seen;
  for (const auto& [cbid, n] : counts.calls) {
    seen += counts.names[cbid] + " x" + std::to_string(n) + "\n";
  }
  std::printf("runtime API calls during the steady-state batch:\n%s", seen.c_str());
  // The counting works: the batch's own launches and copies were seen.
  EXPECT_GT(counts.count(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020), 0) << seen;
  EXPECT_GT(counts.count(CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020), 0) << seen;
  EXPECT_GT(counts.count(CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000), 0) << seen;
  EXPECT_GT(counts.count(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060), 0) << seen;
  EXPECT_GT(counts.count(CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020), 0) << seen;
  const std::pair<CUpti_CallbackId, const char*> forbidden[] = {
      {CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, "cudaMalloc"},
      {CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020, "cudaFree"},
      {CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020, "cudaHostAlloc"},
      {CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020, "cudaMallocHost"},
      {CUPTI_RUNTIME_TRACE_CBID_cudaFreeHost_v3020, "cudaFreeHost"},
      {CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020, "cudaMallocAsync"},
      {CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020, "cudaFreeAsync"},
      {CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, "cudaStreamSynchronize"},
      {CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020, "cudaMemset"},
      {CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, "cudaMemcpy"},
      {CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, "cudaDeviceSynchronize"},
      {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, "cudaLaunchKernel (<<<>>>)"},
  };
  for (const auto& [cbid, name] : forbidden) {
    EXPECT_EQ(counts.count(cbid), 0) << name << " on the hot path\n" << seen;
  }
  for (const auto& [name, n] : counts.null_stream) {
    ADD_FAILURE() << name << " x" << n << " on the NULL stream";
  }
}

// What a steady run of one repeated small job ([1, 1024] float32, affine, relu, softmax)
// asks of the runtime: every call counted, the first and last jobs' timing.
struct SmallJobRun {
  std::map<CUpti_CallbackId, int> calls;
  int total = 0;
  std::string seen;  // the calls by name, for failure messages
  JobTiming first, last;
  int count(CUpti_CallbackId cbid) const { return calls.count(cbid) ? calls.at(cbid) : 0; }
};

// Runs `jobs` of the small job, after 20 unrecorded ones, on one lane of a backend with
// `mapped_io_max_bytes`; each result is checked against the reference softmax.
void RunRepeatedSmallJob(int64_t mapped_io_max_bytes, int jobs, SmallJobRun* out) {
  CudaBackendOptions options;
  options.lanes_per_level = 1;
  options.mapped_io_max_bytes = mapped_io_max_bytes;
  absl::StatusOr<std::unique_ptr<Backend>> backend = CreateCudaBackend(options);
  if (!backend.ok()) GTEST_SKIP() << "no usable CUDA device: " << backend.status();
  std::unique_ptr<Engine> engine = Engine::Create(*std::move(backend), EngineOptions{});

  ApiCounts counts;
  CUpti_SubscriberHandle subscriber;
  ASSERT_EQ(cuptiSubscribe(&subscriber, reinterpret_cast<CUpti_CallbackFunc>(OnRuntimeApi),
                           &counts),
            CUPTI_SUCCESS);
  ASSERT_EQ(cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API), CUPTI_SUCCESS);

  const uint64_t seed = gpupipe::testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  JobSpec spec;
  spec.shape = {1, 1024};
  spec.ops = {{OpKind::kAffine, 2, 1}, {OpKind::kRelu}, {OpKind::kSoftmax}};
  auto run = [&](int n, uint64_t salt) {
    for (int j = 0; j < n; ++j) {
      const std::vector<float> x = gpupipe::testing::RandomFloats(1024, seed + salt + j);
      std::string input = AsBytes(x);
      auto sink = std::make_shared<RecordingSink>();
      ASSERT_TRUE(engine->Submit(spec, input, sink).ok());
      ASSERT_TRUE(sink->WaitDone(std::chrono::seconds(60)));
      ASSERT_TRUE(sink->status().ok()) << sink->status();
      // The result is the CPU reference's softmax(relu(2x + 1)).
      const std::string result = sink->output();
      ASSERT_EQ(result.size(), x.size() * sizeof(float));
      std::vector<double> ref(x.size());
      double max = 0, sum = 0;
      for (size_t i = 0; i < x.size(); ++i) max = std::max(max, std::max(0.0, 2.0 * x[i] + 1));
      for (size_t i = 0; i < x.size(); ++i) {
        ref[i] = std::exp(std::max(0.0, 2.0 * x[i] + 1) - max);
        sum += ref[i];
      }
      const float* y = reinterpret_cast<const float*>(result.data());
      for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(y[i], ref[i] / sum, 1e-6) << i;
      out->last = sink->timing();
      if (salt == 0 && j == 0) out->first = out->last;
    }
  };
  run(20, 0);  // the shape's first job launches with PDL, later ones replay its graph
  counts.recording = true;
  run(jobs, 1000);
  counts.recording = false;
  cuptiUnsubscribe(subscriber);
  out->calls = counts.calls;
  for (const auto& [cbid, n] : counts.calls) {
    out->total += n;
    out->seen += counts.names[cbid] + " x" + std::to_string(n) + "\n";
  }
  std::printf("runtime API calls for %d one-chunk jobs:\n%s", jobs, out->seen.c_str());
}

// A small job that copies (one chunk, a repeated shape) runs its copies and kernels on one
// stream, and once its shape repeats, as one graph replay that holds the copies, the kernels
// and the timing events: no cross-stream event waits, and few runtime calls per job, since
// each call is host time on the small-job path (bench/results/service-h200.md). The timing
// read from the events inside the graph still splits the job into its stages.
TEST(HotPath, ARepeatedOneChunkJobThatCopiesRunsOnOneStreamWithFewRuntimeCalls) {
  constexpr int kJobs = 200;
  SmallJobRun r;
  RunRepeatedSmallJob(/*mapped_io_max_bytes=*/0, kJobs, &r);
  if (IsSkipped() || HasFatalFailure()) return;
  EXPECT_EQ(r.count(CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020), 0) << r.seen;
  EXPECT_EQ(r.count(CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000), kJobs) << r.seen;
  // The copies and timing events are inside the replayed graph.
  EXPECT_EQ(r.count(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020), 0) << r.seen;
  EXPECT_EQ(r.count(CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020), 0) << r.seen;
  EXPECT_EQ(r.count(CUPTI_RUNTIME_TRACE_CBID_cudaEventRecordWithFlags_v11010), 0) << r.seen;
  // Per job: the device, one replay, a query and its error reset, one wait and three elapsed
  // times.
  EXPECT_LE(r.total, 9 * kJobs) << r.seen;
  // The last job's stages, timed by the events the graph recorded.
  EXPECT_EQ(r.last.launch, "graph-pdl (auto)");
  EXPECT_EQ(r.last.graph, "hit");
  EXPECT_EQ(r.first.launch, "pdl (auto)");
  EXPECT_GT(r.first.kernels, 0);
  EXPECT_EQ(r.last.kernels, r.first.kernels);  // counted at capture, reported at every replay
  EXPECT_GT(r.last.h2d_us, 0.0);
  EXPECT_GT(r.last.compute_us, 0.0);
  EXPECT_GT(r.last.d2h_us, 0.0);
  EXPECT_LT(r.last.h2d_us + r.last.compute_us + r.last.d2h_us, 10000.0);
}

// The same job within mapped_io_max_bytes (the default) copies nothing: its kernels read the
// staged input and write the result in mapped host memory, and a repeated one is one graph
// replay holding the kernels and their two timing events, with one elapsed time to read.
TEST(HotPath, ARepeatedSmallJobWithoutCopiesIsOneReplayAndNoCopy) {
  constexpr int kJobs = 200;
  SmallJobRun r;
  RunRepeatedSmallJob(CudaBackendOptions{}.mapped_io_max_bytes, kJobs, &r);
  if (IsSkipped() || HasFatalFailure()) return;
  EXPECT_EQ(r.count(CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000), kJobs) << r.seen;
  EXPECT_EQ(r.count(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020), 0) << r.seen;
  EXPECT_EQ(r.count(CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020), 0) << r.seen;
  EXPECT_EQ(r.count(CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020), 0) << r.seen;
  EXPECT_EQ(r.count(CUPTI_RUNTIME_TRACE_CBID_cudaEventRecordWithFlags_v11010), 0) << r.seen;
  EXPECT_EQ(r.count(CUPTI_RUNTIME_TRACE_CBID_cudaEventElapsedTime_v3020) +
                r.count(CUPTI_RUNTIME_TRACE_CBID_cudaEventElapsedTime_v12080),
            kJobs)
      << r.seen;
  // Per job: the device, one replay, a query and its error reset, one wait, one elapsed time.
  EXPECT_LE(r.total, 7 * kJobs) << r.seen;
  EXPECT_EQ(r.first.staging, "direct (mapped host memory)");
  EXPECT_EQ(r.last.staging, "direct (mapped host memory)");
  EXPECT_EQ(r.first.launch, "pdl (auto)");
  EXPECT_EQ(r.last.launch, "graph-pdl (auto)");
  EXPECT_EQ(r.last.graph, "hit");
  EXPECT_EQ(r.last.kernels, r.first.kernels);
  EXPECT_EQ(r.last.h2d_us, 0.0);
  EXPECT_EQ(r.last.d2h_us, 0.0);
  EXPECT_GT(r.last.compute_us, 0.0);
  EXPECT_LT(r.last.compute_us, 10000.0);
}

}  // namespace
}  // namespace gpupipe::engine
