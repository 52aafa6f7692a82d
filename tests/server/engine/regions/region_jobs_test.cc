// Jobs through registered regions on the CPU backend: the same bytes as the inline path for
// every op family and dtype and for chunked jobs, clear errors for bad slices, and a daemon
// that survives a client shrinking, unlinking or unregistering a region mid-job. The CUDA
// backend runs the same comparison in cuda_region_test.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "server/engine/backends/cpu/cpu_backend.h"
#include "server/engine/engine.h"
#include "tests/testing/chunk_cases.h"
#include "tests/testing/random_tensor.h"
#include "tests/testing/recording_sink.h"
#include "tests/testing/region_job.h"

namespace gpupipe::engine {
namespace {

using gpupipe::testing::AsBytes;
using gpupipe::testing::OutputBytes;
using gpupipe::testing::RecordingSink;
using gpupipe::testing::RunInline;
using gpupipe::testing::RunThroughRegions;
using gpupipe::testing::TestRegion;

EngineOptions ChunkingOptions() {
  EngineOptions options;
  options.chunk_policy.min_chunk_bytes = 0;
  return options;
}

TEST(RegionJobs, EveryChunkCaseGivesTheInlineBytes) {
  auto engine = Engine::Create(CreateCpuBackend({}), ChunkingOptions());
  const uint64_t seed = gpupipe::testing::FreshSeed();
  for (const gpupipe::testing::ChunkCase& c : gpupipe::testing::ChunkCases()) {
    int64_t count = 1;
    for (int64_t d : c.shape) count *= d;
    const std::string input = AsBytes(gpupipe::testing::ChunkCaseInput(c, count, seed));
    // The whole job, chunks of about a row, and odd chunks that split rows.
    for (int64_t chunk : {int64_t{0}, 4 * c.shape.back(), int64_t{4 * 997}}) {
      JobSpec spec;
      spec.dtype = c.dtype;
      spec.shape = c.shape;
      spec.ops = c.ops;
      spec.chunk_bytes = chunk;
      const auto want = RunInline(*engine, spec, input);
      ASSERT_TRUE(want.status.ok()) << c.name << ": " << want.status;
      for (auto [in, out] : {std::pair{true, false}, {false, true}, {true, true}}) {
        SCOPED_TRACE(::testing::Message() << c.name << ", chunk " << chunk << ", input region "
                                          << in << ", output region " << out << ", seed " << seed);
        const auto got = RunThroughRegions(*engine, spec, input, in, out, OutputBytes(*want.sink));
        ASSERT_TRUE(got.status.ok()) << got.status;
        EXPECT_TRUE(got.output == want.output);
      }
    }
  }
}

TEST(RegionJobs, EveryDtypeGivesTheInlineBytes) {
  auto engine = Engine::Create(CreateCpuBackend({}), EngineOptions{});
  const uint64_t seed = gpupipe::testing::FreshSeed();
  OpSpec affine{OpKind::kAffine};
  affine.alpha = 2;
  affine.beta = 1;
  const std::vector<std::vector<OpSpec>> pipelines = {
      {affine, {OpKind::kRelu}},  {{OpKind::kAbs}},    {{OpKind::kSum}},
      {{OpKind::kArgmax}},        {{OpKind::kCumsum}}, {{OpKind::kSoftmax}},
      {gpupipe::testing::Topk(3)}};
  int ran = 0;
  for (DType dtype :
       {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kInt32, DType::kInt64}) {
    const std::vector<int64_t> shape = {33, 65};
    std::string input(static_cast<size_t>(33 * 65 * DTypeSize(dtype)), '\0');
    // Random bytes of small integers: valid in every dtype (no NaN payload games).
    const std::vector<float> x = gpupipe::testing::RandomFloats(33 * 65, seed);
    for (size_t i = 0; i < x.size(); ++i) {
      const double v = std::round(x[i] * 4);
      switch (dtype) {
        case DType::kFloat32: {
          float f = static_cast<float>(v);
          std::memcpy(&input[i * 4], &f, 4);
          break;
        }
        case DType::kFloat64:
          std::memcpy(&input[i * 8], &v, 8);
          break;
        case DType::kFloat16: {
          // Small integers are exact in float16: sign, exponent and mantissa by hand.
          const uint16_t h =
              v == 0 ? 0
                     : static_cast<uint16_t>(
                           (v < 0 ? 0x8000 : 0) |
                           ((15 + static_cast<int>(std::floor(std::log2(std::fabs(v))))) << 10) |
                           static_cast<uint16_t>(
                               (std::fabs(v) / std::exp2(std::floor(std::log2(std::fabs(v)))) - 1) *
                               1024));
          std::memcpy(&input[i * 2], &h, 2);
          break;
        }
        case DType::kInt32: {
          int32_t k = static_cast<int32_t>(v);
          std::memcpy(&input[i * 4], &k, 4);
          break;
        }
        case DType::kInt64: {
          int64_t k = static_cast<int64_t>(v);
          std::memcpy(&input[i * 8], &k, 8);
          break;
        }
      }
    }
    for (const std::vector<OpSpec>& ops : pipelines) {
      JobSpec spec;
      spec.dtype = dtype;
      spec.shape = shape;
      spec.ops = ops;
      const auto want = RunInline(*engine, spec, input);
      SCOPED_TRACE(::testing::Message()
                   << DTypeName(dtype) << ", op " << static_cast<int>(ops[0].kind));
      const auto got = RunThroughRegions(*engine, spec, input, true, true, OutputBytes(*want.sink));
      // An op the dtype does not take is refused the same way on both paths.
      EXPECT_EQ(got.status.code(), want.status.code()) << got.status << " vs " << want.status;
      if (!want.status.ok()) continue;
      ++ran;
      EXPECT_TRUE(got.output == want.output);
    }
  }
  EXPECT_GE(ran, 25);  // most pairs are valid; the test must not pass by refusing them all
}

class RegionErrors : public ::testing::Test {
 protected:
  RegionErrors() : engine_(Engine::Create(CreateCpuBackend({}), EngineOptions{})) {
    spec_.shape = {4, 8};
    spec_.ops = {{OpKind::kRelu}};
    spec_.client = "alice";
  }
  absl::Status Submit(const JobRegions& regions, std::string input = "") {
    return engine_->Submit(spec_, input, regions, std::make_shared<RecordingSink>());
  }
  std::unique_ptr<Engine> engine_;
  JobSpec spec_;
};

TEST_F(RegionErrors, BadSlicesUnknownAndForeignRegionsAreRefusedByName) {
  TestRegion region(*engine_, 256, "alice");
  TestRegion bobs(*engine_, 256, "bob");
  struct Case {
    const char* what;
    JobRegions regions;
    std::string input;
    absl::StatusCode code;
    const char* message;
  };
  const Case cases[] = {
      {"input past the end",
       {RegionSlice{region.id(), 200, 0}, {}},
       "",
       absl::StatusCode::kInvalidArgument,
       "input_region: 128 bytes at offset 200"},
      {"length not the tensor's",
       {RegionSlice{region.id(), 0, 100}, {}},
       "",
       absl::StatusCode::kInvalidArgument,
       "input_region.length: 100 bytes do not match"},
      {"bytes and a region",
       {RegionSlice{region.id(), 0, 0}, {}},
       std::string(128, '\0'),
       absl::StatusCode::kInvalidArgument,
       "input.data: must be empty"},
      {"unknown region",
       {RegionSlice{"r-0123", 0, 0}, {}},
       "",
       absl::StatusCode::kNotFound,
       "input_region.region_id: no region 'r-0123'"},
      {"another client's",
       {RegionSlice{bobs.id(), 0, 0}, {}},
       "",
       absl::StatusCode::kPermissionDenied,
       "belongs to another client"},
      {"another client's output",
       {{}, RegionSlice{bobs.id(), 0, 0}},
       std::string(128, '\0'),
       absl::StatusCode::kPermissionDenied,
       "output_region.region_id"},
      {"output too small",
       {{}, RegionSlice{region.id(), 0, 127}},
       std::string(128, '\0'),
       absl::StatusCode::kInvalidArgument,
       "127 bytes do not hold the result's 128 bytes"},
      {"output past the end",
       {{}, RegionSlice{region.id(), 200, 0}},
       std::string(128, '\0'),
       absl::StatusCode::kInvalidArgument,
       "output_region: 56 bytes do not hold"},
      {"output offset past the end",
       {{}, RegionSlice{region.id(), 300, 0}},
       std::string(128, '\0'),
       absl::StatusCode::kInvalidArgument,
       "output_region"},
      {"overlap",
       {RegionSlice{region.id(), 0, 0}, RegionSlice{region.id(), 64, 0}},
       "",
       absl::StatusCode::kInvalidArgument,
       "overlaps input_region"},
  };
  for (const Case& c : cases) {
    const absl::Status s = Submit(c.regions, c.input);
    EXPECT_EQ(s.code(), c.code) << c.what << ": " << s;
    EXPECT_NE(s.message().find(c.message), std::string::npos) << c.what << ": " << s;
  }
  // Adjacent slices of one region are fine, and the engine still serves.
  std::memset(region.data(), 0, 256);
  EXPECT_TRUE(Submit({RegionSlice{region.id(), 0, 0}, RegionSlice{region.id(), 128, 0}}).ok());
  const auto stats = engine_->Stats();
  EXPECT_GE(stats.refused.size(), 1u);
}

TEST_F(RegionErrors, AShrunkInputOrOutputFailsTheJobNotTheDaemon) {
  spec_.shape = {1024, 1024};
  spec_.chunk_bytes = 64 << 10;
  for (bool shrink_input : {true, false}) {
    TestRegion in(*engine_, 4 << 20, "alice");
    TestRegion out(*engine_, 4 << 20, "alice");
    // The client takes the pages away under the daemon's mapping.
    const int fd = shm_open((shrink_input ? in : out).shm().name().c_str(), O_RDWR, 0);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, 0), 0);
    close(fd);
    auto sink = std::make_shared<RecordingSink>();
    std::string none;
    ASSERT_TRUE(
        engine_
            ->Submit(spec_, none, {RegionSlice{in.id(), 0, 0}, RegionSlice{out.id(), 0, 0}}, sink)
            .ok());
    ASSERT_TRUE(sink->WaitDone());
    EXPECT_EQ(sink->status().code(), absl::StatusCode::kFailedPrecondition) << sink->status();
    EXPECT_NE(sink->status().message().find(shrink_input ? "input_region" : "output_region"),
              std::string::npos)
        << sink->status();
  }
  // And the next job runs.
  TestRegion fine(*engine_, 256, "alice");
  std::memset(fine.data(), 0, 256);
  spec_.shape = {4, 8};
  auto sink = std::make_shared<RecordingSink>();
  std::string none;
  ASSERT_TRUE(engine_->Submit(spec_, none, {RegionSlice{fine.id(), 0, 0}, {}}, sink).ok());
  ASSERT_TRUE(sink->WaitDone());
  EXPECT_TRUE(sink->status().ok()) << sink->status();
}

