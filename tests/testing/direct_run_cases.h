// Direct runs' contract, for any backend (scheduling/direct_run.h): a small job submitted with
// SubmitThread::kMayRun while a lane of its level is idle runs on the submitting thread, with
// the result it gets through the queue, byte for byte; jobs that are not small, callers that do
// not allow it, a level whose lanes are busy and a policy that is off all queue; jobs queued
// while a direct run holds a lane are never lost; and Shutdown waits for a direct run. The CPU
// test (server_test) and the CUDA test (gpu label) run these with their backend.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "server/engine/engine.h"
#include "tests/testing/batching_cases.h"
#include "tests/testing/recording_sink.h"

namespace gpupipe::testing {

inline std::unique_ptr<engine::Engine> MakeDirectRunEngine(
    const BackendMaker& make, engine::DirectRunPolicy policy = engine::DirectRunPolicy{}) {
  engine::EngineOptions options;
  options.direct_run = policy;
  return engine::Engine::Create(make(), std::move(options));
}

// The small job of the service benchmark: one row of 1024 float32, affine | relu | softmax.
inline engine::JobSpec SmallJobSpec(engine::Priority priority = engine::Priority::kNormal) {
  engine::OpSpec affine{engine::OpKind::kAffine};
  affine.alpha = 2;
  affine.beta = 1;
  return BatchJobSpec({1, 1024},
                      {affine, engine::OpSpec{engine::OpKind::kRelu},
                       engine::OpSpec{engine::OpKind::kSoftmax}},
                      engine::DType::kFloat32, priority);
}

inline std::shared_ptr<RecordingSink> SubmitFrom(engine::Engine& e, const engine::JobSpec& spec,
                                                 const std::string& bytes,
                                                 engine::SubmitThread thread) {
  auto sink = std::make_shared<RecordingSink>();
  std::string input = bytes;
  absl::Status s = e.Submit(spec, input, sink, thread);
  EXPECT_TRUE(s.ok()) << s;
  return sink;
}

// Small jobs of every priority run on the submitting thread, done when Submit returns, with
// the bytes and timing the same jobs get through the queue.
inline void ExpectSmallJobsRunOnTheSubmittingThread(const BackendMaker& make) {
  auto e = MakeDirectRunEngine(make);
  std::mt19937_64 rng(FreshSeed());
  int direct = 0;
  for (engine::Priority priority :
       {engine::Priority::kLow, engine::Priority::kNormal, engine::Priority::kHigh}) {
    for (int i = 0; i < 3; ++i) {
      SCOPED_TRACE(::testing::Message() << "priority " << static_cast<int>(priority) << " job " << i);
      const engine::JobSpec spec = SmallJobSpec(priority);
      const std::string bytes = RandomInput(spec.dtype, 1024, rng);
      auto here = SubmitFrom(*e, spec, bytes, engine::SubmitThread::kMayRun);
      ASSERT_EQ(here->done_calls(), 1) << "a direct run is done when Submit returns";
      EXPECT_EQ(here->done_thread(), std::this_thread::get_id());
      ++direct;
      auto queued = SubmitFrom(*e, spec, bytes, engine::SubmitThread::kQueue);
      ASSERT_TRUE(queued->WaitDone());
      EXPECT_NE(queued->done_thread(), std::this_thread::get_id());
      ASSERT_TRUE(here->status().ok()) << here->status();
      ASSERT_TRUE(queued->status().ok()) << queued->status();
      EXPECT_TRUE(here->output() == queued->output()) << "a direct run's result differs";
      EXPECT_EQ(here->info().output_shape, queued->info().output_shape);
      ASSERT_TRUE(here->has_timing());
      EXPECT_EQ(here->timing().bytes_in, 4096);
      EXPECT_EQ(here->timing().bytes_out, 4096);
      EXPECT_FALSE(here->timing().stream.empty()) << "a direct run names the lane it took";
      EXPECT_GE(here->timing().total_us, here->timing().queue_us);
    }
  }
  EXPECT_EQ(e->Stats(false, false).direct_runs, direct);
}

// What does not qualify, or finds no idle lane, goes through the queue.
inline void ExpectEverythingElseQueues(const BackendMaker& make) {
  std::mt19937_64 rng(FreshSeed());
  const engine::JobSpec small = SmallJobSpec();
  const std::string bytes = RandomInput(small.dtype, 1024, rng);
  {
    engine::DirectRunPolicy off;
    off.max_bytes = 0;
    auto e = MakeDirectRunEngine(make, off);
    auto sink = SubmitFrom(*e, small, bytes, engine::SubmitThread::kMayRun);
    ASSERT_TRUE(sink->WaitDone());
    EXPECT_NE(sink->done_thread(), std::this_thread::get_id()) << "policy off";
    EXPECT_EQ(e->Stats(false, false).direct_runs, 0);
  }
  auto e = MakeDirectRunEngine(make);
  // Over max_bytes: 64 KiB in and out together.
  engine::JobSpec big = SmallJobSpec();
  big.shape = {16, 1024};
  auto sink = SubmitFrom(*e, big, RandomInput(big.dtype, 16 * 1024, rng),
                         engine::SubmitThread::kMayRun);
  ASSERT_TRUE(sink->WaitDone());
  EXPECT_NE(sink->done_thread(), std::this_thread::get_id()) << "over max_bytes";
  // Over max_work: a few bytes, many taps.
  engine::OpSpec conv{engine::OpKind::kConvolve};
  conv.taps.assign(128, 1.0 / 128);
  engine::JobSpec costly = BatchJobSpec({1, 1024}, {conv});
  sink = SubmitFrom(*e, costly, RandomInput(costly.dtype, 1024, rng),
                    engine::SubmitThread::kMayRun);
  ASSERT_TRUE(sink->WaitDone());
  EXPECT_NE(sink->done_thread(), std::this_thread::get_id()) << "over max_work";
  // The level's lane is busy (one lane a level): queued, and it runs once the lane is free.
  auto blocker = BlockBatchLane(*e, engine::Priority::kNormal);
  sink = SubmitFrom(*e, small, bytes, engine::SubmitThread::kMayRun);
  EXPECT_EQ(sink->done_calls(), 0) << "ran although the level's lane was busy";
  // Another level's lane is idle: a job there runs directly meanwhile.
  auto high = SubmitFrom(*e, SmallJobSpec(engine::Priority::kHigh), bytes,
                         engine::SubmitThread::kMayRun);
  EXPECT_EQ(high->done_calls(), 1);
  EXPECT_TRUE(high->status().ok()) << high->status();
  blocker->SetGateOpen(true);
  ASSERT_TRUE(sink->WaitDone());
  EXPECT_TRUE(sink->status().ok()) << sink->status();
  EXPECT_NE(sink->done_thread(), std::this_thread::get_id());
  EXPECT_EQ(e->Stats(false, false).direct_runs, 1);
  // A higher level runs: the job would wait for it at its chunk boundary (the priority hold),
  // which it must not do on the caller's thread.
  auto high_blocker = BlockBatchLane(*e, engine::Priority::kHigh);
  sink = SubmitFrom(*e, small, bytes, engine::SubmitThread::kMayRun);
  high_blocker->SetGateOpen(true);
  ASSERT_TRUE(sink->WaitDone());
  EXPECT_TRUE(sink->status().ok()) << sink->status();
  EXPECT_NE(sink->done_thread(), std::this_thread::get_id()) << "ran beside a higher level";
  ASSERT_TRUE(high_blocker->WaitDone());
  EXPECT_EQ(e->Stats(false, false).direct_runs, 1);
}

// While a direct run holds the level's only lane (its reader does not read), jobs of that level
// queue, none runs directly, and all of them run once it is done; Shutdown waits for it.
inline void ExpectNoJobIsLostAroundADirectRun(const BackendMaker& make) {
  auto e = MakeDirectRunEngine(make);
  std::mt19937_64 rng(FreshSeed());
  const engine::JobSpec spec = SmallJobSpec();
  const std::string bytes = RandomInput(spec.dtype, 1024, rng);
  auto held = std::make_shared<RecordingSink>();
  held->SetGateOpen(false);
  std::thread submitter([&] {
    std::string input = bytes;
    EXPECT_TRUE(e->Submit(spec, input, held, engine::SubmitThread::kMayRun).ok());
    EXPECT_EQ(held->done_calls(), 1);
  });
  while (held->chunks() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::vector<std::shared_ptr<RecordingSink>> waiting;
  for (int i = 0; i < 4; ++i) {
    waiting.push_back(SubmitFrom(*e, spec, bytes,
                                 i % 2 == 0 ? engine::SubmitThread::kMayRun
                                            : engine::SubmitThread::kQueue));
    EXPECT_EQ(waiting.back()->done_calls(), 0) << "job " << i << " ran beside the held lane";
  }
  const engine::EngineStats during = e->Stats(false, false);
  for (const engine::EngineStats::Level& level : during.levels) {
    if (level.priority != engine::Priority::kNormal) continue;
    EXPECT_EQ(level.queued, 4);
    EXPECT_EQ(level.running, 1);
  }
  held->SetGateOpen(true);
  submitter.join();
  for (auto& sink : waiting) {
    ASSERT_TRUE(sink->WaitDone(std::chrono::seconds(30))) << "a job queued beside a direct run";
    EXPECT_TRUE(sink->status().ok()) << sink->status();
    EXPECT_TRUE(sink->output() == held->output());
  }
  EXPECT_EQ(e->Stats(false, false).direct_runs, 1);

  // Shutdown during a direct run returns only after it ended.
  auto last = std::make_shared<RecordingSink>();
  last->SetGateOpen(false);
  std::thread late([&] {
    std::string input = bytes;
    EXPECT_TRUE(e->Submit(spec, input, last, engine::SubmitThread::kMayRun).ok());
  });
  while (last->chunks() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    last->SetGateOpen(true);
  });
  e->Shutdown();
  EXPECT_EQ(last->done_calls(), 1) << "Shutdown returned before the direct run ended";
  opener.join();
  late.join();
}

}  // namespace gpupipe::testing
