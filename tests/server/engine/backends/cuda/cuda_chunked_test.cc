// Chunked jobs on the CUDA backend against the CPU backend (the reference), on fresh random
// data: every chunking of every op family, a job many times larger than the device arena,
// concurrent submitters of mixed priorities and sizes, and the per-chunk timeline. Skips where
// no CUDA device is usable.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <thread>

#include "server/engine/backends/cpu/cpu_backend.h"
#include "server/engine/backends/cuda/cuda_backend.h"
#include "server/engine/engine.h"
#include "server/engine/job/validate.h"
#include "tests/testing/chunk_cases.h"
#include "tests/testing/random_tensor.h"
#include "tests/testing/recording_sink.h"

namespace gpupipe::engine {
namespace {

using gpupipe::testing::AsBytes;
using gpupipe::testing::AsFloats;
using gpupipe::testing::RecordingSink;

std::shared_ptr<RecordingSink> RunJob(Engine& engine, const JobSpec& spec,
                                      const std::vector<float>& x) {
  auto sink = std::make_shared<RecordingSink>();
  std::string input = AsBytes(x);
  absl::Status s = engine.Submit(spec, input, sink);
  EXPECT_TRUE(s.ok()) << s;
  if (s.ok()) EXPECT_TRUE(sink->WaitDone(std::chrono::seconds(300)));
  return sink;
}

// The CPU reference, taking inputs as large as the CUDA engine's (the 96 MiB jobs below are
// over the default inline Submit limit).
std::unique_ptr<Engine> MakeCpuEngine() {
  EngineOptions engine_options;
  engine_options.limits.max_input_bytes = int64_t{512} << 20;
  engine_options.chunk_policy.min_chunk_bytes = 0;  // tests of the chunking itself
  return Engine::Create(CreateCpuBackend({}), engine_options);
}

// Input elements per output element (1 for elementwise jobs). Never divides by zero: a job
// that failed or produced nothing counts as one output, so a failure stays an assertion.
int64_t ReducedPerOutput(int64_t count, const RecordingSink& want) {
  const int64_t itemsize = std::max<int64_t>(1, DTypeSize(want.info().output_dtype));
  const int64_t out = static_cast<int64_t>(want.output().size()) / itemsize;
  return count / std::max<int64_t>(1, out);
}

// A small arena: 2 lanes per level, each with 3 slots of 2 buffers of 1 MiB.
std::unique_ptr<Engine> MakeCudaEngine(std::string* skip, int64_t chunk_bytes = 1 << 20,
                                       int64_t device_memory = 64 << 20,
                                       int64_t input_ring_total_bytes = 64 << 20) {
  CudaBackendOptions options;
  options.lanes_per_level = 2;
  options.chunk_bytes = chunk_bytes;
  options.device_memory_bytes = device_memory;
  absl::StatusOr<std::unique_ptr<Backend>> backend = CreateCudaBackend(options);
  if (!backend.ok()) {
    *skip = backend.status().ToString();
    return nullptr;
  }
  EngineOptions engine_options;
  engine_options.limits.max_input_bytes = int64_t{512} << 20;
  engine_options.limits.input_ring_bytes = 4 << 20;
  engine_options.limits.input_ring_total_bytes = input_ring_total_bytes;
  engine_options.chunk_policy.min_chunk_bytes = 0;  // tests of the chunking itself
  return Engine::Create(*std::move(backend), engine_options);
}

// Tolerance of a GPU result against the double-accumulating CPU reference (as in
// cuda_backend_test): relative 2e-4, plus float summation over `reduced` elements, plus the
// split-row combine where rows are split.
std::string Compare(const RecordingSink& got, const RecordingSink& want, bool exact,
                    int64_t reduced, bool split, DType dtype = DType::kFloat32) {
  if (want.info().output_dtype == DType::kInt64 || dtype == DType::kInt32) {
    return got.output() == want.output() ? "" : "results differ";
  }
  const std::vector<float> g = AsFloats(got.output()), w = AsFloats(want.output());
  if (g.size() != w.size()) return "sizes differ";
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(g[i]) && std::isnan(w[i])) continue;
    if (exact) {
      if (std::memcmp(&g[i], &w[i], 4) != 0) {
        return "element " + std::to_string(i) + ": " + std::to_string(g[i]) + " vs " +
               std::to_string(w[i]);
      }
      continue;
    }
    float tol = 2e-4f * std::fabs(w[i]) + 1e-6f +
                (reduced > 1 ? 1e-5f + 2e-5f * std::sqrt(static_cast<float>(reduced)) : 0.0f);
    if (split) tol += gpupipe::testing::SplitRowTolerance(reduced);
    if (!(std::fabs(g[i] - w[i]) <= tol)) {
      return "element " + std::to_string(i) + ": " + std::to_string(g[i]) + " vs " +
             std::to_string(w[i]) + " (tolerance " + std::to_string(tol) + ")";
    }
  }
  return "";
}

