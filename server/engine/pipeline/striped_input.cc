#include "server/engine/pipeline/striped_input.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace gpupipe::engine {

std::shared_ptr<StripedInput> StripedInput::Create(std::shared_ptr<InputRing> ring, int stripes) {
  return std::shared_ptr<StripedInput>(new StripedInput(std::move(ring), stripes));
}

StripedInput::StripedInput(std::shared_ptr<InputRing> ring, int stripes)
    : ring_(std::move(ring)), producers_(static_cast<size_t>(std::max(stripes, 1))) {}

void StripedInput::Attach(int p, Producer callbacks) {
  std::lock_guard<std::mutex> lock(mu_);
  producers_[static_cast<size_t>(p)].callbacks = std::move(callbacks);
}

bool StripedInput::Offer(int p, std::string message) {
  std::unique_lock<std::mutex> lock(mu_);
  Stripe& stripe = producers_[static_cast<size_t>(p)];
  stripe.parked = std::move(message);
  stripe.parked_taken = 0;
  stripe.has_parked = true;
  std::vector<Pending> pending;
  const bool taken = Pump(p, &pending);
  Run(lock, std::move(pending));
  return taken;
}

void StripedInput::End(int p) {
  std::unique_lock<std::mutex> lock(mu_);
  producers_[static_cast<size_t>(p)].ended = true;
  std::vector<Pending> pending;
  Pump(-1, &pending);
  Run(lock, std::move(pending));
}

void StripedInput::Fail(int p, const absl::Status& status) {
  std::unique_lock<std::mutex> lock(mu_);
  const bool first = !failed_;
  failed_ = true;
  std::vector<Pending> pending;
  if (first) {
    for (int q = 0; q < static_cast<int>(producers_.size()); ++q) {
      if (q != p) Tell(q, Call::kFailed, &pending, status);
    }
  }
  lock.unlock();
  // Not under mu_: a failing ring calls its room callback (OnRoom) at once.
  ring_->Fail(status);
  lock.lock();
  Run(lock, std::move(pending));
}

void StripedInput::Detach(int p) {
  std::unique_lock<std::mutex> lock(mu_);
  Stripe& stripe = producers_[static_cast<size_t>(p)];
  stripe.callbacks = Producer();
  const std::thread::id self = std::this_thread::get_id();
  callback_done_.wait(lock, [&] {
    return std::all_of(stripe.calling.begin(), stripe.calling.end(),
                       [&](std::thread::id id) { return id == self; });
  });
}

absl::Status StripedInput::EarlyEndError() const {
  return absl::InvalidArgumentError(
      absl::StrCat("input ended after ", ring_->received(), " of ", ring_->size(), " bytes"));
}

void StripedInput::OnRoom() {
  std::unique_lock<std::mutex> lock(mu_);
  std::vector<Pending> pending;
  Pump(-1, &pending);
  Run(lock, std::move(pending));
}

bool StripedInput::Pump(int offerer, std::vector<Pending>* pending) {
  bool offerer_taken = false;
  const int stripes = static_cast<int>(producers_.size());
  while (true) {
    if (!ring_->failure().ok()) {
      // The job is ending: its Done ends every call; nothing parked matters any more.
      for (Stripe& stripe : producers_) {
        stripe.has_parked = false;
        stripe.parked = std::string();
      }
      return false;
    }
    const int p = static_cast<int>(next_ % stripes);
    Stripe& stripe = producers_[static_cast<size_t>(p)];
    if (!stripe.has_parked) {
      if (ring_->complete()) {
        OnComplete(pending);
      } else if (stripe.ended) {
        Tell(p, Call::kEndedEarly, pending);
      }
      return offerer_taken;
    }
    // The ring calls back once it has room again; the callback must not keep this alive.
    absl::StatusOr<int64_t> taken =
        ring_->Write(stripe.parked.data() + stripe.parked_taken,
                     static_cast<int64_t>(stripe.parked.size() - stripe.parked_taken),
                     [weak = weak_from_this()] {
                       if (const std::shared_ptr<StripedInput> self = weak.lock()) self->OnRoom();
                     });
    if (!taken.ok()) {
      if (!ring_->failure().ok()) continue;
      stripe.has_parked = false;
      stripe.parked = std::string();
      Tell(p, Call::kOverrun, pending, taken.status());
      return offerer_taken;
    }
    stripe.parked_taken += static_cast<size_t>(*taken);
    if (stripe.parked_taken < stripe.parked.size()) return offerer_taken;  // OnRoom goes on
    stripe.has_parked = false;
    stripe.parked = std::string();
    ++next_;
    if (p == offerer) {
      offerer_taken = true;
    } else {
      Tell(p, Call::kResume, pending);
    }
  }
}

void StripedInput::OnComplete(std::vector<Pending>* pending) {
  bool all_ended = true;
  for (size_t i = 0; i < producers_.size(); ++i) {
    Stripe& stripe = producers_[i];
    if (stripe.has_parked) {
      // Its message is beyond the last byte (the input's messages before it filled the ring).
      stripe.has_parked = false;
      const int64_t extra = static_cast<int64_t>(stripe.parked.size() - stripe.parked_taken);
      stripe.parked = std::string();
      Tell(static_cast<int>(i), Call::kOverrun, pending,
           absl::InvalidArgumentError(absl::StrCat("input: ", ring_->size() + extra,
                                                   " bytes sent, but the shape and dtype give ",
                                                   ring_->size())));
    }
    all_ended = all_ended && stripe.ended;
  }
  if (!all_ended || failed_) return;
  for (size_t i = 0; i < producers_.size(); ++i)
    Tell(static_cast<int>(i), Call::kComplete, pending);
}

void StripedInput::Tell(int p, Call call, std::vector<Pending>* pending, absl::Status status) {
  Stripe& stripe = producers_[static_cast<size_t>(p)];
  if (call != Call::kResume) {
    if (stripe.told) return;
    stripe.told = true;
  }
  pending->push_back(Pending{p, call, std::move(status)});
}

void StripedInput::Run(std::unique_lock<std::mutex>& lock, std::vector<Pending> pending) {
  const std::thread::id self = std::this_thread::get_id();
  for (Pending& item : pending) {
    Stripe& stripe = producers_[static_cast<size_t>(item.producer)];
    const Producer& callbacks = stripe.callbacks;
    // The ones with a status are bound to it; an empty callback (detached) is not called.
    const auto with = [&](const std::function<void(const absl::Status&)>& f) {
      return f ? std::function<void()>([f, status = item.status] { f(status); })
               : std::function<void()>();
    };
    std::function<void()> call;
    switch (item.call) {
      case Call::kResume:
        call = callbacks.resume;
        break;
      case Call::kOverrun:
        call = with(callbacks.overrun);
        break;
      case Call::kEndedEarly:
        call = callbacks.ended_early;
        break;
      case Call::kComplete:
        call = callbacks.complete;
        break;
      case Call::kFailed:
        call = with(callbacks.failed);
        break;
    }
    if (!call) continue;  // detached meanwhile
    stripe.calling.push_back(self);
    lock.unlock();
    call();
    lock.lock();
    stripe.calling.erase(std::find(stripe.calling.begin(), stripe.calling.end(), self));
    callback_done_.notify_all();
  }
}

}  // namespace gpupipe::engine
