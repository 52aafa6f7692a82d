// Chunked jobs on the CPU backend: the chunk layout, chunk invariance for every op family,
// results emitted while the input is still arriving, the limit for rows that cannot be split,
// and many concurrent submitters. The CUDA backend runs the same cases in cuda_chunked_test.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "server/engine/planning/chunk_plan.h"
#include "server/engine/backends/cpu/cpu_backend.h"
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

// Engine options for tests of the chunking itself: jobs may ask for chunks of a few bytes.
EngineOptions ChunkingOptions() {
  EngineOptions options;
  options.chunk_policy.min_chunk_bytes = 0;
  return options;
}

JobSpec Spec(std::vector<int64_t> shape, std::vector<OpSpec> ops, int64_t chunk_bytes = 0,
             DType dtype = DType::kFloat32) {
  JobSpec spec;
  spec.dtype = dtype;
  spec.shape = std::move(shape);
  spec.ops = std::move(ops);
  spec.chunk_bytes = chunk_bytes;
  return spec;
}

std::shared_ptr<RecordingSink> RunJob(Engine& engine, const JobSpec& spec,
                                      const std::vector<float>& x) {
  auto sink = std::make_shared<RecordingSink>();
  std::string input = AsBytes(x);
  absl::Status s = engine.Submit(spec, input, sink);
  EXPECT_TRUE(s.ok()) << s;
  if (s.ok()) EXPECT_TRUE(sink->WaitDone(std::chrono::seconds(60)));
  return sink;
}

TEST(ChunkLayout, RowsOfTheOutermostRowOpAreTheUnit) {
  JobSpec spec = Spec({4, 5, 6}, {{OpKind::kSum}, {OpKind::kSoftmax}});
  absl::StatusOr<Plan> plan = PlanJob(spec);
  ASSERT_TRUE(plan.ok());
  // sum over 6, then softmax over the 5 sums: one softmax row covers 30 input elements.
  absl::StatusOr<ChunkLayout> layout = MakeChunkLayout(spec, *plan, 4 * 30 * 3 - 1, 1 << 20);
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->mode, ChunkLayout::Mode::kRows);
  EXPECT_EQ(layout->unit_elements, 30);
  EXPECT_EQ(layout->units, 4);
  EXPECT_EQ(layout->units_per_chunk, 2);
  EXPECT_EQ(layout->chunk_count, 2);
  const Chunk last = ChunkAt(*plan, *layout, 1);
  EXPECT_EQ(last.in_offset, 60);
  EXPECT_EQ(last.in_elements, 60);
  EXPECT_EQ(last.out_offset, 10);
  EXPECT_EQ(last.out_elements, 10);
  ASSERT_EQ(last.plan.steps.size(), 2u);
  EXPECT_EQ(last.plan.steps[0].rows, 10);
  EXPECT_EQ(last.plan.steps[0].cols, 6);
  EXPECT_EQ(last.plan.steps[1].rows, 2);
  EXPECT_EQ(last.plan.steps[1].cols, 5);
}

TEST(ChunkLayout, ReductionsSplitRowsLongerThanAChunk) {
  JobSpec spec = Spec({2, 1000}, {{OpKind::kMean}});
  absl::StatusOr<Plan> plan = PlanJob(spec);
  ASSERT_TRUE(plan.ok());
  absl::StatusOr<ChunkLayout> layout = MakeChunkLayout(spec, *plan, 4 * 300, 1 << 20);
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->mode, ChunkLayout::Mode::kSplitRow);
  EXPECT_EQ(layout->pieces_per_unit, 4);
  EXPECT_EQ(layout->chunk_count, 8);
  const Chunk c = ChunkAt(*plan, *layout, 7);
  EXPECT_EQ(c.out_offset, 1);
  EXPECT_EQ(c.in_offset, 1900);
  EXPECT_EQ(c.in_elements, 100);
  EXPECT_TRUE(c.last_piece);
  EXPECT_EQ(c.plan.steps[0].reduce, kernels::RowReduceKind::kSum);  // the row's mean divides
}

