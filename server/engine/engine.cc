#include "server/engine/engine.h"

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <random>
#include <thread>

#include "absl/strings/str_format.h"
#include "server/engine/plan.h"
#include "server/engine/validate.h"

namespace gpupipe::engine {
namespace {

using Clock = std::chrono::steady_clock;

double MicrosBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

struct QueuedJob {
  std::string id;
  JobSpec spec;
  std::shared_ptr<InputSource> input;
  Plan plan;
  std::shared_ptr<JobSink> sink;
  Clock::time_point accepted_at;
};

}  // namespace

class Engine::Impl {
 public:
  Impl(std::unique_ptr<Backend> backend, EngineOptions options)
      : backend_(std::move(backend)), options_(std::move(options)) {
    std::random_device rd;
    id_prefix_ = absl::StrFormat("%06x", rd() & 0xffffff);
    for (const PriorityLevel& level : backend_->levels()) {
      for (int lane = 0; lane < level.lanes; ++lane) {
        workers_.emplace_back([this, p = level.priority, lane] { WorkerLoop(p, lane); });
      }
    }
  }

  ~Impl() { Shutdown(); }

  // `take_input` is called only once the job is accepted, so a rejected job leaves the
  // caller's bytes alone.
  absl::Status Submit(JobSpec spec, int64_t input_size, InputPath path,
                      const std::function<std::shared_ptr<InputSource>()>& take_input,
                      std::shared_ptr<JobSink> sink) {
    if (absl::Status s = ValidateJob(spec, input_size, options_.limits, path);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = backend_->CheckOptions(spec); !s.ok()) return s;
    absl::StatusOr<Plan> plan = PlanJob(spec);
    if (!plan.ok()) return plan.status();
    if (spec.dry_run) return RunDry(std::move(spec), *plan, *sink);

    auto job = std::make_unique<QueuedJob>();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_ || stopping_accepting_) {
        return absl::UnavailableError("the server is shutting down");
      }
      // A job alone in the queue is admitted whatever its size (its input limit bounds it),
      // so that a streamed input larger than the queue limit can still run.
      if (queued_jobs_ >= options_.max_queued_jobs ||
          (queued_jobs_ > 0 && queued_bytes_ + input_size > options_.max_queued_bytes)) {
        return absl::ResourceExhaustedError(absl::StrFormat(
            "the server is busy: %d jobs (%d bytes) queued; retry later", queued_jobs_,
            queued_bytes_));
      }
      job->id = absl::StrFormat("%s-%06d", id_prefix_, ++next_id_);
      job->accepted_at = Clock::now();
      job->spec = std::move(spec);
      job->input = take_input();
      job->plan = *std::move(plan);
      job->sink = std::move(sink);
      job->sink->OnAccepted(AcceptedInfo{job->id, job->plan.output_dtype, job->plan.output_shape,
                                         backend_->name()});
      if (job->spec.explain) job->sink->OnPlan(backend_->Describe(job->spec, job->plan));
      ++queued_jobs_;
      queued_bytes_ += job->input->size();
      ++in_flight_;
      queues_[static_cast<int>(job->spec.priority)].push_back(std::move(job));
    }
    cv_.notify_all();
    return absl::OkStatus();
  }

  EngineDescription Describe() const {
    return {backend_->name(),     backend_->device(),   backend_->levels(),
            options_.limits,      backend_->stagings(), backend_->launch_modes(),
            backend_->graph_cache_stats()};
  }

  void Shutdown() {
    std::deque<std::unique_ptr<QueuedJob>> abandoned;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_ && workers_.empty()) return;
      stopping_ = true;
      for (auto& q : queues_) {
        for (auto& job : q) abandoned.push_back(std::move(job));
        q.clear();
      }
      queued_jobs_ = 0;
      queued_bytes_ = 0;
    }
    cv_.notify_all();
    for (auto& job : abandoned) {
      Finish(*job, absl::UnavailableError("the server shut down before the job ran"), {});
    }
    for (std::thread& t : workers_) {
      if (t.joinable()) t.join();
    }
    workers_.clear();
  }

  int64_t jobs_in_flight() const { return in_flight_.load(); }

  bool Drain(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    stopping_accepting_ = true;
    return idle_.wait_for(lock, timeout, [&] { return in_flight_.load() == 0; });
  }

  std::shared_ptr<InputSource> NewInput(int64_t size) { return backend_->NewInput(size); }

 private:
  // A dry run is accepted, planned and done at once; it never queues.
  absl::Status RunDry(JobSpec spec, const Plan& plan, JobSink& sink) {
    std::string id;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_ || stopping_accepting_) {
        return absl::UnavailableError("the server is shutting down");
      }
      id = absl::StrFormat("%s-%06d", id_prefix_, ++next_id_);
    }
    sink.OnAccepted(AcceptedInfo{id, plan.output_dtype, plan.output_shape, backend_->name()});
    sink.OnPlan(backend_->Describe(spec, plan));
    sink.OnDone(absl::OkStatus());
    if (options_.on_job_done) {
      options_.on_job_done(JobRecord{id, std::move(spec), backend_->name(), absl::OkStatus(), {}});
    }
    return absl::OkStatus();
  }

  void WorkerLoop(Priority priority, int lane) {
    auto& queue = queues_[static_cast<int>(priority)];
    for (;;) {
      std::unique_ptr<QueuedJob> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stopping_ || !queue.empty(); });
        if (queue.empty()) return;  // stopping and nothing left
        job = std::move(queue.front());
        queue.pop_front();
        --queued_jobs_;
        queued_bytes_ -= job->input->size();
      }
      Run(*job, priority, lane);
    }
  }

  void Run(QueuedJob& job, Priority priority, int lane) {
    JobTiming timing;
    const Clock::time_point started = Clock::now();
    timing.queue_us = MicrosBetween(job.accepted_at, started);
    timing.bytes_in = job.input->size();
    if (job.sink->Cancelled()) {
      Finish(job, absl::CancelledError("the client went away before the job ran"), timing);
      return;
    }
    const ChunkEmitter emit = [&](int64_t offset, const char* data, int64_t size) {
      return job.sink->OnChunk(offset, data, size);
    };
    absl::Status status =
        backend_->Run(job.spec, job.plan, *job.input, priority, lane, emit, &timing);
    const Clock::time_point finished = Clock::now();
    if (timing.output_ready == Clock::time_point{}) timing.output_ready = finished;
    timing.total_us = MicrosBetween(job.accepted_at, timing.output_ready);
    timing.result_stream_us = MicrosBetween(timing.output_ready, finished);
    timing.bytes_out = job.plan.output_elements * DTypeSize(job.plan.output_dtype);
    if (timing.total_us > 0) {
      timing.gbps = static_cast<double>(timing.bytes_in + timing.bytes_out) / (timing.total_us * 1e3);
    }
    if (status.ok()) job.sink->OnTiming(timing);
    Finish(job, status, timing);
  }

  void Finish(QueuedJob& job, const absl::Status& status, const JobTiming& timing) {
    job.sink->OnDone(status);
    if (options_.on_job_done) {
      JobRecord record{job.id, job.spec, backend_->name(), status, timing};
      options_.on_job_done(record);
    }
    if (--in_flight_ == 0) {
      std::lock_guard<std::mutex> lock(mu_);
      idle_.notify_all();
    }
  }

  std::unique_ptr<Backend> backend_;
  EngineOptions options_;
  std::string id_prefix_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable idle_;
  bool stopping_ = false;
  bool stopping_accepting_ = false;
  int64_t next_id_ = 0;
  int queued_jobs_ = 0;
  int64_t queued_bytes_ = 0;
  std::array<std::deque<std::unique_ptr<QueuedJob>>, kPriorityLevels> queues_;
  std::atomic<int64_t> in_flight_{0};
  std::vector<std::thread> workers_;
};

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