// Bit-identical to the reference: IEEE-exact elementwise ops (transcendental opcodes may differ
// from the host's libm by an ulp), optionally ending in min or max (exact in any order).
// Histogram and topk are exact in any order too.
bool Exact(const std::vector<OpSpec>& ops) {
  for (size_t i = 0; i < ops.size(); ++i) {
    switch (ops[i].kind) {
      case OpKind::kAffine: case OpKind::kRelu: case OpKind::kAbs: case OpKind::kSqrt:
        continue;
      case OpKind::kMin: case OpKind::kMax: case OpKind::kTopk: case OpKind::kHistogram:
        if (i + 1 == ops.size()) continue;
        return false;
      default:
        return false;
    }
  }
  return true;
}

bool EndsInResizeOp(const gpupipe::testing::ChunkCase& c) {
  const OpKind last = c.ops.back().kind;
  return last == OpKind::kCumsum || last == OpKind::kHistogram || last == OpKind::kConvolve ||
         last == OpKind::kTopk;
}

// Runs the chunk cases that end in cumsum .. topk (`resize`) or the others in every chunking
// and launch mode, against the CPU reference.
void CheckEveryChunking(bool resize) {
  std::string skip;
  auto cuda = MakeCudaEngine(&skip);
  if (!cuda) GTEST_SKIP() << "no usable CUDA device: " << skip;
  auto cpu = MakeCpuEngine();
  const uint64_t seed = gpupipe::testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (replay with GPUPIPE_TEST_SEED)");
  int n = 0;
  for (const gpupipe::testing::ChunkCase& c : gpupipe::testing::ChunkCases()) {
    if (EndsInResizeOp(c) != resize) continue;
    const int64_t count = ElementCount(c.shape);
    std::vector<float> x = gpupipe::testing::ChunkCaseInput(c, count, seed + n++);
    JobSpec spec;
    spec.dtype = c.dtype;
    spec.shape = c.shape;
    spec.ops = c.ops;
    auto want = RunJob(*cpu, spec, x);
    ASSERT_TRUE(want->status().ok()) << c.name << ": " << want->status();
    // The elements one output sums: a cumsum's output sums up to a row, a convolution's its
    // taps; otherwise the input elements per output.
    const OpKind last = c.ops.back().kind;
    const int64_t reduced = last == OpKind::kCumsum     ? c.shape.back()
                            : last == OpKind::kConvolve ? static_cast<int64_t>(c.ops.back().taps.size())
                                                        : ReducedPerOutput(count, *want);
    // cumsum .. topk: every chunking of the GPU job also matches the whole GPU job, bit for bit
    // (convolve windows compute each output as the whole row does), cumsum within rounding.
    std::shared_ptr<RecordingSink> whole_gpu;
    if (resize) {
      whole_gpu = RunJob(*cuda, spec, x);
      ASSERT_TRUE(whole_gpu->status().ok()) << c.name << ": " << whole_gpu->status();
    }
    for (int64_t chunk_bytes : gpupipe::testing::ChunkSizes(c.shape)) {
      for (LaunchMode launch : {LaunchMode::kAuto, LaunchMode::kStream, LaunchMode::kGraphPdl}) {
        spec.chunk_bytes = chunk_bytes;
        spec.launch = launch;
        const std::string what = std::string(c.name) + " in chunks of " +
                                 std::to_string(chunk_bytes) + " bytes, " +
                                 LaunchModeName(launch);
        auto got = RunJob(*cuda, spec, x);
        ASSERT_TRUE(got->status().ok()) << what << ": " << got->status();
        EXPECT_EQ(got->info().output_shape, want->info().output_shape) << what;
        EXPECT_EQ(Compare(*got, *want, Exact(c.ops), reduced, c.split_sum_like, c.dtype), "")
            << what;
        if (whole_gpu) {
          EXPECT_EQ(Compare(*got, *whole_gpu, last != OpKind::kCumsum, reduced, true, c.dtype), "")
              << what << ", against the whole job on the GPU";
        }
      }
    }
  }
}

