// The engine's guarantee under memory pressure: a request is either refused, with nothing
// sent to its sink, or accepted and ended with exactly one Done, whichever allocation fails;
// nothing of a failed request is left counted in the engine. Each test fails the k-th
// allocation of the submitting thread, for every k the path has.
//
// This binary replaces the global operator new (below) to fail one allocation on request, on
// one thread, so it is a test program of its own.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "server/engine/backends/cpu/cpu_backend.h"
#include "server/engine/engine.h"
#include "server/engine/scheduling/client_queue.h"
#include "tests/testing/random_tensor.h"

namespace {

// Per thread: allocations to let through before one fails (-1: none fails), whether one did,
// and how many were asked for.
thread_local int64_t t_fail_after = -1;
thread_local bool t_failed = false;
thread_local int64_t t_allocations = 0;

void* Allocate(std::size_t size, std::size_t alignment) {
  ++t_allocations;
  if (t_fail_after >= 0 && t_fail_after-- == 0) {
    t_failed = true;
    throw std::bad_alloc();
  }
  if (size == 0) size = 1;
  void* p = alignment <= alignof(std::max_align_t)
                ? std::malloc(size)
                : std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

void* AllocateOrNull(std::size_t size, std::size_t alignment) noexcept {
  try {
    return Allocate(size, alignment);
  } catch (...) {
    return nullptr;
  }
}

constexpr std::size_t kPlain = alignof(std::max_align_t);

// Fails the allocation that comes after `let_through` more on this thread, until Disarm.
void FailAfter(int64_t let_through) {
  t_failed = false;
  t_fail_after = let_through;
}
// Whether the armed failure happened.
bool Disarm() {
  t_fail_after = -1;
  return t_failed;
}

}  // namespace

void* operator new(std::size_t size) { return Allocate(size, kPlain); }
void* operator new[](std::size_t size) { return Allocate(size, kPlain); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  return AllocateOrNull(size, kPlain);
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  return AllocateOrNull(size, kPlain);
}
void* operator new(std::size_t size, std::align_val_t a) {
  return Allocate(size, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t size, std::align_val_t a) {
  return Allocate(size, static_cast<std::size_t>(a));
}
void* operator new(std::size_t size, std::align_val_t a, const std::nothrow_t&) noexcept {
  return AllocateOrNull(size, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t size, std::align_val_t a, const std::nothrow_t&) noexcept {
  return AllocateOrNull(size, static_cast<std::size_t>(a));
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace gpupipe::engine {
namespace {

// A sink that allocates nothing, so that the failures are the engine's own.
class CountingSink final : public JobSink {
 public:
  void OnAccepted(const AcceptedInfo&) override { accepted_.fetch_add(1); }
  void OnPlan(const PlanDescription&) override {}
  absl::Status OnChunk(int64_t, const char*, int64_t) override { return absl::OkStatus(); }
  void OnTiming(const JobTiming&) override {}
  void OnDone(const absl::Status& status) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++done_;
    status_ = status;
    cv_.notify_all();
  }
  absl::Status ReaderStatus() const override { return absl::OkStatus(); }

  int accepted() const { return accepted_.load(); }
  int done() const {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }
  // Waits up to 10 s for a Done; then how many came.
  int WaitDone() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(10), [&] { return done_ > 0; });
    return done_;
  }
  absl::Status status() const {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }

 private:
  std::atomic<int> accepted_{0};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int done_ = 0;
  absl::Status status_;
};

// What the submitted job asks for beyond running: its plan first, or only its plan.
enum class Variant { kRun, kExplain, kDryRun };

JobSpec SmallJob(std::string client, Variant variant = Variant::kRun) {
  JobSpec spec;
  spec.shape = {4, 64};
  spec.ops = {{OpKind::kRelu}, {OpKind::kSoftmax}};
  spec.client = std::move(client);
  spec.explain = variant == Variant::kExplain;
  spec.dry_run = variant == Variant::kDryRun;
  return spec;
}

// Submits a small job and waits for its end; its Done's status.
absl::Status RunOne(Engine& engine, SubmitThread thread, const std::string& client,
                    Variant variant = Variant::kRun) {
  std::string input = testing::AsBytes(std::vector<float>(4 * 64, -1.5f));
  auto sink = std::make_shared<CountingSink>();
  if (absl::Status s = engine.Submit(SmallJob(client, variant), input, sink, thread); !s.ok()) {
    return s;
  }
  if (sink->WaitDone() != 1) return absl::DeadlineExceededError("no Done");
  return sink->status();
}

// Submits a small job for each k, the k-th allocation of this thread failing, until one
// submission allocates fewer than k times; checks each outcome, and that the engine counts
// nothing of them afterwards and still runs jobs.
void SweepSubmit(SubmitThread thread, Variant variant = Variant::kRun) {
  CpuBackendOptions cpu;
  cpu.lanes_per_level = 1;
  auto engine = Engine::Create(CreateCpuBackend(cpu), {});
  // First a job that nothing fails, so that what is made once per process (the op catalog,
  // say) is made: the sweep then counts the allocations every job makes.
  ASSERT_TRUE(RunOne(*engine, thread, "allocation-failure-warm-up", variant).ok());
  std::vector<std::shared_ptr<CountingSink>> refused_sinks;
  std::vector<std::shared_ptr<CountingSink>> accepted_sinks;
  int refused = 0;
  int ended_ok = 0;
  int ended_failed = 0;
  bool swept = false;
  for (int64_t k = 0; k < 5000 && !swept; ++k) {
    SCOPED_TRACE(::testing::Message() << "allocation " << k << " fails");
    // A client of its own each time (longer than any inline string), so that its queue and
    // its admission entry are new allocations of this submission.
    JobSpec spec = SmallJob("allocation-failure-client-" + std::to_string(k), variant);
    std::string input = testing::AsBytes(std::vector<float>(4 * 64, -1.5f));
    auto sink = std::make_shared<CountingSink>();
    std::shared_ptr<JobSink> as_sink = sink;
    FailAfter(k);
    const absl::Status submitted =
        engine->Submit(std::move(spec), input, std::move(as_sink), thread);
    swept = !Disarm();
    if (!submitted.ok()) {
      ++refused;
      EXPECT_EQ(sink->accepted(), 0) << "refused with " << submitted << " after OnAccepted";
      refused_sinks.push_back(sink);  // checked for a Done once every job has ended
      continue;
    }
    EXPECT_EQ(sink->accepted(), 1);
    ASSERT_EQ(sink->WaitDone(), 1) << "an accepted job did not end";
    accepted_sinks.push_back(sink);  // checked again at the end for a second Done
    const absl::Status done = sink->status();
    if (done.ok()) {
      ++ended_ok;
    } else {
      ++ended_failed;
      EXPECT_EQ(done.code(), absl::StatusCode::kResourceExhausted) << done;
    }
  }
  EXPECT_TRUE(swept) << "a submission allocated more than the sweep tried";
  EXPECT_GT(refused, 0);
  // Allocations after OnAccepted (queueing the job, its plan, and for a direct run the run
  // itself) end accepted jobs with their own Done.
  EXPECT_GT(ended_failed, 0);
  // Every accepted job has ended, and nothing of a failed one is still counted.
  for (int i = 0; i < 500 && engine->jobs_in_flight() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(engine->jobs_in_flight(), 0);
  for (const std::shared_ptr<CountingSink>& sink : refused_sinks) {
    EXPECT_EQ(sink->done(), 0) << "a refused request's sink got a Done";
  }
  for (const std::shared_ptr<CountingSink>& sink : accepted_sinks) {
    EXPECT_EQ(sink->done(), 1) << "an accepted job ended more than once";
  }
  const EngineStats stats = engine->Stats();
  for (const EngineStats::Level& level : stats.levels) {
    EXPECT_EQ(level.queued, 0);
    EXPECT_EQ(level.running, 0);
  }
  for (const EngineStats::Client& client : stats.clients) {
    EXPECT_EQ(client.active_jobs, 0) << client.client;
  }
  EXPECT_EQ(stats.queued_bytes, 0);
  // The engine runs the next job as before.
  EXPECT_TRUE(RunOne(*engine, thread, "allocation-failure-after", variant).ok());
  std::printf("%d refused, %d accepted and ended OK, %d accepted and ended failed\n", refused,
              ended_ok, ended_failed);
}

TEST(AllocationFailure, AQueuedJobIsRefusedOrEndsOnceWhicheverAllocationFails) {
  SweepSubmit(SubmitThread::kQueue);
}

TEST(AllocationFailure, ADirectRunIsRefusedOrEndsOnceWhicheverAllocationFails) {
  SweepSubmit(SubmitThread::kMayRun);
}

TEST(AllocationFailure, AJobThatAsksForItsPlanIsRefusedOrEndsOnceWhicheverAllocationFails) {
  SweepSubmit(SubmitThread::kQueue, Variant::kExplain);
}

TEST(AllocationFailure, ADryRunIsRefusedOrEndsOnceWhicheverAllocationFails) {
  SweepSubmit(SubmitThread::kQueue, Variant::kDryRun);
}

// A sink whose OnTiming or OnDone throws once (a failed allocation of its own).
class ThrowingSink final : public JobSink {
 public:
  enum class Where { kTiming, kDone };
  explicit ThrowingSink(Where where) : where_(where) {}
  void OnAccepted(const AcceptedInfo&) override {}
  void OnPlan(const PlanDescription&) override {}
  absl::Status OnChunk(int64_t, const char*, int64_t) override { return absl::OkStatus(); }
  void OnTiming(const JobTiming&) override {
    if (where_ == Where::kTiming) throw std::bad_alloc();
  }
  void OnDone(const absl::Status& status) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++done_;
    status_ = status;
    if (where_ == Where::kDone) throw std::bad_alloc();
  }
  absl::Status ReaderStatus() const override { return absl::OkStatus(); }
  int done() const {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }
  absl::Status status() const {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }

 private:
  const Where where_;
  mutable std::mutex mu_;
  int done_ = 0;
  absl::Status status_;
};

TEST(AllocationFailure, ASinkThatThrowsEndsItsJobAndTheEngineServesOn) {
  CpuBackendOptions cpu;
  cpu.lanes_per_level = 1;
  auto engine = Engine::Create(CreateCpuBackend(cpu), {});
  for (SubmitThread thread : {SubmitThread::kQueue, SubmitThread::kMayRun}) {
    for (ThrowingSink::Where where : {ThrowingSink::Where::kTiming, ThrowingSink::Where::kDone}) {
      auto sink = std::make_shared<ThrowingSink>(where);
      std::string input = testing::AsBytes(std::vector<float>(4 * 64, -1.5f));
      ASSERT_TRUE(engine->Submit(SmallJob("throwing-sink"), input, sink, thread).ok());
      for (int i = 0; i < 500 && engine->jobs_in_flight() > 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      EXPECT_EQ(engine->jobs_in_flight(), 0);
      EXPECT_EQ(sink->done(), 1);
      // A sink that cannot take the timing gets the failure as its Done.
      if (where == ThrowingSink::Where::kTiming) {
        EXPECT_EQ(sink->status().code(), absl::StatusCode::kResourceExhausted) << sink->status();
      }
      EXPECT_TRUE(RunOne(*engine, thread, "after-a-throwing-sink").ok());
    }
  }
}

// A sink whose job holds its lane until released: its OnChunk waits (10 s at most).
class HoldingSink final : public JobSink {
 public:
  void OnAccepted(const AcceptedInfo&) override {}
  void OnPlan(const PlanDescription&) override {}
  absl::Status OnChunk(int64_t, const char*, int64_t) override {
    std::unique_lock<std::mutex> lock(mu_);
    held_ = true;
    cv_.notify_all();
    cv_.wait_for(lock, std::chrono::seconds(10), [&] { return released_; });
    return absl::OkStatus();
  }
  void OnTiming(const JobTiming&) override {}
  void OnDone(const absl::Status&) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++done_;
  }
  absl::Status ReaderStatus() const override { return absl::OkStatus(); }

  // Waits (10 s at most) until the job is on its lane.
  bool WaitHeld() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return held_; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  int done() const {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
  bool released_ = false;
  int done_ = 0;
};

TEST(AllocationFailure, AShutdownEndsEveryQueuedJobOnceWhicheverAllocationFails) {
  int failures = 0;
  bool swept = false;
  for (int64_t k = 0; k < 1000 && !swept; ++k) {
    SCOPED_TRACE(::testing::Message() << "allocation " << k << " of Shutdown fails");
    CpuBackendOptions cpu;
    cpu.lanes_per_level = 1;
    auto engine = Engine::Create(CreateCpuBackend(cpu), {});
    // The one lane is held, so that the next jobs stay queued until Shutdown takes them.
    auto holder = std::make_shared<HoldingSink>();
    std::string held_input = testing::AsBytes(std::vector<float>(4 * 64, -1.5f));
    ASSERT_TRUE(engine->Submit(SmallJob("holder"), held_input, holder).ok());
    ASSERT_TRUE(holder->WaitHeld());
    std::vector<std::shared_ptr<CountingSink>> queued;
    for (int i = 0; i < 3; ++i) {
      auto sink = std::make_shared<CountingSink>();
      std::string input = testing::AsBytes(std::vector<float>(4 * 64, 0.5f));
      ASSERT_TRUE(
          engine->Submit(SmallJob("a-queued-client-with-a-long-name-" + std::to_string(i)),
                         input, sink)
              .ok());
      queued.push_back(sink);
    }
    // The holder's lane is let go once the queued jobs have ended (or have not, within 10 s
    // each), so that Shutdown, which joins the lanes' workers, returns either way.
    std::thread releaser([&] {
      for (const auto& sink : queued) sink->WaitDone();
      holder->Release();
    });
    FailAfter(k);
    engine->Shutdown();
    swept = !Disarm();
    releaser.join();
    if (!swept) ++failures;
    for (const auto& sink : queued) {
      EXPECT_EQ(sink->done(), 1) << "a queued job did not end exactly once";
      EXPECT_NE(sink->status().code(), absl::StatusCode::kOk);
    }
    EXPECT_EQ(holder->done(), 1);
    EXPECT_EQ(engine->jobs_in_flight(), 0);
  }
  EXPECT_TRUE(swept) << "Shutdown allocated more than the sweep tried";
  EXPECT_GT(failures, 0);
  std::printf("%d of Shutdown's allocations failed in turn\n", failures);
}

TEST(AllocationFailure, TakingJobsFromTheClientQueueAllocatesNothing) {
  ClientQueue<std::unique_ptr<int>> q;
  const std::vector<std::string> clients = {"a-client-with-a-long-name-1",
                                            "a-client-with-a-long-name-2",
                                            "a-client-with-a-long-name-3"};
  for (int i = 0; i < 3000; ++i) {
    q.Push(clients[static_cast<size_t>(i) % 3], std::make_unique<int>(i));
  }
  const int64_t before = t_allocations;
  int expected = 0;
  for (int i = 0; i < 1500; ++i) {
    std::unique_ptr<int> job = q.Pop();
    ASSERT_NE(job, nullptr);
    EXPECT_EQ(*job, expected++);
  }
  EXPECT_EQ(t_allocations - before, 0) << "Pop allocated";
  const int64_t before_take = t_allocations;
  std::vector<std::unique_ptr<int>> taken =
      q.TakeFronts(1000, [](const std::unique_ptr<int>& job) { return *job % 2 == 0; });
  EXPECT_EQ(t_allocations - before_take, 1) << "TakeFronts allocated beyond its one reserve";
  EXPECT_FALSE(taken.empty());
  // Shutdown's way: an empty queue per level, each level's jobs moved into it whole.
  const size_t left = q.size();
  ASSERT_GT(left, 0u);
  const int64_t before_all = t_allocations;
  ClientQueue<std::unique_ptr<int>> all;
  all = q.TakeAll();
  EXPECT_EQ(t_allocations - before_all, 0) << "TakeAll or moving its queue allocated";
  EXPECT_EQ(all.size(), left);
  EXPECT_TRUE(q.empty());
}

TEST(AllocationFailure, APushThatFailsLeavesTheQueueAndTheJobAsTheyWere) {
  int failures = 0;
  bool swept = false;
  for (int64_t k = 0; k < 100 && !swept; ++k) {
    ClientQueue<std::unique_ptr<int>> q;
    q.Push("an-existing-client-with-a-long-name", std::make_unique<int>(1));
    auto job = std::make_unique<int>(2);
    FailAfter(k);
    bool threw = false;
    try {
      q.Push("a-new-client-with-a-long-name", std::move(job));
    } catch (const std::bad_alloc&) {
      threw = true;
    }
    swept = !Disarm();
    if (!threw) {
      EXPECT_EQ(q.size(), 2u);
      EXPECT_EQ(q.clients(), 2u);
      continue;
    }
    ++failures;
    ASSERT_NE(job, nullptr) << "the job was lost with the failed Push";
    EXPECT_EQ(*job, 2);
    EXPECT_EQ(q.size(), 1u);
    EXPECT_EQ(q.clients(), 1u);
    EXPECT_EQ(*q.Pop(), 1);
    EXPECT_TRUE(q.empty());
    q.Push("a-new-client-with-a-long-name", std::move(job));  // the client may come again
    EXPECT_EQ(*q.Pop(), 2);
    EXPECT_EQ(q.clients(), 0u);
  }
  EXPECT_TRUE(swept);
  EXPECT_GT(failures, 0);
}

}  // namespace
}  // namespace gpupipe::engine