TEST_F(RegionErrors, AnUnlinkedRegionKeepsWorkingAndUnregisterWaitsForItsJob) {
  const std::vector<float> x = gpupipe::testing::RandomFloats(32, gpupipe::testing::FreshSeed());
  TestRegion in(*engine_, 128, "alice");
  std::memcpy(in.data(), x.data(), 128);
  in.shm().Unlink();  // the name is gone; the daemon's mapping is not
  // A reader that does not read yet holds the job mid-stream.
  auto sink = std::make_shared<RecordingSink>();
  sink->SetGateOpen(false);
  std::string none;
  ASSERT_TRUE(engine_->Submit(spec_, none, {RegionSlice{in.id(), 0, 0}, {}}, sink).ok());
  sink->WaitForOutput(1);
  ASSERT_TRUE(engine_->UnregisterRegion("alice", in.id()).ok());
  EXPECT_EQ(engine_->Stats().regions, 0);
  EXPECT_EQ(engine_->Stats().region_mapped_bytes, 4096);  // the job still holds it (a page)
  sink->SetGateOpen(true);
  ASSERT_TRUE(sink->WaitDone());
  ASSERT_TRUE(sink->status().ok()) << sink->status();
  std::vector<float> want = x;
  for (float& v : want) v = std::max(v, 0.0f);
  EXPECT_EQ(sink->output(), AsBytes(want));
  // The mapping goes when the job's last reference does, just after OnDone.
  for (int i = 0; i < 100 && engine_->Stats().region_mapped_bytes != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(engine_->Stats().region_mapped_bytes, 0);
}

}  // namespace
}  // namespace gpupipe::engine
