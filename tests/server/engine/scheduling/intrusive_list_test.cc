// The engine's set of running jobs: links carried by the objects themselves.
#include "server/engine/scheduling/intrusive_list.h"

#include <gtest/gtest.h>

#include <vector>

namespace gpupipe::engine {
namespace {

struct Item {
  int value = 0;
  ListLinks<Item> links;
};
using List = IntrusiveList<Item, &Item::links>;

std::vector<int> Values(const List& list) {
  std::vector<int> values;
  list.ForEach([&](const Item& item) { values.push_back(item.value); });
  return values;
}

TEST(IntrusiveList, KeepsOrderAndErasesFromAnyPlace) {
  Item a{1}, b{2}, c{3}, d{4};
  List list;
  EXPECT_TRUE(list.empty());
  for (Item* item : {&a, &b, &c, &d}) list.PushBack(*item);
  EXPECT_EQ(list.size(), 4u);
  EXPECT_EQ(Values(list), (std::vector<int>{1, 2, 3, 4}));
  EXPECT_TRUE(list.Erase(b));  // the middle
  EXPECT_EQ(Values(list), (std::vector<int>{1, 3, 4}));
  EXPECT_TRUE(list.Erase(a));  // the head
  EXPECT_TRUE(list.Erase(d));  // the tail
  EXPECT_EQ(Values(list), (std::vector<int>{3}));
  EXPECT_FALSE(list.Contains(a));
  EXPECT_TRUE(list.Contains(c));
  list.PushBack(a);  // an erased object may come back
  EXPECT_EQ(Values(list), (std::vector<int>{3, 1}));
  EXPECT_TRUE(list.Erase(c));
  EXPECT_TRUE(list.Erase(a));
  EXPECT_TRUE(list.empty());
  EXPECT_EQ(Values(list), std::vector<int>{});
}

TEST(IntrusiveList, ErasingWhatIsNotInItChangesNothing) {
  Item a{1}, b{2};
  List list;
  EXPECT_FALSE(list.Erase(a));
  list.PushBack(a);
  EXPECT_FALSE(list.Erase(b));
  EXPECT_TRUE(list.Erase(a));
  EXPECT_FALSE(list.Erase(a));  // twice: the second finds it gone
  EXPECT_EQ(list.size(), 0u);
}

TEST(IntrusiveList, ACopyOfALinkedObjectIsInNoList) {
  Item a{1};
  List list;
  list.PushBack(a);
  Item copy = a;
  EXPECT_FALSE(list.Contains(copy));
  EXPECT_FALSE(list.Erase(copy));
  Item assigned{2};
  assigned = a;
  EXPECT_FALSE(list.Contains(assigned));
  EXPECT_EQ(Values(list), (std::vector<int>{1}));
}

}  // namespace
}  // namespace gpupipe::engine
