// A list of objects that carry their own links, so that adding and removing one never
// allocates and cannot fail. The engine moves a job from its queue to a lane under its lock;
// an allocation there that failed would leave the job half-moved, accepted but never ended.
//
// Thread safety: none; the owner's lock guards the list and the links of every object in it.
#pragma once

#include <cassert>
#include <cstddef>

namespace gpupipe::engine {

// The links of one object in one IntrusiveList; a member of the object. A copy of an object
// is in no list, whatever the original is in.
template <typename T>
struct ListLinks {
  ListLinks() = default;
  ListLinks(const ListLinks&) noexcept {}
  ListLinks& operator=(const ListLinks&) noexcept { return *this; }

  T* prev = nullptr;
  T* next = nullptr;
  bool linked = false;
};

// The objects in it must stay where they are (no copy or move) while they are linked.
template <typename T, ListLinks<T> T::*kLinks>
class IntrusiveList {
 public:
  IntrusiveList() = default;
  IntrusiveList(const IntrusiveList&) = delete;
  IntrusiveList& operator=(const IntrusiveList&) = delete;

  // Requires !Contains(item).
  void PushBack(T& item) noexcept {
    ListLinks<T>& links = item.*kLinks;
    assert(!links.linked);
    links.prev = tail_;
    links.next = nullptr;
    links.linked = true;
    if (tail_ != nullptr) {
      (tail_->*kLinks).next = &item;
    } else {
      head_ = &item;
    }
    tail_ = &item;
    ++size_;
  }

  // Takes `item` out; whether it was in.
  bool Erase(T& item) noexcept {
    ListLinks<T>& links = item.*kLinks;
    if (!links.linked) return false;
    if (links.prev != nullptr) {
      (links.prev->*kLinks).next = links.next;
    } else {
      head_ = links.next;
    }
    if (links.next != nullptr) {
      (links.next->*kLinks).prev = links.prev;
    } else {
      tail_ = links.prev;
    }
    links.prev = nullptr;
    links.next = nullptr;
    links.linked = false;
    --size_;
    return true;
  }

  bool Contains(const T& item) const noexcept { return (item.*kLinks).linked; }
  size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }

  // Calls `visit(const T&)` for each object, oldest first; `visit` must not change the list.
  template <typename Visit>
  void ForEach(Visit&& visit) const {
    for (const T* item = head_; item != nullptr; item = (item->*kLinks).next) visit(*item);
  }

 private:
  T* head_ = nullptr;
  T* tail_ = nullptr;
  size_t size_ = 0;
};

}  // namespace gpupipe::engine
