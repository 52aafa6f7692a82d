// A streamed upload whose messages come from several producers (the calls of a Run split over
// several streams), put back in order in front of the job's InputRing. The upload is a sequence
// of messages; message m comes from producer m % stripes(), and each producer sends its own
// messages in order. A producer whose message is not the next one parks it and reads nothing
// more until the ring has taken it, so besides the ring the upload holds at most one message
// per producer, and a producer that runs ahead waits on the one that is behind (gRPC's flow
// control holds its client back meanwhile). One producer is the plain streamed upload.
//
// Producers never block, as InputRing::Write: Offer says whether the message was taken, and the
// producer's callbacks report what happens later, from whichever thread makes it happen:
//  - resume: a parked message was taken; read the next one;
//  - overrun: the producer sent bytes beyond the input's size (its message arrived after the
//    last byte), so its upload is broken;
//  - ended_early: the producer ended while the input still needed its next message;
//  - complete: the whole input is in and every producer has ended (so no producer can still
//    break the upload: each call of a run ends alike);
//  - failed: another producer's upload broke (Fail), with its status.
// A ring that fails (the job ended, or a producer's upload broke) takes nothing more, and no
// producer is resumed.
//
// Thread safety: every method may be called from any thread; callbacks run with no lock held.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "server/engine/pipeline/input_ring.h"

namespace gpupipe::engine {

class StripedInput final : public std::enable_shared_from_this<StripedInput> {
 public:
  struct Producer {
    std::function<void()> resume;
    std::function<void(const absl::Status&)> overrun;
    std::function<void()> ended_early;
    std::function<void()> complete;
    std::function<void(const absl::Status&)> failed;
  };

  // `stripes` >= 1 producers feeding `ring`.
  static std::shared_ptr<StripedInput> Create(std::shared_ptr<InputRing> ring, int stripes);

  int stripes() const { return static_cast<int>(producers_.size()); }
  InputRing& ring() const { return *ring_; }

  // Sets producer p's callbacks; before its first Offer.
  void Attach(int p, Producer callbacks);
  // Producer p's next message. True when the ring took all of it (read the next one now);
  // false when it is parked (`resume` follows once it is taken) or refused (the ring failed,
  // or `overrun` was called).
  bool Offer(int p, std::string message);
  // Producer p sent its last message (its stream half-closed). Calls `complete` or
  // `ended_early` now or later, or nothing when the ring fails first.
  void End(int p);
  // Producer p's upload broke (`status`: it overran, ended early, was cancelled): the ring
  // fails with `status` (ending the job unless it is over) and every other producer is told
  // (`failed`), once.
  void Fail(int p, const absl::Status& status);
  // Producer p goes away: none of its callbacks is called once this returns, and none is
  // running (unless called from inside one).
  void Detach(int p);

  // The input's bytes taken so far; "input ended after X of Y bytes" for a producer's early end.
  absl::Status EarlyEndError() const;

 private:
  enum class Call { kResume, kOverrun, kEndedEarly, kComplete, kFailed };
  struct Stripe {
    Producer callbacks;
    std::string parked;       // the message waiting for its turn, or being written
    size_t parked_taken = 0;  // of it, in the ring
    bool has_parked = false;
    bool ended = false;
    bool told = false;                     // complete, ended_early or overrun was called
    std::vector<std::thread::id> calling;  // threads running its callbacks now
  };
  // A callback to run once the lock is released (unless its producer detached meanwhile).
  struct Pending {
    int producer;
    Call call;
    absl::Status status;  // for kOverrun and kFailed
  };

  StripedInput(std::shared_ptr<InputRing> ring, int stripes);

  // Writes parked messages into the ring in sequence order, as far as they go. `offerer` is
  // the producer whose Offer runs this (its own taken message is answered by Offer's result,
  // not by `resume`), or -1. Returns whether the offerer's message was taken. Called with mu_.
  bool Pump(int offerer, std::vector<Pending>* pending);
  // The whole input is in: every ended producer completes, and any parked message overran.
  void OnComplete(std::vector<Pending>* pending);
  // Queues producer p's callback `call`; the terminal ones (all but kResume) once per producer.
  void Tell(int p, Call call, std::vector<Pending>* pending, absl::Status status = {});
  // Runs `pending` callbacks with the lock released; takes and returns it.
  void Run(std::unique_lock<std::mutex>& lock, std::vector<Pending> pending);
  // Called by the ring when it has room again (or failed).
  void OnRoom();

  const std::shared_ptr<InputRing> ring_;
  mutable std::mutex mu_;
  std::condition_variable callback_done_;
  std::vector<Stripe> producers_;
  int64_t next_ = 0;  // sequence number of the next message the ring takes
  bool failed_ = false;  // Fail was called
};

}  // namespace gpupipe::engine
