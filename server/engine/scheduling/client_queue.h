// The jobs of one priority level waiting for a lane, served round-robin across clients: each
// client has its own first-in-first-out queue, and each Pop takes the oldest job of the next
// client in turn. So a client that queued a thousand jobs delays another client's job by at
// most one of its own per lane that frees up, not by all of them, and every client's jobs keep
// their order.
//
// Thread safety: none; the engine holds its lock around every call.
#pragma once

#include <algorithm>
#include <cstddef>
#include <deque>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace gpupipe::engine {

template <typename Job>
class ClientQueue {
 public:
  void Push(const std::string& client, Job job) {
    std::deque<Job>& own = by_client_[client];
    if (own.empty()) turns_.push_back(client);  // a client with nothing queued joins the round
    own.push_back(std::move(job));
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
  Job Pop() {
    std::string client = std::move(turns_.front());
    turns_.pop_front();
    auto it = by_client_.find(client);
    Job job = std::move(it->second.front());
    it->second.pop_front();
    if (it->second.empty()) {
      by_client_.erase(it);
    } else {
      turns_.push_back(std::move(client));
    }
    --size_;
    return job;
  }

  // Up to `max` jobs for which `take(job)` is true, taken only from the fronts of clients'
  // queues (so every client's jobs keep their order), one per client per round, in turn
  // order; a client whose front job is not taken is passed over. `take` may keep state (a
  // byte budget): it is asked once per job it may take, and a job it accepts is taken.
  template <typename Take>
  std::vector<Job> TakeFronts(size_t max, Take&& take) {
    std::vector<Job> taken;
    taken.reserve(std::min(max, size_));  // allocates before anything is taken
    bool progress = true;
    while (taken.size() < max && progress && size_ > 0) {
      progress = false;
      const size_t clients = turns_.size();
      for (size_t i = 0; i < clients && taken.size() < max; ++i) {
        std::string client = std::move(turns_.front());
        turns_.pop_front();
        auto it = by_client_.find(client);
        if (take(it->second.front())) {
          taken.push_back(std::move(it->second.front()));
          it->second.pop_front();
          --size_;
          progress = true;
        }
        if (it->second.empty()) {
          by_client_.erase(it);
        } else {
          turns_.push_back(std::move(client));
        }
      }
    }
    return taken;
  }

  // Every queued job, each client's in order; the queue is empty afterwards.
  std::vector<Job> TakeAll() {
    std::vector<Job> all;
    all.reserve(size_);
    for (const std::string& client : turns_) {
      for (Job& job : by_client_[client]) all.push_back(std::move(job));
    }
    by_client_.clear();
    turns_.clear();
    size_ = 0;
    return all;
  }

 private:
  std::unordered_map<std::string, std::deque<Job>> by_client_;  // no empty deques
  std::deque<std::string> turns_;  // clients with queued jobs, next to be served first
  size_t size_ = 0;
};

}  // namespace gpupipe::engine
