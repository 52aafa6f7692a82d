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
  for (int i = 0; i < 1000; ++i) q.Push("flood", i);
  EXPECT_EQ(q.Pop(), 0);  // a lane takes the flood's first job
  q.Push("late", -1);
  EXPECT_EQ(q.Pop(), 1);  // the flood's turn came before the late client joined
  EXPECT_EQ(q.Pop(), -1);
  EXPECT_EQ(q.size(), 998u);
}

TEST(ClientQueue, TakeAllEmptiesItAndKeepsEachClientsOrder) {
  ClientQueue<int> q;
  q.Push("a", 1);
  q.Push("b", 10);
  q.Push("a", 2);
  std::vector<int> all = q.TakeAll();
  EXPECT_EQ(all, (std::vector<int>{1, 2, 10}));
  EXPECT_TRUE(q.empty());
  q.Push("b", 11);  // usable again
  EXPECT_EQ(q.Pop(), 11);
}

}  // namespace
}  // namespace gpupipe::engine