TEST(ChunkLayout, ConvolvePiecesCoverTheRowsOutputsWithTheirHalos) {
  for (ConvolveMode mode : {ConvolveMode::kFull, ConvolveMode::kSame, ConvolveMode::kValid}) {
    JobSpec spec = Spec({2, 1000}, {gpupipe::testing::Convolve(mode, 63)});
    absl::StatusOr<Plan> plan = PlanJob(spec);
    ASSERT_TRUE(plan.ok());
    absl::StatusOr<ChunkLayout> layout = MakeChunkLayout(spec, *plan, 4 * 300, 1 << 20);
    ASSERT_TRUE(layout.ok()) << layout.status();
    ASSERT_EQ(layout->mode, ChunkLayout::Mode::kSplitRowResize);
    const int64_t out_cols = plan->steps[0].out_cols;
    int64_t next_out = 0;
    for (int64_t k = 0; k < layout->chunk_count; ++k) {
      const Chunk c = ChunkAt(*plan, *layout, k);
      SCOPED_TRACE(std::string(ConvolveModeName(mode)) + " chunk " + std::to_string(k));
      EXPECT_TRUE(kernels::IsValidConvolveWindow(c.window, 63));
      EXPECT_EQ(c.out_offset, next_out);  // outputs in order, each once
      EXPECT_LE(c.in_elements, 300);      // the piece and its halo fit the request
      EXPECT_EQ(c.in_offset, c.row * 1000 + c.window.in_begin);
      EXPECT_EQ(c.last_piece, c.out_offset + c.out_elements == (c.row + 1) * out_cols);
      next_out += c.out_elements;
    }
    EXPECT_EQ(next_out, 2 * out_cols);
  }
}

TEST(ChunkLayout, TopkPiecesHoldAtLeastKValuesButTheLast) {
  JobSpec spec = Spec({1, 1000}, {gpupipe::testing::Topk(40)});
  absl::StatusOr<Plan> plan = PlanJob(spec);
  ASSERT_TRUE(plan.ok());
  absl::StatusOr<ChunkLayout> layout = MakeChunkLayout(spec, *plan, 4 * 10, 1 << 20);
  ASSERT_TRUE(layout.ok()) << layout.status();
  ASSERT_EQ(layout->mode, ChunkLayout::Mode::kSplitRowResize);
  EXPECT_EQ(layout->piece_elements, 40);
  EXPECT_EQ(layout->chunk_count, 25);
  const Chunk last = ChunkAt(*plan, *layout, 24);
  EXPECT_EQ(last.plan.steps[0].op.k, 40);
  EXPECT_EQ(last.out_offset, 0);
  EXPECT_TRUE(last.last_piece);
}