TEST(CudaChunked, EveryChunkingMatchesTheCpuReference) { CheckEveryChunking(false); }

// cumsum, histogram, convolve and topk, their rows split into pieces by the smaller chunks.
TEST(CudaChunked, EveryChunkingOfCumsumHistogramConvolveTopkMatchesTheCpuReference) {
  CheckEveryChunking(true);
}

TEST(CudaChunked, AJobLargerThanTheDeviceArenaRunsInChunks) {
  std::string skip;
  // 6 lanes x (6 x 256 KiB + workspace): the arena is a few MiB; the job is 96 MiB.
  auto cuda = MakeCudaEngine(&skip, 256 << 10, 24 << 20);
  if (!cuda) GTEST_SKIP() << "no usable CUDA device: " << skip;
  auto cpu = MakeCpuEngine();
  const uint64_t seed = gpupipe::testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (replay with GPUPIPE_TEST_SEED)");
  struct Case { std::vector<int64_t> shape; std::vector<OpSpec> ops; bool exact; };
  const std::vector<Case> cases = {
      {{24 << 20}, {{OpKind::kAffine, 2, 1}, {OpKind::kRelu}}, true},
      {{3000, 8192}, {{OpKind::kSoftmax}}, false},
      {{4, 6 << 20}, {{OpKind::kSum}}, false},
      {{2, 12 << 20}, {{OpKind::kArgmax}}, true},
      {{2, 12 << 20}, {gpupipe::testing::Histogram(1000, -4, 4)}, true},
      {{2, 12 << 20}, {{OpKind::kAbs}, gpupipe::testing::Topk(40)}, true},
  };
  for (const Case& c : cases) {
    JobSpec spec;
    spec.shape = c.shape;
    spec.ops = c.ops;
    spec.timeline = true;
    const int64_t count = ElementCount(c.shape);
    std::vector<float> x = gpupipe::testing::RandomFloats(count, seed + count);
    auto want = RunJob(*cpu, spec, x);
    ASSERT_TRUE(want->status().ok()) << ShapeString(c.shape) << ": " << want->status();
    auto got = RunJob(*cuda, spec, x);
    ASSERT_TRUE(got->status().ok()) << got->status();
    EXPECT_EQ(Compare(*got, *want, c.exact, ReducedPerOutput(count, *want), true), "")
        << ShapeString(c.shape);
    const JobTiming t = got->timing();
    EXPECT_GT(t.chunks, 100) << ShapeString(c.shape);
    EXPECT_EQ(t.timeline.size(), 3u * static_cast<size_t>(t.chunks));
  }
  // A normalization row over a lane's slot (256 KiB) cannot be split: refused at submission.
  JobSpec spec;
  spec.shape = {2, 1 << 17};
  spec.ops = {{OpKind::kStandardize}};
  auto too_long = std::make_shared<RecordingSink>();
  std::string bytes = AsBytes(gpupipe::testing::RandomFloats(2 << 17, seed));
  const absl::Status refused = cuda->Submit(spec, bytes, too_long);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_FALSE(too_long->accepted());
}

