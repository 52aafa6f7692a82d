// Jobs through registered regions on the CUDA backend: regions are page-locked at
// registration, chunks DMA straight from the input region (no host staging) and into the
// output region; results are bit-identical to the same job's inline run on the device and
// match the CPU reference, on fresh random data. Skips where no CUDA device is usable.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "server/engine/backends/cpu/cpu_backend.h"
#include "server/engine/backends/cuda/cuda_backend.h"
#include "server/engine/engine.h"
#include "server/engine/job/validate.h"
#include "tests/testing/chunk_cases.h"
#include "tests/testing/random_tensor.h"
#include "tests/testing/recording_sink.h"
#include "tests/testing/region_job.h"

namespace gpupipe::engine {
namespace {

using gpupipe::testing::AsBytes;
using gpupipe::testing::AsFloats;
using gpupipe::testing::OutputBytes;
using gpupipe::testing::RecordingSink;
using gpupipe::testing::RunInline;
using gpupipe::testing::RunThroughRegions;
using gpupipe::testing::TestRegion;

std::unique_ptr<Engine> MakeCudaEngine(std::string* skip) {
  CudaBackendOptions options;
  options.lanes_per_level = 2;
  options.chunk_bytes = 1 << 20;
  options.device_memory_bytes = 64 << 20;
  absl::StatusOr<std::unique_ptr<Backend>> backend = CreateCudaBackend(options);
  if (!backend.ok()) {
    *skip = backend.status().ToString();
    return nullptr;
  }
  EngineOptions engine_options;
  engine_options.limits.max_input_bytes = int64_t{512} << 20;
  engine_options.chunk_policy.min_chunk_bytes = 0;
  return Engine::Create(*std::move(backend), engine_options);
}

TEST(CudaRegions, RegionsArePageLockedAndEveryChunkCaseMatchesTheInlineRun) {
  std::string skip;
  auto cuda = MakeCudaEngine(&skip);
  if (!cuda) GTEST_SKIP() << "no usable CUDA device: " << skip;
  {
    TestRegion probe(*cuda, 4096);
    EXPECT_TRUE(probe.info().pinned);
  }
  const uint64_t seed = gpupipe::testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (replay with GPUPIPE_TEST_SEED)");
  int n = 0;
  for (const gpupipe::testing::ChunkCase& c : gpupipe::testing::ChunkCases()) {
    const int64_t count = ElementCount(c.shape);
    const std::string input = AsBytes(gpupipe::testing::ChunkCaseInput(c, count, seed));
    for (int64_t chunk : {int64_t{0}, 4 * c.shape.back(), int64_t{4 * 997}}) {
      JobSpec spec;
      spec.dtype = c.dtype;
      spec.shape = c.shape;
      spec.ops = c.ops;
      spec.chunk_bytes = chunk;
      const auto want = RunInline(*cuda, spec, input);
      ASSERT_TRUE(want.status.ok()) << c.name << ": " << want.status;
      for (auto [in, out] : {std::pair{true, false}, {false, true}, {true, true}}) {
        SCOPED_TRACE(::testing::Message() << c.name << ", chunk " << chunk << ", input region "
                                          << in << ", output region " << out);
        const auto got = RunThroughRegions(*cuda, spec, input, in, out, OutputBytes(*want.sink));
        ASSERT_TRUE(got.status.ok()) << got.status;
        EXPECT_TRUE(got.output == want.output);
        ++n;
      }
    }
  }
  EXPECT_GT(n, 100);
}

TEST(CudaRegions, ALargeJobDmasStraightFromAndToItsRegionsAndMatchesTheCpu) {
  std::string skip;
  auto cuda = MakeCudaEngine(&skip);
  if (!cuda) GTEST_SKIP() << "no usable CUDA device: " << skip;
  auto cpu = Engine::Create(CreateCpuBackend({}), [] {
    EngineOptions o;
    o.limits.max_input_bytes = int64_t{512} << 20;
    return o;
  }());
  const uint64_t seed = gpupipe::testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const int64_t rows = 64, cols = 1 << 18;  // 64 MiB of float32: 64 chunks of 1 MiB
  const std::vector<float> x = gpupipe::testing::RandomFloats(rows * cols, seed);
  const std::string input = AsBytes(x);
  OpSpec affine{OpKind::kAffine};
  affine.alpha = 2;
  affine.beta = 1;
  for (const std::vector<OpSpec>& ops :
       {std::vector<OpSpec>{affine, {OpKind::kRelu}}, {{OpKind::kSoftmax}}, {{OpKind::kSum}}}) {
    JobSpec spec;
    spec.shape = {rows, cols};
    spec.ops = ops;
    const auto want = RunInline(*cpu, spec, input);
    ASSERT_TRUE(want.status.ok()) << want.status;
    const auto got = RunThroughRegions(*cuda, spec, input, true, true, OutputBytes(*want.sink));
    ASSERT_TRUE(got.status.ok()) << got.status;
    // No host staging: every chunk was copied to the device straight from the region.
    EXPECT_EQ(got.sink->timing().host_staging_us, 0.0);
    EXPECT_EQ(got.sink->timing().chunks, 64);
    const std::vector<float> g = AsFloats(got.output), w = AsFloats(want.output);
    ASSERT_EQ(g.size(), w.size());
    const bool exact = ops[0].kind == OpKind::kAffine;
    for (size_t i = 0; i < g.size(); ++i) {
      const float tol =
          exact ? 0.0f : 2e-4f * std::fabs(w[i]) + 1e-6f + 2e-5f * std::sqrt(float(cols));
      ASSERT_LE(std::fabs(g[i] - w[i]), tol) << "element " << i;
    }
  }
}

}  // namespace
}  // namespace gpupipe::engine
