#include "server/rpc/run_groups.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/thread_name.h"
#include "server/rpc/fan_out_sink.h"
#include "server/rpc/status_mapping.h"

namespace gpupipe::rpc {
namespace {

constexpr size_t kMinKeyBytes = 16;
constexpr size_t kMaxKeyBytes = 64;
constexpr std::chrono::seconds kRefusalMemory{30};
// Where uploads have no idle timeout, a run's calls still have this long to come.
constexpr std::chrono::seconds kTimeoutWithoutLimit{30};

void FinishAll(const std::vector<std::shared_ptr<RunSeat>>& seats, const absl::Status& status) {
  for (const std::shared_ptr<RunSeat>& seat : seats) {
    if (seat) seat->stream()->FinishNow(ToGrpcStatus(status));
  }
}

}  // namespace

bool RunSeat::StartUpload(std::shared_ptr<engine::StripedInput> upload) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  if (!start_) return false;
  start_(std::move(upload));
  return true;
}

void RunSeat::Leave() {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  start_ = nullptr;
}

RunGroups::RunGroups(engine::Engine* engine, std::chrono::milliseconds timeout,
                     RunGroupLimits limits)
    : engine_(engine),
      timeout_(timeout.count() > 0 ? timeout : kTimeoutWithoutLimit),
      limits_(limits),
      thread_([this] { Loop(); }) {}

RunGroups::~RunGroups() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

absl::Status RunGroups::CheckName(const v1::RunStripes& stripes, bool with_spec,
                                  int max_streams) {
  const char* field = with_spec ? "stripes" : "join";
  if (stripes.key().size() < kMinKeyBytes || stripes.key().size() > kMaxKeyBytes) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".key: ", stripes.key().size(),
                                                   " bytes; give ", kMinKeyBytes, " to ",
                                                   kMaxKeyBytes, " random bytes"));
  }
  if (stripes.count() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".count: ", stripes.count(), "; a run split over calls has 2 or more"));
  }
  if (stripes.count() > static_cast<uint32_t>(max_streams)) {
    return absl::ResourceExhaustedError(
        absl::StrCat(field, ".count: ", stripes.count(), " calls, over the server's limit of ",
                     max_streams, " (Limits.max_run_streams, gpupiped --max-run-streams)"));
  }
  return absl::OkStatus();
}

absl::Status RunGroups::Check(const v1::RunStripes& stripes, bool with_spec, int max_streams) {
  if (absl::Status bad = CheckName(stripes, with_spec, max_streams); !bad.ok()) return bad;
  if (with_spec && stripes.index() != 0) {
    return absl::InvalidArgumentError(absl::StrCat("stripes.index: ", stripes.index(),
                                                   "; the call that sends the spec is stripe 0"));
  }
  if (!with_spec && (stripes.index() == 0 || stripes.index() >= stripes.count())) {
    return absl::InvalidArgumentError(
        absl::StrCat("join.index: ", stripes.index(), "; the calls that join are stripes 1 to ",
                     stripes.count() - 1, " (stripe 0 sends the spec)"));
  }
  return absl::OkStatus();
}

RunGroups::Run* RunGroups::Find(const std::string& client, const std::string& key, int count,
                                absl::Status* refusal) {
  // The key is opaque bytes; the client's identity is text without a NUL.
  std::string name = absl::StrCat(client, std::string(1, '\0'), key);
  if (auto it = runs_.find(name); it != runs_.end()) return &it->second;
  auto mine_it = waiting_by_client_.find(client);
  const int mine = mine_it == waiting_by_client_.end() ? 0 : mine_it->second;
  // Refused runs stay a while as tombstones: they are bounded too, so that a flood of calls
  // with fresh keys and bad specs holds bounded memory.
  if (mine >= limits_.max_client_runs || waiting_ >= limits_.max_runs ||
      runs_.size() >= 2 * static_cast<size_t>(limits_.max_runs)) {
    *refusal = absl::ResourceExhaustedError(absl::StrCat(
        mine >= limits_.max_client_runs
            ? absl::StrCat("this client has ", mine, " runs waiting for their calls already (",
                           "gpupiped --max-client-uploads)")
            : absl::StrCat("the server has ", runs_.size(),
                           " runs waiting for their calls or recently refused"),
        "; retry once they started"));
    engine_->CountRefusal(*refusal);
    if (runs_.size() >= 2 * static_cast<size_t>(limits_.max_runs)) return nullptr;
    // Remembered as a refused run, so that its other calls get the same answer at once.
    Run& refused = runs_[name];
    refused.name = std::move(name);
    refused.client = client;
    refused.count = count;
    refused.failure = *refusal;
    refused.deadline = std::chrono::steady_clock::now() + kRefusalMemory;
    return &refused;
  }
  ++waiting_by_client_[client];
  ++waiting_;
  Run& run = runs_[name];
  run.name = std::move(name);
  run.client = client;
  run.count = count;
  run.seats.resize(static_cast<size_t>(count));
  run.deadline = std::chrono::steady_clock::now() + timeout_;
  wake_.notify_all();
  return &run;
}

void RunGroups::Uncount(const Run& run) {
  --waiting_;
  auto it = waiting_by_client_.find(run.client);
  if (it != waiting_by_client_.end() && --it->second <= 0) waiting_by_client_.erase(it);
}