TEST(CudaChunked, TheTimelineOrdersEachChunksStages) {
  std::string skip;
  auto cuda = MakeCudaEngine(&skip, 4 << 20, 256 << 20);
  if (!cuda) GTEST_SKIP() << "no usable CUDA device: " << skip;
  JobSpec spec;
  spec.shape = {16 << 20};
  spec.ops = {{OpKind::kAffine, 2, 1}};
  spec.timeline = true;
  auto got = RunJob(*cuda, spec, gpupipe::testing::RandomFloats(16 << 20, 1));
  ASSERT_TRUE(got->status().ok()) << got->status();
  const JobTiming t = got->timing();
  ASSERT_EQ(t.chunks, 16);
  ASSERT_EQ(t.timeline.size(), 48u);
  for (int k = 0; k < t.chunks; ++k) {
    const auto& h2d = t.timeline[3 * k];
    const auto& compute = t.timeline[3 * k + 1];
    const auto& d2h = t.timeline[3 * k + 2];
    EXPECT_EQ(h2d.stage, "h2d");
    EXPECT_EQ(compute.stage, "compute");
    EXPECT_EQ(d2h.stage, "d2h");
    EXPECT_LE(h2d.end_us, compute.start_us + 1.0) << "chunk " << k;
    EXPECT_LE(compute.end_us, d2h.start_us + 1.0) << "chunk " << k;
  }
  // How much the stages overlapped is the engine benchmark's question (bench/engine); here
  // it is only shown.
  std::printf("16 chunks of 4 MiB: h2d %.0f us, compute %.0f us, d2h %.0f us, end %.0f us\n",
              t.h2d_us, t.compute_us, t.d2h_us, t.timeline.back().end_us);
}

TEST(CudaChunked, ResultsStreamWhileTheInputIsStillArriving) {
  std::string skip;
  auto cuda = MakeCudaEngine(&skip);
  if (!cuda) GTEST_SKIP() << "no usable CUDA device: " << skip;
  auto cpu = MakeCpuEngine();
  const int64_t rows = 64, cols = 4096;
  std::vector<float> x = gpupipe::testing::RandomFloats(rows * cols, gpupipe::testing::FreshSeed());
  const std::string bytes = AsBytes(x);
  auto sink = std::make_shared<RecordingSink>();
  JobSpec spec;
  spec.shape = {rows, cols};
  spec.ops = {{OpKind::kAbs}, {OpKind::kSoftmax}};
  spec.chunk_bytes = 4 * cols;  // one row per chunk
  absl::StatusOr<std::shared_ptr<InputRing>> input = cuda->SubmitStreamed(spec, sink);
  ASSERT_TRUE(input.ok()) << input.status();
  const size_t half = bytes.size() / 2;
  ASSERT_TRUE(WriteAll(**input, bytes.data(), static_cast<int64_t>(half)).ok());
  // The first half's rows leave while the second half is on its way.
  EXPECT_EQ(sink->WaitForOutput(half), half) << "results waited for the whole input";
  ASSERT_TRUE(WriteAll(**input, bytes.data() + half,
                                         static_cast<int64_t>(bytes.size() - half))
                  .ok());
  ASSERT_TRUE(sink->WaitDone());
  ASSERT_TRUE(sink->status().ok()) << sink->status();
  spec.chunk_bytes = 0;
  auto want = RunJob(*cpu, spec, x);
  EXPECT_EQ(Compare(*sink, *want, false, 1, false), "");
}

