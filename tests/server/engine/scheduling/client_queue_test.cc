// Round-robin across clients within one priority level.
#include "server/engine/scheduling/client_queue.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpupipe::engine {
namespace {

TEST(ClientQueue, ServesClientsInTurnAndEachClientInOrder) {
  ClientQueue<std::string> q;
  for (int i = 0; i < 5; ++i) q.Push("flood", "f" + std::to_string(i));
  q.Push("b", "b0");
  q.Push("c", "c0");
  q.Push("b", "b1");
  EXPECT_EQ(q.size(), 8u);
  EXPECT_EQ(q.clients(), 3u);
  std::vector<std::string> order;
  while (!q.empty()) order.push_back(q.Pop());
  EXPECT_EQ(order, (std::vector<std::string>{"f0", "b0", "c0", "f1", "b1", "f2", "f3", "f4"}));
  EXPECT_EQ(q.clients(), 0u);
}

TEST(ClientQueue, AClientThatArrivesLateWaitsForOneJobOfEachClientAhead) {
  ClientQueue<int> q;
  for (int i = 0; i < 1000; ++i) q.Push("flood", int{i});
  EXPECT_EQ(q.Pop(), 0);  // a lane takes the flood's first job
  q.Push("late", -1);
  EXPECT_EQ(q.Pop(), 1);  // the flood's turn came before the late client joined
  EXPECT_EQ(q.Pop(), -1);
  EXPECT_EQ(q.size(), 998u);
}

TEST(ClientQueue, TakeAllEmptiesItAndKeepsTheTurnsAndEachClientsOrder) {
  ClientQueue<int> q;
  q.Push("a", 1);
  q.Push("b", 10);
  q.Push("a", 2);
  ClientQueue<int> all = q.TakeAll();
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.clients(), 0u);
  EXPECT_EQ(all.size(), 3u);
  EXPECT_EQ(all.clients(), 2u);
  std::vector<int> order;
  while (!all.empty()) order.push_back(all.Pop());
  EXPECT_EQ(order, (std::vector<int>{1, 10, 2}));
  q.Push("b", 11);  // usable again
  EXPECT_EQ(q.Pop(), 11);
}

TEST(ClientQueue, TakeFrontsTakesEachClientsFrontInTurnAndPassesOverTheRest) {
  ClientQueue<int> q;
  q.Push("a", 1);
  q.Push("a", 2);
  q.Push("b", 10);
  q.Push("b", 11);
  q.Push("c", 20);
  // Even numbers only: a's front is passed over, so its 2 stays behind it; b gives one a
  // round; c leaves the round once it has nothing left.
  std::vector<int> taken = q.TakeFronts(10, [](int x) { return x % 2 == 0; });
  EXPECT_EQ(taken, (std::vector<int>{10, 20}));
  EXPECT_EQ(q.size(), 3u);
  EXPECT_EQ(q.clients(), 2u);
  // At most `max`, and the turns go on where they were.
  taken = q.TakeFronts(1, [](int) { return true; });
  EXPECT_EQ(taken, (std::vector<int>{1}));
  EXPECT_EQ(q.Pop(), 11);
  EXPECT_EQ(q.Pop(), 2);
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.clients(), 0u);
}

}  // namespace
}  // namespace gpupipe::engine
