// StallWatch on its own: a stream whose write waits past the timeout has its call cancelled,
// whenever in the watch's rounds it was registered or began to wait, while other calls register
// and end all the time; a stream with nothing in flight, or one its call has left, is not.
#include "server/rpc/stall_watch.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

namespace gpupipe::rpc {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// A call whose client reads nothing: writes never complete; cancels are counted.
class UnreadWriter final : public EventWriter {
 public:
  void WriteEvent(const v1::JobEvent* /*event*/, bool /*more_follow*/) override {}
  void FinishCall(const grpc::Status& /*status*/) override {}
  void WriteLastAndFinish(v1::JobEvent* /*event*/, const grpc::Status& /*status*/) override {}
  void CancelCall() override {
    cancelled_at_ = Clock::now();
    cancels_.fetch_add(1);
  }
  int cancels() const { return cancels_.load(); }
  Clock::time_point cancelled_at() const { return cancelled_at_; }

 private:
  std::atomic<int> cancels_{0};
  std::atomic<Clock::time_point> cancelled_at_{};
};

// Starts a write on `stream`: its Accepted goes to the writer, which never completes it.
void StartWrite(EventStream& stream) {
  engine::AcceptedInfo info;
  info.job_id = "j";
  info.output_shape = {1, 1024};
  stream.OnAccepted(info);
}

// Waits until `done` or `limit` passes; true if `done`.
template <typename Done>
bool WaitFor(Done done, milliseconds limit) {
  const Clock::time_point end = Clock::now() + limit;
  while (!done()) {
    if (Clock::now() > end) return false;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return true;
}

// Short, so that a test waits little: the watch looks a few times within each timeout.
constexpr milliseconds kTimeout{60};
constexpr milliseconds kGenerous{5000};  // for a loaded or instrumented test host

TEST(StallWatch, AWriteThatWaitsPastTheTimeoutIsCancelledEvenRoundsAfterItsRegistration) {
  StallWatch watch(kTimeout);
  UnreadWriter writer;
  auto stream = std::make_shared<EventStream>(&writer, 16);
  watch.Watch(stream);
  // Several rounds with nothing in flight: the stream must stay watched across them.
  std::this_thread::sleep_for(kTimeout * 2);
  EXPECT_EQ(writer.cancels(), 0);
  const Clock::time_point began = Clock::now();
  StartWrite(*stream);
  ASSERT_TRUE(WaitFor([&] { return writer.cancels() > 0; }, kGenerous));
  EXPECT_GE(writer.cancelled_at() - began, kTimeout);
  EXPECT_EQ(writer.cancels(), 1);
  stream->Detach();
}

TEST(StallWatch, CallsThatRegisterAndEndDuringItsRoundsDoNotHideAStalledOne) {
  StallWatch watch(kTimeout);
  std::atomic<bool> stop{false};
  UnreadWriter churn_writer;
  // Other calls: register, and end at once, as small jobs do, for the whole test.
  std::thread churn([&] {
    while (!stop.load()) {
      for (int i = 0; i < 100; ++i) {
        auto s = std::make_shared<EventStream>(&churn_writer, 16);
        watch.Watch(s);
        s->Detach();
      }
      std::this_thread::sleep_for(milliseconds(1));
    }
  });
  std::this_thread::sleep_for(kTimeout / 2);
  UnreadWriter stalled_writer, idle_writer;
  auto stalled = std::make_shared<EventStream>(&stalled_writer, 16);
  auto idle = std::make_shared<EventStream>(&idle_writer, 16);
  watch.Watch(stalled);
  watch.Watch(idle);
  StartWrite(*stalled);
  const bool cancelled = WaitFor([&] { return stalled_writer.cancels() > 0; }, kGenerous);
  // A few more rounds: the call with nothing in flight is left alone.
  std::this_thread::sleep_for(kTimeout * 2);
  stop = true;
  churn.join();
  EXPECT_TRUE(cancelled);
  EXPECT_EQ(stalled_writer.cancels(), 1);
  EXPECT_EQ(idle_writer.cancels(), 0);
  EXPECT_EQ(churn_writer.cancels(), 0);
  stalled->Detach();
  idle->Detach();
}

TEST(StallWatch, AStreamItsCallLeftIsNotCancelled) {
  StallWatch watch(kTimeout);
  UnreadWriter writer;
  auto stream = std::make_shared<EventStream>(&writer, 16);
  watch.Watch(stream);
  StartWrite(*stream);
  stream->Detach();  // the call is over (OnDone) while its write still waited
  std::this_thread::sleep_for(kTimeout * 3);
  EXPECT_EQ(writer.cancels(), 0);
}

TEST(StallWatch, WithoutATimeoutNothingIsWatched) {
  StallWatch watch(milliseconds(0));
  UnreadWriter writer;
  auto stream = std::make_shared<EventStream>(&writer, 16);
  watch.Watch(stream);
  StartWrite(*stream);
  std::this_thread::sleep_for(kTimeout * 2);
  EXPECT_EQ(writer.cancels(), 0);
  stream->Detach();
}

}  // namespace
}  // namespace gpupipe::rpc
