// Dynamic batching's contract, for any backend (scheduling/batching.h): batched results are
// byte-identical to the same jobs run alone, for every op family and dtype; a batch never mixes
// priorities; a job cancelled before or during its batch ends CANCELLED while the others
// finish; batches respect their limits; a lone job never waits. The CPU test (server_test) and
// the CUDA test (gpu label) run these with their backend.
//
// Batches are made deterministic with a blocked lane: the lane's first job waits on a reader
// that does not read while the others queue; once it is released, the lane takes them all.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/float16.h"
#include "server/engine/engine.h"
#include "server/engine/job/validate.h"
#include "tests/testing/random_tensor.h"
#include "tests/testing/recording_sink.h"

namespace gpupipe::testing {

// Makes a backend with one lane per priority level.
using BackendMaker = std::function<std::unique_ptr<engine::Backend>()>;

inline std::unique_ptr<engine::Engine> MakeBatchingEngine(const BackendMaker& make,
                                                          int64_t window_us, int max_jobs = 64,
                                                          int64_t max_bytes = int64_t{4} << 20) {
  engine::EngineOptions options;
  options.batching.window_us = window_us;
  options.batching.max_jobs = max_jobs;
  options.batching.max_bytes = max_bytes;
  return engine::Engine::Create(make(), std::move(options));
}

inline engine::JobSpec BatchJobSpec(std::vector<int64_t> shape, std::vector<engine::OpSpec> ops,
                                    engine::DType dtype = engine::DType::kFloat32,
                                    engine::Priority priority = engine::Priority::kNormal) {
  engine::JobSpec spec;
  spec.shape = std::move(shape);
  spec.ops = std::move(ops);
  spec.dtype = dtype;
  spec.priority = priority;
  return spec;
}

// Random input bytes of `elements` of `dtype`.
inline std::string RandomInput(engine::DType dtype, int64_t elements, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> real(-4, 4);
  std::uniform_int_distribution<int64_t> integer(-50, 50);
  std::string bytes(static_cast<size_t>(elements * engine::DTypeSize(dtype)), '\0');
  for (int64_t i = 0; i < elements; ++i) {
    char* at = bytes.data() + i * engine::DTypeSize(dtype);
    switch (dtype) {
      case engine::DType::kFloat32: {
        float v = static_cast<float>(real(rng));
        std::memcpy(at, &v, 4);
        break;
      }
      case engine::DType::kFloat64: {
        double v = real(rng);
        std::memcpy(at, &v, 8);
        break;
      }
      case engine::DType::kFloat16: {
        HalfBits v = FloatToHalf(static_cast<float>(real(rng)));
        std::memcpy(at, &v, 2);
        break;
      }
      case engine::DType::kInt32: {
        int32_t v = static_cast<int32_t>(integer(rng));
        std::memcpy(at, &v, 4);
        break;
      }
      case engine::DType::kInt64: {
        int64_t v = integer(rng);
        std::memcpy(at, &v, 8);
        break;
      }
    }
  }
  return bytes;
}

// Blocks the lane of `priority` with a job whose reader does not read; open its gate to go on.
inline std::shared_ptr<RecordingSink> BlockBatchLane(engine::Engine& e, engine::Priority priority) {
  auto blocker = std::make_shared<RecordingSink>();
  blocker->SetGateOpen(false);
  // Convolve: a key no test job shares, so the blocker never batches with them.
  engine::OpSpec conv{engine::OpKind::kConvolve};
  conv.taps = {0.5, 0.25};
  std::string input(400, '\0');
  EXPECT_TRUE(
      e.Submit(BatchJobSpec({100}, {conv}, engine::DType::kFloat32, priority), input, blocker)
          .ok());
  while (blocker->chunks() == 0 && !blocker->WaitDone(std::chrono::milliseconds(1))) {
  }
  return blocker;
}

inline std::shared_ptr<RecordingSink> SubmitJob(engine::Engine& e, const engine::JobSpec& spec,
                                                const std::string& bytes,
                                                absl::Status* status = nullptr) {
  auto sink = std::make_shared<RecordingSink>();
  std::string input = bytes;
  absl::Status s = e.Submit(spec, input, sink);
  if (status != nullptr) *status = s;
  return s.ok() ? sink : nullptr;
}

// One op family per entry, each in a pipeline with an elementwise prologue where it takes one.
inline std::vector<std::pair<std::string, std::vector<engine::OpSpec>>> BatchOpFamilies() {
  using engine::OpKind;
  using engine::OpSpec;
  OpSpec affine{OpKind::kAffine};
  affine.alpha = 1.5;
  affine.beta = -0.25;
  OpSpec hist{OpKind::kHistogram};
  hist.bins = 7;
  hist.lo = -4;
  hist.hi = 4;
  OpSpec conv{OpKind::kConvolve};
  conv.taps = {0.25, 0.5, -0.125};
  conv.mode = engine::ConvolveMode::kSame;
  OpSpec topk{OpKind::kTopk};
  topk.k = 3;
  return {
      {"affine|relu", {affine, {OpKind::kRelu}}},
      {"abs|sqrt", {{OpKind::kAbs}, {OpKind::kSqrt}}},
      {"sum", {{OpKind::kSum}}},
      {"affine|max", {affine, {OpKind::kMax}}},
      {"mean", {{OpKind::kMean}}},
      {"norm2", {{OpKind::kNorm2}}},
      {"argmax", {{OpKind::kArgmax}}},
      {"sum|abs", {{OpKind::kSum}, {OpKind::kAbs}}},
      {"affine|relu|softmax", {affine, {OpKind::kRelu}, {OpKind::kSoftmax}}},
      {"l2normalize", {{OpKind::kL2Normalize}}},
      {"standardize", {{OpKind::kStandardize}}},
      {"cumsum", {{OpKind::kCumsum}}},
      {"histogram", {hist}},
      {"convolve", {conv}},
      {"topk", {topk}},
  };
}

// Every op family and dtype: jobs of 1 to 3 rows batched on `batched` give the bytes the same
// jobs give alone on `alone`. Returns the combinations checked.
inline int ExpectBatchesMatchJobsAlone(const BackendMaker& make) {
  const auto batched = MakeBatchingEngine(make, /*window_us=*/1000);
  const auto alone = MakeBatchingEngine(make, /*window_us=*/0);
  const uint64_t seed = FreshSeed();
  std::mt19937_64 rng(seed);
  int checked = 0;
  constexpr int64_t kCols = 37;
  constexpr int kJobs = 5;
  for (const auto& [family, ops] : BatchOpFamilies()) {
    for (engine::DType dtype :
         {engine::DType::kFloat32, engine::DType::kFloat64, engine::DType::kFloat16,
          engine::DType::kInt32, engine::DType::kInt64}) {
      SCOPED_TRACE(family + " " + engine::DTypeName(dtype) + " seed " + std::to_string(seed));
      std::vector<engine::JobSpec> specs;
      std::vector<std::string> inputs;
      std::vector<std::string> expected;
      bool supported = true;
      for (int j = 0; j < kJobs && supported; ++j) {
        const int64_t rows = 1 + j % 3;
        engine::JobSpec spec = BatchJobSpec(
            j == 0 ? std::vector<int64_t>{kCols} : std::vector<int64_t>{rows, kCols}, ops, dtype);
        std::string input = RandomInput(dtype, engine::ElementCount(spec.shape), rng);
        absl::Status submitted;
        auto sink = SubmitJob(*alone, spec, input, &submitted);
        if (!submitted.ok()) {
          // The op does not take this dtype: every job of the combination is refused alike.
          EXPECT_EQ(submitted.code(), absl::StatusCode::kInvalidArgument) << submitted;
          supported = false;
          break;
        }
        EXPECT_TRUE(sink->WaitDone());
        EXPECT_TRUE(sink->status().ok()) << sink->status();
        specs.push_back(spec);
        inputs.push_back(input);
        expected.push_back(sink->output());
      }
      if (!supported) continue;
      auto blocker = BlockBatchLane(*batched, engine::Priority::kNormal);
      std::vector<std::shared_ptr<RecordingSink>> sinks;
      for (int j = 0; j < kJobs; ++j) sinks.push_back(SubmitJob(*batched, specs[j], inputs[j]));
      blocker->SetGateOpen(true);
      EXPECT_TRUE(blocker->WaitDone());
      for (int j = 0; j < kJobs; ++j) {
        if (sinks[j] == nullptr) {
          ADD_FAILURE() << "job " << j << " was refused";
          continue;
        }
        EXPECT_TRUE(sinks[j]->WaitDone());
        EXPECT_TRUE(sinks[j]->status().ok()) << sinks[j]->status();
        EXPECT_EQ(sinks[j]->timing().batch_jobs, kJobs) << "job " << j << " did not batch";
        EXPECT_TRUE(sinks[j]->output() == expected[j]) << "job " << j << " differs from alone";
        EXPECT_EQ(sinks[j]->timing().bytes_in, static_cast<int64_t>(inputs[j].size()));
        EXPECT_EQ(sinks[j]->timing().bytes_out, static_cast<int64_t>(expected[j].size()));
      }
      ++checked;
    }
  }
  return checked;
}

// Low and high jobs of the same ops queue together; each priority batches on its own lanes.
inline void ExpectBatchesKeepTheirPriority(const BackendMaker& make) {
  const auto e = MakeBatchingEngine(make, 1000);
  std::mt19937_64 rng(FreshSeed());
  auto low_blocker = BlockBatchLane(*e, engine::Priority::kLow);
  auto high_blocker = BlockBatchLane(*e, engine::Priority::kHigh);
  std::vector<std::shared_ptr<RecordingSink>> low, high;
  for (int j = 0; j < 3; ++j) {
    for (engine::Priority p : {engine::Priority::kLow, engine::Priority::kHigh}) {
      auto spec = BatchJobSpec({2, 64}, {{engine::OpKind::kSoftmax}}, engine::DType::kFloat32, p);
      (p == engine::Priority::kLow ? low : high)
          .push_back(SubmitJob(*e, spec, RandomInput(engine::DType::kFloat32, 128, rng)));
    }
  }
  high_blocker->SetGateOpen(true);
  low_blocker->SetGateOpen(true);
  for (auto* group : {&low, &high}) {
    const char* name = group == &low ? "low" : "high";
    for (const auto& sink : *group) {
      ASSERT_NE(sink, nullptr);
      EXPECT_TRUE(sink->WaitDone());
      EXPECT_TRUE(sink->status().ok()) << sink->status();
      EXPECT_EQ(sink->timing().batch_jobs, 3) << name;
      EXPECT_EQ(sink->timing().stream.rfind(name, 0), 0u)
          << "a " << name << " job ran on " << sink->timing().stream;
    }
  }
}

// A job cancelled while it waits takes no part; one cancelled while the batch hands out its
// result ends CANCELLED; the others get their own bytes.
inline void ExpectCancelInsideABatch(const BackendMaker& make) {
  const auto e = MakeBatchingEngine(make, 1000);
  const auto alone = MakeBatchingEngine(make, 0);
  std::mt19937_64 rng(FreshSeed());
  const auto spec = BatchJobSpec({3, 50}, {{engine::OpKind::kAbs}, {engine::OpKind::kCumsum}});
  std::vector<std::string> inputs, expected;
  for (int j = 0; j < 5; ++j) {
    inputs.push_back(RandomInput(engine::DType::kFloat32, 150, rng));
    auto sink = SubmitJob(*alone, spec, inputs.back());
    EXPECT_TRUE(sink->WaitDone());
    expected.push_back(sink->output());
  }
  auto blocker = BlockBatchLane(*e, engine::Priority::kNormal);
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  for (int j = 0; j < 5; ++j) sinks.push_back(SubmitJob(*e, spec, inputs[j]));
  sinks[1]->Cancel();            // gone before the batch starts
  sinks[3]->SetGateOpen(false);  // will not read its result
  blocker->SetGateOpen(true);
  while (sinks[3]->chunks() == 0 && !sinks[3]->WaitDone(std::chrono::milliseconds(1))) {
  }
  sinks[3]->Cancel();  // goes while the batch hands it its bytes
  for (int j = 0; j < 5; ++j) {
    EXPECT_TRUE(sinks[j]->WaitDone());
    EXPECT_EQ(sinks[j]->done_calls(), 1);
    if (j == 1 || j == 3) {
      EXPECT_EQ(sinks[j]->status().code(), absl::StatusCode::kCancelled) << j;
      continue;
    }
    EXPECT_TRUE(sinks[j]->status().ok()) << j << ": " << sinks[j]->status();
    EXPECT_EQ(sinks[j]->timing().batch_jobs, 4) << j;  // job 1 took no part
    EXPECT_TRUE(sinks[j]->output() == expected[j]) << j;
  }
  const engine::EngineStats stats = e->Stats(true, /*lane_activity=*/true);
  EXPECT_EQ(stats.batching.batches, 1);
  EXPECT_EQ(stats.batching.batched_jobs, 4);
  bool saw_batch = false;
  for (const auto& span : stats.lane_activity) saw_batch |= span.jobs == 4;
  EXPECT_TRUE(saw_batch);
}

// max_jobs and max_bytes bound a batch; a job over max_bytes runs alone.
inline void ExpectBatchLimits(const BackendMaker& make) {
  const auto e = MakeBatchingEngine(make, 1000, /*max_jobs=*/2, /*max_bytes=*/4096);
  std::mt19937_64 rng(FreshSeed());
  auto blocker = BlockBatchLane(*e, engine::Priority::kNormal);
  const auto small = BatchJobSpec({1, 256}, {{engine::OpKind::kRelu}});  // 1 KiB
  const auto large = BatchJobSpec({5, 256}, {{engine::OpKind::kRelu}});  // 5 KiB
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  for (int j = 0; j < 5; ++j)
    sinks.push_back(SubmitJob(*e, small, RandomInput(engine::DType::kFloat32, 256, rng)));
  auto big = SubmitJob(*e, large, RandomInput(engine::DType::kFloat32, 1280, rng));
  blocker->SetGateOpen(true);
  std::vector<int> sizes;
  for (auto& s : sinks) {
    EXPECT_TRUE(s->WaitDone());
    EXPECT_TRUE(s->status().ok());
    sizes.push_back(s->timing().batch_jobs);
  }
  EXPECT_EQ(sizes, (std::vector<int>{2, 2, 2, 2, 1}));
  EXPECT_TRUE(big->WaitDone());
  EXPECT_EQ(big->timing().batch_jobs, 1);
}

// A row op after a reduction works across the rows of one job: such jobs never batch, and each
// gets the result it gets alone while others of the same ops wait beside it.
inline void ExpectRowMixingPipelinesRunAlone(const BackendMaker& make) {
  const auto e = MakeBatchingEngine(make, 1000);
  const auto alone = MakeBatchingEngine(make, 0);
  std::mt19937_64 rng(FreshSeed());
  const std::vector<engine::OpSpec> ops = {{engine::OpKind::kSum}, {engine::OpKind::kSum}};
  std::vector<engine::JobSpec> specs = {BatchJobSpec({2, 4}, ops), BatchJobSpec({3, 4}, ops),
                                        BatchJobSpec({1, 4}, ops)};
  std::vector<std::string> inputs, expected;
  for (const engine::JobSpec& spec : specs) {
    inputs.push_back(RandomInput(engine::DType::kFloat32, engine::ElementCount(spec.shape), rng));
    auto sink = SubmitJob(*alone, spec, inputs.back());
    EXPECT_TRUE(sink->WaitDone());
    expected.push_back(sink->output());
  }
  auto blocker = BlockBatchLane(*e, engine::Priority::kNormal);
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  for (size_t j = 0; j < specs.size(); ++j) sinks.push_back(SubmitJob(*e, specs[j], inputs[j]));
  blocker->SetGateOpen(true);
  for (size_t j = 0; j < specs.size(); ++j) {
    EXPECT_TRUE(sinks[j]->WaitDone());
    EXPECT_TRUE(sinks[j]->status().ok()) << sinks[j]->status();
    EXPECT_EQ(sinks[j]->timing().batch_jobs, 1) << j;
    EXPECT_TRUE(sinks[j]->output() == expected[j]) << j;
  }
}

// With the lane free and nothing else in flight, a job does not wait for the window; with
// another job in flight, a job waits for a second one that comes within it.
inline void ExpectTheWindowOnlyHoldsJobsWhenOthersAreInFlight(const BackendMaker& make,
                                                              const BackendMaker& two_lanes) {
  {
    const auto e = MakeBatchingEngine(make, /*window_us=*/2000000);
    const auto start = std::chrono::steady_clock::now();
    auto sink =
        SubmitJob(*e, BatchJobSpec({1, 64}, {{engine::OpKind::kRelu}}), std::string(256, '\0'));
    EXPECT_TRUE(sink->WaitDone());
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1000))
        << "a lone job waited for the batch window";
    EXPECT_EQ(sink->timing().batch_jobs, 1);
  }
  {
    engine::EngineOptions options;
    options.batching.window_us = 300000;
    const auto e = engine::Engine::Create(two_lanes(), std::move(options));
    auto blocker = BlockBatchLane(*e, engine::Priority::kNormal);  // in flight on lane 0
    const auto spec = BatchJobSpec({1, 64}, {{engine::OpKind::kRelu}});
    auto first = SubmitJob(*e, spec, std::string(256, '\0'));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto second = SubmitJob(*e, spec, std::string(256, '\0'));
    EXPECT_TRUE(first->WaitDone());
    EXPECT_TRUE(second->WaitDone());
    EXPECT_EQ(first->timing().batch_jobs, 2);
    EXPECT_EQ(second->timing().batch_jobs, 2);
    blocker->SetGateOpen(true);
    EXPECT_TRUE(blocker->WaitDone());
  }
}

}  // namespace gpupipe::testing