void RunGroups::Arrive(const std::string& client, const v1::RunStripes& stripes,
                       std::shared_ptr<RunSeat> seat, std::optional<engine::JobSpec> spec) {
  const int count = static_cast<int>(stripes.count());
  const int index = static_cast<int>(stripes.index());
  std::vector<std::shared_ptr<RunSeat>> refused;
  absl::Status refusal;
  std::optional<Run> complete;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Run* run = Find(client, stripes.key(), count, &refusal);
    if (run != nullptr && run->failure.ok()) {
      if (count != run->count) {
        FailLocked(*run,
                   absl::InvalidArgumentError(
                       absl::StrCat("stripes.count: the calls of one run disagree (", run->count,
                                    " and ", count, "); every call of a run gives the same count")),
                   &refused);
      } else if (run->seats[static_cast<size_t>(index)] != nullptr) {
        FailLocked(*run,
                   absl::InvalidArgumentError(
                       absl::StrCat("stripes.index: two calls of one run claim stripe ", index,
                                    " (a key used for two runs at once?)")),
                   &refused);
      }
    }
    if (run != nullptr && !run->failure.ok()) refusal = run->failure;
    if (!refusal.ok()) {
      refused.push_back(std::move(seat));
    } else {
      seat->run_ = run->name;
      run->seats[static_cast<size_t>(index)] = std::move(seat);
      if (spec) run->spec = std::move(spec);
      if (++run->seated == run->count) {
        Uncount(*run);
        complete = std::move(*run);
        runs_.erase(complete->name);
      }
    }
  }
  FinishAll(refused, refusal);
  if (complete) StartRun(*std::move(complete));
}

void RunGroups::Refuse(const std::string& client, const v1::RunStripes& stripes,
                       std::shared_ptr<RunSeat> seat, const absl::Status& status) {
  std::vector<std::shared_ptr<RunSeat>> refused = {std::move(seat)};
  absl::Status refusal;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Run* run = Find(client, stripes.key(), static_cast<int>(stripes.count()), &refusal);
    if (run == nullptr) {
      refusal = status;  // Find counted the refusal
    } else {
      if (run->failure.ok()) FailLocked(*run, status, &refused);
      refusal = run->failure;
    }
  }
  FinishAll(refused, refusal);
}

void RunGroups::Leave(const RunSeat& seat, const absl::Status& status) {
  std::vector<std::shared_ptr<RunSeat>> refused;
  absl::Status refusal;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = runs_.find(seat.run_);
    if (it == runs_.end() || !it->second.failure.ok()) return;
    const std::vector<std::shared_ptr<RunSeat>>& seats = it->second.seats;
    if (std::none_of(seats.begin(), seats.end(),
                     [&](const std::shared_ptr<RunSeat>& s) { return s.get() == &seat; })) {
      return;
    }
    FailLocked(it->second,
               absl::Status(status.code(), absl::StrCat("stripe ", seat.index(),
                                                        " of the run: ", status.message())),
               &refused);
    refusal = it->second.failure;
  }
  FinishAll(refused, refusal);
}

void RunGroups::FailLocked(Run& run, absl::Status status,
                           std::vector<std::shared_ptr<RunSeat>>* refused) {
  engine_->CountRefusal(status);
  Uncount(run);
  run.failure = std::move(status);
  // Remembered a while for the run's late calls, which get the same answer.
  run.deadline = std::chrono::steady_clock::now() + kRefusalMemory;
  run.spec.reset();
  for (std::shared_ptr<RunSeat>& seat : run.seats) {
    if (seat) refused->push_back(std::move(seat));
  }
  run.seats.clear();
}

void RunGroups::StartRun(Run run) {
  std::vector<std::shared_ptr<EventStream>> streams;
  for (const std::shared_ptr<RunSeat>& seat : run.seats) streams.push_back(seat->stream());
  absl::StatusOr<std::shared_ptr<engine::InputRing>> ring =
      engine_->SubmitStreamed(*std::move(run.spec), std::make_shared<FanOutSink>(streams));
  if (!ring.ok()) {
    FinishAll(run.seats, ring.status());  // the engine counted the refusal
    return;
  }
  if (*ring == nullptr) {
    // A dry run, answered already on every call: none reads input, nor waits for its end.
    for (const std::shared_ptr<EventStream>& stream : streams) stream->InputEnded();
    return;
  }
  const std::shared_ptr<engine::StripedInput> upload =
      engine::StripedInput::Create(*ring, run.count);
  for (const std::shared_ptr<RunSeat>& seat : run.seats) {
    if (!seat->StartUpload(upload)) {
      upload->Fail(seat->index(),
                   absl::CancelledError(absl::StrCat("stripe ", seat->index(),
                                                     " of the run ended before its job started")));
    }
  }
}

void RunGroups::Loop() {
  NameThisThread("gp-run-groups");
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    const auto now = std::chrono::steady_clock::now();
    auto next = std::chrono::steady_clock::time_point::max();
    std::vector<std::pair<std::vector<std::shared_ptr<RunSeat>>, absl::Status>> expired;
    for (auto it = runs_.begin(); it != runs_.end();) {
      Run& run = it->second;
      if (run.deadline > now) {
        next = std::min(next, run.deadline);
        ++it;
        continue;
      }
      if (run.failure.ok()) {
        std::vector<std::shared_ptr<RunSeat>> refused;
        FailLocked(run,
                   absl::DeadlineExceededError(absl::StrCat(
                       run.seated, " of the run's ", run.count, " calls came within ",
                       timeout_.count() / 1000.0, " s (gpupiped --upload-idle-timeout-seconds)")),
                   &refused);
        expired.emplace_back(std::move(refused), run.failure);
        next = std::min(next, run.deadline);
        ++it;  // remembered a while, as a refusal
        continue;
      }
      it = runs_.erase(it);
    }
    if (!expired.empty()) {
      lock.unlock();
      for (const auto& [seats, status] : expired) FinishAll(seats, status);
      lock.lock();
      continue;
    }
    if (next == std::chrono::steady_clock::time_point::max()) {
      wake_.wait(lock);
    } else {
      wake_.wait_until(lock, next);
    }
  }
}

}  // namespace gpupipe::rpc
