// PriorityGate: a level sees only running jobs of higher levels, for as long as they run, from
// any number of threads.
#include "server/engine/scheduling/priority_gate.h"

#include <gtest/gtest.h>

#include <optional>
#include <thread>
#include <vector>

namespace gpupipe::engine {
namespace {

TEST(PriorityGate, OnlyHigherLevelsHoldALevelBack) {
  PriorityGate gate(3);
  EXPECT_FALSE(gate.HigherRunning(0));
  {
    PriorityGate::Running normal = gate.Enter(1);
    EXPECT_TRUE(gate.HigherRunning(0));
    EXPECT_FALSE(gate.HigherRunning(1));  // its own level does not hold it back
    EXPECT_FALSE(gate.HigherRunning(2));
    {
      PriorityGate::Running high = gate.Enter(2);
      EXPECT_TRUE(gate.HigherRunning(1));
      EXPECT_FALSE(gate.HigherRunning(2));
    }
    EXPECT_FALSE(gate.HigherRunning(1));
    EXPECT_TRUE(gate.HigherRunning(0));
  }
  EXPECT_FALSE(gate.HigherRunning(0));
}

TEST(PriorityGate, MovedFromRunningCountsOnce) {
  PriorityGate gate(2);
  std::optional<PriorityGate::Running> outer;
  {
    PriorityGate::Running r = gate.Enter(1);
    outer.emplace(std::move(r));
  }  // the moved-from r leaves without uncounting
  EXPECT_TRUE(gate.HigherRunning(0));
  outer.reset();
  EXPECT_FALSE(gate.HigherRunning(0));
}

TEST(PriorityGate, ConcurrentJobsBalance) {
  PriorityGate gate(3);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&gate, t] {
      for (int i = 0; i < 10000; ++i) PriorityGate::Running r = gate.Enter(1 + t % 2);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_FALSE(gate.HigherRunning(0));
}

}  // namespace
}  // namespace gpupipe::engine