// Streamed inputs land in page-locked rings and are copied to the device straight from them,
// chunk by chunk as their bytes arrive; inline inputs go through pinned staging; an upload
// that finds the ring pool full is refused; all give the reference's results, and so does
// every priority (low-priority jobs run in smaller chunks).
TEST(CudaChunked, StreamedInlineAndLowPriorityJobsMatchTheCpuReference) {
  std::string skip;
  // Room for two 4 MiB rings.
  auto cuda = MakeCudaEngine(&skip, 1 << 20, 64 << 20, /*input_ring_total_bytes=*/8 << 20);
  if (!cuda) GTEST_SKIP() << "no usable CUDA device: " << skip;
  auto cpu = MakeCpuEngine();
  const uint64_t seed = gpupipe::testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (replay with GPUPIPE_TEST_SEED)");
  const int64_t rows = 300, cols = 4099;  // 4.7 MiB: 5 chunks of the 1 MiB slots
  std::vector<float> x = gpupipe::testing::RandomFloats(rows * cols, seed);
  const std::string bytes = AsBytes(x);
  for (const std::vector<OpSpec>& ops :
       {std::vector<OpSpec>{{OpKind::kAffine, 2, 1}, {OpKind::kRelu}},
        std::vector<OpSpec>{{OpKind::kSoftmax}}, std::vector<OpSpec>{{OpKind::kMax}}}) {
    JobSpec spec;
    spec.shape = {rows, cols};
    spec.ops = ops;
    auto want = RunJob(*cpu, spec, x);
    ASSERT_TRUE(want->status().ok()) << want->status();
    auto first = std::make_shared<RecordingSink>();
    auto second = std::make_shared<RecordingSink>();
    absl::StatusOr<std::shared_ptr<InputRing>> a = cuda->SubmitStreamed(spec, first);
    absl::StatusOr<std::shared_ptr<InputRing>> b = cuda->SubmitStreamed(spec, second);
    ASSERT_TRUE(a.ok() && b.ok()) << a.status() << " " << b.status();
    EXPECT_TRUE((*a)->pinned_memory());
    auto refused = std::make_shared<RecordingSink>();
    EXPECT_EQ(cuda->SubmitStreamed(spec, refused).status().code(),
              absl::StatusCode::kResourceExhausted)
        << "8 MiB hold two 4 MiB rings";
    EXPECT_FALSE(refused->accepted());
    std::thread writer_a([&] { EXPECT_TRUE(WriteAll(**a, bytes).ok()); });
    std::thread writer_b([&] { EXPECT_TRUE(WriteAll(**b, bytes).ok()); });
    writer_a.join();
    writer_b.join();
    a->reset();
    b->reset();
    for (const auto& sink : {first, second}) {
      ASSERT_TRUE(sink->WaitDone(std::chrono::seconds(60)));
      ASSERT_TRUE(sink->status().ok()) << sink->status();
      EXPECT_EQ(Compare(*sink, *want, Exact(ops), ReducedPerOutput(rows * cols, *want), false),
                "")
          << "streamed";
    }
    auto inline_job = RunJob(*cuda, spec, x);
    ASSERT_TRUE(inline_job->status().ok()) << inline_job->status();
    EXPECT_EQ(
        Compare(*inline_job, *want, Exact(ops), ReducedPerOutput(rows * cols, *want), false), "")
        << "inline";
    for (Priority priority : {Priority::kLow, Priority::kHigh}) {
      spec.priority = priority;
      auto got = RunJob(*cuda, spec, x);
      ASSERT_TRUE(got->status().ok()) << got->status();
      EXPECT_EQ(Compare(*got, *want, Exact(ops), ReducedPerOutput(rows * cols, *want), false), "")
          << PriorityName(priority);
      if (priority == Priority::kLow) {
        EXPECT_GE(got->timing().chunks, 9) << "low-priority chunks are at most 512 KiB";
      }
    }
  }
}

TEST(CudaChunked, ProfilingSumsEveryChunksKernels) {
  std::string skip;
  auto cuda = MakeCudaEngine(&skip);
  if (!cuda) GTEST_SKIP() << "no usable CUDA device: " << skip;
  auto cpu = MakeCpuEngine();
  JobSpec spec;
  spec.shape = {30, 1000};
  spec.ops = {{OpKind::kAffine, 2, 1}, {OpKind::kStandardize}, {OpKind::kSum}};
  spec.profile = true;
  spec.chunk_bytes = 4 * 1000 * 7;  // 5 chunks: 4 of 7 rows and one of 2
  std::vector<float> x = gpupipe::testing::RandomFloats(30 * 1000, gpupipe::testing::FreshSeed());
  auto got = RunJob(*cuda, spec, x);
  ASSERT_TRUE(got->status().ok()) << got->status();
  const JobTiming t = got->timing();
  EXPECT_EQ(t.chunks, 5);
  ASSERT_EQ(t.steps.size(), 2u);
  EXPECT_GT(t.steps[0].kernels, 0);
  EXPECT_FALSE(t.kernel_times.empty());
  double kernel_sum = 0, step_sum = 0;
  for (const auto& k : t.kernel_times) kernel_sum += k.device_us;
  for (const auto& s : t.steps) step_sum += s.device_us;
  EXPECT_NEAR(kernel_sum, step_sum, 1e-6 * step_sum + 1e-3);
  spec.profile = false;
  spec.chunk_bytes = 0;
  auto want = RunJob(*cpu, spec, x);
  EXPECT_EQ(Compare(*got, *want, false, 1000, false), "");
}

