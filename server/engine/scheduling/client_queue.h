// The jobs of one priority level waiting for a lane, served round-robin across clients: each
// client has its own first-in-first-out queue, and each Pop takes the oldest job of the next
// client in turn. So a client that queued a thousand jobs delays another client's job by at
// most one of its own per lane that frees up, not by all of them, and every client's jobs keep
// their order.
//
// Failures: Push either queues the job or, when an allocation fails, throws and leaves the
// queue and the job as they were. Taking jobs out (Pop, TakeFronts, TakeAll) allocates
// nothing once it has started moving them (TakeAll nothing at all), so it cannot fail halfway:
// the engine takes a job for a lane under its lock, where a job half taken would be accepted
// and never ended.
//
// Thread safety: none; the engine holds its lock around every call.
#pragma once

#include <algorithm>
#include <cstddef>
#include <deque>
#include <list>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace gpupipe::engine {

template <typename Job>
class ClientQueue {
  static_assert(std::is_nothrow_move_constructible_v<Job>,
                "taking a job out must not fail halfway");

 public:
  // `job` is moved from only when it is queued.
  void Push(const std::string& client, Job&& job) {
    const auto [it, joined] = by_client_.try_emplace(client);
    try {
      // A client with nothing queued joins the round.
      if (joined) turns_.push_back(client);
      try {
        it->second.push_back(std::move(job));
      } catch (...) {
        if (joined) turns_.pop_back();
        throw;
      }
    } catch (...) {
      if (joined) by_client_.erase(it);
      throw;
    }
    ++size_;
  }

  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  // Clients with at least one job queued.
  size_t clients() const { return turns_.size(); }

  // The job Pop would return, left in the queue. Requires !empty().
  const Job& Front() const { return by_client_.find(turns_.front())->second.front(); }

  // The oldest job of the client whose turn it is; that client goes to the back of the round
  // if it has more. Requires !empty().
  Job Pop() noexcept {
    auto it = by_client_.find(turns_.front());
    Job job = std::move(it->second.front());
    it->second.pop_front();
    LeaveOrRotate(it);
    --size_;
    return job;
  }

  // Up to `max` jobs for which `take(job)` is true, taken only from the fronts of clients'
  // queues (so every client's jobs keep their order), one per client per round, in turn
  // order; a client whose front job is not taken is passed over. `take` may keep state (a
  // byte budget): it is asked once per job it may take, and a job it accepts is taken. `take`
  // must not throw.
  template <typename Take>
  std::vector<Job> TakeFronts(size_t max, Take&& take) {
    std::vector<Job> taken;
    taken.reserve(std::min(max, size_));  // the only allocation, before anything is taken
    bool progress = true;
    while (taken.size() < max && progress && size_ > 0) {
      progress = false;
      const size_t clients = turns_.size();
      for (size_t i = 0; i < clients && taken.size() < max; ++i) {
        auto it = by_client_.find(turns_.front());
        if (take(it->second.front())) {
          taken.push_back(std::move(it->second.front()));  // within the reserved capacity
          it->second.pop_front();
          --size_;
          progress = true;
        }
        LeaveOrRotate(it);
      }
    }
    return taken;
  }

  // Every queued job, as a queue of its own (Pop takes them in the same turns); this queue is
  // empty afterwards. Moves the containers whole, allocating nothing, so a caller that takes
  // the jobs under a lock and ends them after it cannot lose any on the way. (An empty queue
  // allocates nothing either: the standard library's containers here do not; see the
  // static_asserts after the class.)
  ClientQueue TakeAll() noexcept {
    ClientQueue all;
    all.by_client_.swap(by_client_);
    all.turns_.swap(turns_);
    std::swap(all.size_, size_);
    return all;
  }

 private:
  using ByClient = std::unordered_map<std::string, std::deque<Job>>;

  // After the front client of the round was served: it leaves the round if it has nothing
  // left, otherwise it goes to the back. Moves list nodes, allocating nothing.
  void LeaveOrRotate(typename ByClient::iterator it) noexcept {
    if (it->second.empty()) {
      by_client_.erase(it);
      turns_.pop_front();
    } else {
      turns_.splice(turns_.end(), turns_, turns_.begin());
    }
  }

  ByClient by_client_;            // no empty deques
  std::list<std::string> turns_;  // clients with queued jobs, next to be served first
  size_t size_ = 0;
};

// What Engine::Shutdown relies on to end every queued job whatever fails to allocate: an empty
// queue is made, and a taken one moved into it, without a throw.
static_assert(std::is_nothrow_default_constructible_v<ClientQueue<int>>);
static_assert(std::is_nothrow_move_assignable_v<ClientQueue<int>>);
static_assert(std::is_nothrow_move_constructible_v<ClientQueue<int>>);

}  // namespace gpupipe::engine