TEST(ChunkLayout, ARowThatCannotBeSplitMustFitTheCapacity) {
  JobSpec spec = Spec({2, 1000}, {{OpKind::kSoftmax}});
  absl::StatusOr<Plan> plan = PlanJob(spec);
  ASSERT_TRUE(plan.ok());
  absl::StatusOr<ChunkLayout> fits = MakeChunkLayout(spec, *plan, 100, 4000);
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_EQ(fits->units_per_chunk, 1);
  absl::StatusOr<ChunkLayout> too_long = MakeChunkLayout(spec, *plan, 100, 3999);
  ASSERT_EQ(too_long.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(too_long.status().message().find("softmax"), std::string::npos)
      << too_long.status();
  EXPECT_NE(too_long.status().message().find("--chunk-mib"), std::string::npos);
}

// The input rings ask ChunkSpan for every chunk; it must say what ChunkAt does.
TEST(ChunkLayout, ChunkSpanAgreesWithChunkAtForEveryChunkOfEveryCase) {
  for (const gpupipe::testing::ChunkCase& c : gpupipe::testing::ChunkCases()) {
    for (int64_t chunk_bytes : gpupipe::testing::ChunkSizes(c.shape)) {
      const JobSpec spec = Spec(c.shape, c.ops, chunk_bytes, c.dtype);
      absl::StatusOr<Plan> plan = PlanJob(spec);
      ASSERT_TRUE(plan.ok()) << c.name;
      absl::StatusOr<ChunkLayout> layout = MakeChunkLayout(spec, *plan, chunk_bytes, 1 << 30);
      ASSERT_TRUE(layout.ok()) << c.name << ": " << layout.status();
      for (int64_t k = 0; k < layout->chunk_count; ++k) {
        const Chunk at = ChunkAt(*plan, *layout, k);
        const Chunk span = ChunkSpan(*plan, *layout, k);
        const std::string what = std::string(c.name) + " chunk " + std::to_string(k);
        ASSERT_EQ(span.in_offset, at.in_offset) << what;
        ASSERT_EQ(span.in_elements, at.in_elements) << what;
        ASSERT_EQ(span.out_offset, at.out_offset) << what;
        ASSERT_EQ(span.out_elements, at.out_elements) << what;
        ASSERT_EQ(span.piece, at.piece) << what;
        ASSERT_EQ(span.row, at.row) << what;
        ASSERT_EQ(span.last_piece, at.last_piece) << what;
        ASSERT_EQ(span.window.in_begin, at.window.in_begin) << what;
        ASSERT_EQ(span.window.out_begin, at.window.out_begin) << what;
        ASSERT_TRUE(span.plan.steps.empty()) << what;
      }
    }
  }
}

TEST(ChunkedEngine, EveryChunkingGivesTheWholeJobsResult) {
  auto engine = Engine::Create(CreateCpuBackend({}), ChunkingOptions());
  const uint64_t seed = gpupipe::testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (replay with GPUPIPE_TEST_SEED)");
  int n = 0;
  for (const gpupipe::testing::ChunkCase& c : gpupipe::testing::ChunkCases()) {
    std::vector<float> x =
        gpupipe::testing::ChunkCaseInput(c, ElementCount(c.shape), seed + n++);
    auto whole = RunJob(*engine, Spec(c.shape, c.ops, 0, c.dtype), x);
    ASSERT_TRUE(whole->status().ok()) << c.name << ": " << whole->status();
    EXPECT_EQ(whole->timing().chunks, 1) << c.name;
    for (int64_t chunk_bytes : gpupipe::testing::ChunkSizes(c.shape)) {
      const std::string what = std::string(c.name) + " in chunks of " +
                               std::to_string(chunk_bytes) + " bytes";
      auto got = RunJob(*engine, Spec(c.shape, c.ops, chunk_bytes, c.dtype), x);
      ASSERT_TRUE(got->status().ok()) << what << ": " << got->status();
      EXPECT_EQ(got->info().output_shape, whole->info().output_shape) << what;
      if (whole->info().output_dtype == DType::kInt64 || c.dtype == DType::kInt32) {
        EXPECT_TRUE(got->output() == whole->output()) << what << ": results differ";
        continue;
      }
      const float tol =
          c.split_sum_like ? gpupipe::testing::SplitRowTolerance(c.shape.back()) : 0.0f;
      EXPECT_EQ(gpupipe::testing::CompareFloats(AsFloats(got->output()),
                                                AsFloats(whole->output()), tol),
                "")
          << what;
    }
  }
}

TEST(ChunkedEngine, ResultsStreamWhileTheInputIsStillArriving) {
  auto engine = Engine::Create(CreateCpuBackend({}), ChunkingOptions());
  const int64_t rows = 64, cols = 256;
  std::vector<float> x = gpupipe::testing::RandomFloats(rows * cols, 7);
  const std::string bytes = AsBytes(x);
  auto sink = std::make_shared<RecordingSink>();
  // One row per chunk: the first rows' results can leave before the last rows arrive.
  absl::StatusOr<std::shared_ptr<InputRing>> input =
      engine->SubmitStreamed(Spec({rows, cols}, {{OpKind::kSoftmax}}, 4 * cols), sink);
  ASSERT_TRUE(input.ok()) << input.status();
  const size_t half = bytes.size() / 2;
  ASSERT_TRUE(WriteAll(**input, bytes.data(), static_cast<int64_t>(half)).ok());
  EXPECT_EQ(sink->WaitForOutput(half), half) << "the first half's rows were not emitted";
  ASSERT_TRUE(WriteAll(**input, bytes.data() + half,
                                         static_cast<int64_t>(bytes.size() - half))
                  .ok());
  ASSERT_TRUE(sink->WaitDone());
  ASSERT_TRUE(sink->status().ok()) << sink->status();
  auto whole = RunJob(*engine, Spec({rows, cols}, {{OpKind::kSoftmax}}), x);
  EXPECT_TRUE(sink->output() == whole->output());
  EXPECT_EQ(sink->timing().chunks, rows);
}

TEST(ChunkedEngine, TimelineHasOneComputeEntryPerChunk) {
  auto engine = Engine::Create(CreateCpuBackend({}), ChunkingOptions());
  JobSpec spec = Spec({10, 100}, {{OpKind::kSum}}, 4 * 100 * 3);
  spec.timeline = true;
  auto sink = RunJob(*engine, spec, gpupipe::testing::RandomFloats(1000, 3));
  ASSERT_TRUE(sink->status().ok());
  const JobTiming t = sink->timing();
  EXPECT_EQ(t.chunks, 4);
  ASSERT_EQ(t.timeline.size(), 4u);
  for (size_t i = 0; i < t.timeline.size(); ++i) {
    EXPECT_EQ(t.timeline[i].chunk, static_cast<int>(i));
    EXPECT_EQ(t.timeline[i].stage, "compute");
    EXPECT_LE(t.timeline[i].start_us, t.timeline[i].end_us);
  }
  EXPECT_GT(t.gbps, 0.0);
}

TEST(ChunkedEngine, ARowOverTheCapacityIsResourceExhaustedBeforeItIsAccepted) {
  CpuBackendOptions cpu;
  cpu.chunk_capacity_bytes = 1024;
  auto engine = Engine::Create(CreateCpuBackend(cpu), ChunkingOptions());
  auto rejected = std::make_shared<RecordingSink>();
  std::string bytes = AsBytes(gpupipe::testing::RandomFloats(2000, 5));
  const absl::Status s = engine->Submit(Spec({2, 1000}, {{OpKind::kStandardize}}), bytes, rejected);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_FALSE(rejected->accepted());
  // A reduction splits the same rows instead.
  auto sum = RunJob(*engine, Spec({2, 1000}, {{OpKind::kSum}}),
                    gpupipe::testing::RandomFloats(2000, 5));
  EXPECT_TRUE(sum->status().ok()) << sum->status();
}

TEST(ChunkedEngine, ConcurrentSubmittersOfMixedPrioritiesAndSizesEachGetTheirResult) {
  CpuBackendOptions cpu;
  cpu.lanes_per_level = 2;
  cpu.chunk_bytes = 4096;
  auto engine = Engine::Create(CreateCpuBackend(cpu), ChunkingOptions());
  const uint64_t seed = gpupipe::testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (replay with GPUPIPE_TEST_SEED)");
  constexpr int kSubmitters = 8, kJobsEach = 12;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kSubmitters; ++t) {
    threads.emplace_back([&, t] {
      for (int j = 0; j < kJobsEach; ++j) {
        const int64_t rows = 1 + (t * 7 + j * 13) % 50;
        const int64_t cols = 1 + (t * 31 + j * 17) % 700;
        std::vector<float> x = gpupipe::testing::RandomFloats(rows * cols, seed + t * 100 + j);
        JobSpec spec = Spec({rows, cols}, {{OpKind::kAffine, 2, 1}, {OpKind::kSum}});
        spec.priority = static_cast<Priority>((t + j) % kPriorityLevels);
        auto sink = std::make_shared<RecordingSink>();
        std::string input = AsBytes(x);
        if (!engine->Submit(spec, input, sink).ok() || !sink->WaitDone(std::chrono::seconds(60)) ||
            !sink->status().ok() || sink->done_calls() != 1) {
          ++failures;
          continue;
        }
        std::vector<float> got = AsFloats(sink->output());
        if (static_cast<int64_t>(got.size()) != rows) {
          ++failures;
          continue;
        }
        for (int64_t r = 0; r < rows; ++r) {
          double want = 0;
          for (int64_t c = 0; c < cols; ++c) {
            want += static_cast<double>(std::fmaf(2.0f, x[r * cols + c], 1.0f));
          }
          if (std::fabs(got[r] - want) > gpupipe::testing::SplitRowTolerance(cols) * 3) {
            ++failures;
            break;
          }
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  // A job's Done reaches its sink just before the engine stops counting it.
  for (int i = 0; i < 200 && engine->jobs_in_flight() != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(engine->jobs_in_flight(), 0);
}

}  // namespace
}  // namespace gpupipe::engine