std::unique_ptr<Engine> Engine::Create(std::unique_ptr<Backend> backend, EngineOptions options) {
  return std::unique_ptr<Engine>(
      new Engine(std::make_unique<Impl>(std::move(backend), std::move(options))));
}

absl::Status Engine::Submit(JobSpec spec, std::string& input, std::shared_ptr<JobSink> sink) {
  return impl_->Submit(
      std::move(spec), static_cast<int64_t>(input.size()), InputPath::kInline,
      [&input] { return InputSource::Complete(std::move(input)); }, std::move(sink));
}

absl::Status Engine::Submit(JobSpec spec, std::shared_ptr<InputSource> input,
                            std::shared_ptr<JobSink> sink) {
  const int64_t size = input->size();
  return impl_->Submit(
      std::move(spec), size, InputPath::kStreamed, [&input] { return std::move(input); }, std::move(sink));
}

EngineDescription Engine::Describe() const { return impl_->Describe(); }

std::shared_ptr<InputSource> Engine::NewInput(int64_t size) { return impl_->NewInput(size); }
void Engine::Shutdown() { impl_->Shutdown(); }
bool Engine::Drain(std::chrono::milliseconds timeout) { return impl_->Drain(timeout); }
int64_t Engine::jobs_in_flight() const { return impl_->jobs_in_flight(); }

}  // namespace gpupipe::engine