TEST(CudaChunked, ADeviceMemoryBudgetTooSmallForTheLanesFailsAtStart) {
  CudaBackendOptions options;
  options.device_memory_bytes = 1 << 20;  // six lanes need each 2 MiB of workspace alone
  absl::StatusOr<std::unique_ptr<Backend>> backend = CreateCudaBackend(options);
  if (backend.status().code() == absl::StatusCode::kUnavailable) {
    GTEST_SKIP() << "no usable CUDA device: " << backend.status();
  }
  ASSERT_EQ(backend.status().code(), absl::StatusCode::kResourceExhausted) << backend.status();
  EXPECT_NE(backend.status().message().find("--device-memory"), std::string::npos);

  options.device_memory_bytes = 0;
  options.device_memory_fraction = 0.01;
  options.chunk_bytes = 1 << 20;
  backend = CreateCudaBackend(options);
  ASSERT_TRUE(backend.ok()) << backend.status();
  const std::string summary = (*backend)->MemorySummary();
  EXPECT_NE(summary.find("device arena"), std::string::npos) << summary;
  EXPECT_NE(summary.find("pinned host staging"), std::string::npos) << summary;
  std::printf("%s\n", summary.c_str());
}

TEST(CudaChunked, ConcurrentSubmittersOfMixedPrioritiesAndSizesEachGetTheirResult) {
  std::string skip;
  auto cuda = MakeCudaEngine(&skip, 512 << 10, 64 << 20);
  if (!cuda) GTEST_SKIP() << "no usable CUDA device: " << skip;
  const uint64_t seed = gpupipe::testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (replay with GPUPIPE_TEST_SEED)");
  constexpr int kSubmitters = 12, kJobsEach = 10;
  std::atomic<int> failures{0};
  std::vector<std::string> errors(kSubmitters);
  std::vector<std::thread> threads;
  for (int t = 0; t < kSubmitters; ++t) {
    threads.emplace_back([&, t] {
      for (int j = 0; j < kJobsEach; ++j) {
        const int64_t rows = 1 + (t * 7 + j * 13) % 300;
        const int64_t cols = 1 + ((t * 7919 + j * 104729) % 5) * ((t * 31 + j * 17) % 9000 + 1);
        std::vector<float> x = gpupipe::testing::RandomFloats(rows * cols, seed + t * 100 + j);
        JobSpec spec;
        spec.shape = {rows, cols};
        spec.ops = {{OpKind::kAbs}, {OpKind::kMax}};
        spec.priority = static_cast<Priority>((t + j) % kPriorityLevels);
        spec.launch = j % 2 ? LaunchMode::kAuto : LaunchMode::kPdl;
        auto sink = std::make_shared<RecordingSink>();
        std::string input = AsBytes(x);
        if (!cuda->Submit(spec, input, sink).ok() || !sink->WaitDone(std::chrono::seconds(120)) ||
            !sink->status().ok() || sink->done_calls() != 1) {
          ++failures;
          errors[t] = sink->status().ToString();
          continue;
        }
        std::vector<float> got = AsFloats(sink->output());
        bool ok = static_cast<int64_t>(got.size()) == rows;
        for (int64_t r = 0; ok && r < rows; ++r) {
          float want = 0;
          for (int64_t c = 0; c < cols; ++c) want = std::max(want, std::fabs(x[r * cols + c]));
          ok = got[r] == want;
        }
        if (!ok) {
          ++failures;
          errors[t] = "wrong result for " + ShapeString(spec.shape);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& e : errors) EXPECT_EQ(e, "");
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(cuda->jobs_in_flight(), 0);
}

}  // namespace
}  // namespace gpupipe::engine
