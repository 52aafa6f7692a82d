#include "server/engine/engine.h"

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <new>
#include <random>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/thread_name.h"
#include "server/engine/job/interrupt.h"
#include "server/engine/job/validate.h"
#include "server/engine/pipeline/host_block_pool.h"
#include "server/engine/planning/one_message.h"
#include "server/engine/planning/plan.h"
#include "server/engine/planning/step_work.h"
#include "server/engine/regions/region_io.h"
#include "server/engine/scheduling/client_queue.h"
#include "server/engine/scheduling/intrusive_list.h"

namespace gpupipe::engine {
namespace {

using Clock = std::chrono::steady_clock;

double MicrosBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

double Mib(int64_t bytes) { return static_cast<double>(bytes) / double(1 << 20); }

// The status of a job or request that ran out of memory, made once (Engine::Impl's constructor
// makes it first): a copy allocates nothing, so it can be had when nothing else can.
const absl::Status& OutOfMemory() {
  static const absl::Status* const status =
      new absl::Status(absl::ResourceExhaustedError("the server ran out of memory for this job"));
  return *status;
}

// An exception from anything a job's request set off, as the status the job (or the request)
// ends with: no exception may reach a gRPC callback or end a worker thread.
absl::Status FromException(std::exception_ptr error) noexcept {
  try {
    try {
      std::rethrow_exception(error);
    } catch (const std::bad_alloc&) {
      return OutOfMemory();
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("the job failed: ", e.what()));
    } catch (...) {
      return absl::InternalError("the job failed with an unknown error");
    }
  } catch (...) {  // making the message failed
    return OutOfMemory();
  }
}

// A streamed upload's ring: `buffers` buffers of `buffer_bytes` (InputRing).
struct RingShape {
  int64_t buffer_bytes = 0;
  int64_t buffers = 1;
  int64_t bytes() const { return buffers * buffer_bytes; }
};

// What the region registry uses of `backend`: the CUDA backend page-locks host regions and
// opens device ones; the CPU backend does neither.
RegionHooks RegionHooksOf(Backend* backend) {
  RegionHooks hooks;
  hooks.pin = [backend](char* data, int64_t bytes) { return backend->PinHostMemory(data, bytes); };
  if (backend->device().has_value()) {
    hooks.open_cuda_ipc = [backend](const std::string& handle) {
      return backend->OpenCudaIpc(handle);
    };
    hooks.device_copy = [backend](char* to, const char* from, int64_t bytes) {
      return backend->CopyDeviceMemory(to, from, bytes);
    };
  }
  return hooks;
}

struct QueuedJob;
double AcceptMicros(const QueuedJob& job);

struct QueuedJob {
  std::string id;
  AdmissionTicket ticket;
  JobSpec spec;
  std::shared_ptr<InputSource> input;
  Plan plan;
  ChunkLayout layout;
  std::shared_ptr<JobSink> sink;
  Clock::time_point accepted_at;
  std::string batch_key;  // scheduling/batching.h; empty: runs alone
  ListLinks<QueuedJob> running;  // in Engine::Impl::running_ from its start until it ends
};

double AcceptMicros(const QueuedJob& job) {
  const Clock::time_point received = job.spec.received_at;
  return received == Clock::time_point{} ? 0 : MicrosBetween(received, job.accepted_at);
}

// One run on a lane, for EngineStats::lane_activity.
struct LaneRun {
  Priority priority;
  int lane;
  Clock::time_point start;
  Clock::time_point end;
  int jobs;
  bool ok;
};

}  // namespace

class Engine::Impl {
 public:
  Impl(std::unique_ptr<Backend> backend, EngineOptions options)
      : backend_(std::move(backend)),
        options_(std::move(options)),
        admission_(options_.admission),
        regions_(options_.regions, RegionHooksOf(backend_.get())),
        started_at_(Clock::now()) {
    OutOfMemory();  // made now, not first when memory runs out
    options_.batching.max_member_output_bytes = options_.limits.max_chunk_bytes;
    options_.direct_run.max_output_message_bytes = options_.limits.max_chunk_bytes;
    std::random_device rd;
    id_prefix_ = absl::StrFormat("%06x", rd() & 0xffffff);
    const int64_t pool_bytes = options_.limits.input_ring_total_bytes;
    if (pool_bytes > 0) {
      absl::StatusOr<HostBlock> block = backend_->AllocateInputMemory(pool_bytes);
      if (block.ok()) {
        ring_pool_ = std::make_shared<HostBlockPool>(block->data, pool_bytes, block->pinned,
                                                     std::move(block->free));
      } else {
        ring_pool_error_ = block.status();
      }
    }
    for (const PriorityLevel& level : backend_->levels()) {
      lane_state_[static_cast<size_t>(level.priority)].assign(static_cast<size_t>(level.lanes),
                                                              LaneState::kIdle);
    }
    for (const PriorityLevel& level : backend_->levels()) {
      for (int w = 0; w < level.lanes * kWorkersPerLane; ++w) {
        workers_.emplace_back([this, p = level.priority] {
          NameThisThread(absl::StrCat("gp-work-", PriorityName(p)));
          WorkerLoop(p);
        });
      }
    }
  }

  ~Impl() { Shutdown(); }

  // `take_input` is called once the job is planned and admitted, and returns its input (or why
  // it has none); the job is accepted only after it succeeded. `held_bytes` says what the input
  // will hold while the job waits (admission counts it).
  using TakeInput = std::function<absl::StatusOr<std::shared_ptr<InputSource>>(
      const Plan& plan, const ChunkLayout& layout)>;
  using HeldBytes =
      std::function<absl::StatusOr<int64_t>(const Plan& plan, const ChunkLayout& layout)>;
  // `output_to_region`: the sink writes the result into a region (such jobs do not batch).
  // `thread`: whether the job may run on this thread (scheduling/direct_run.h).
  absl::Status Submit(JobSpec spec, int64_t input_size, InputPath path, const HeldBytes& held_bytes,
                      const TakeInput& take_input, std::shared_ptr<JobSink> sink,
                      bool output_to_region = false, SubmitThread thread = SubmitThread::kQueue) {
    absl::Status status;
    try {
      status = SubmitOrThrow(std::move(spec), input_size, path, held_bytes, take_input,
                             std::move(sink), output_to_region, thread);
    } catch (...) {
      status = FromException(std::current_exception());
    }
    if (!status.ok()) {
      try {
        job_stats_.Refused(status);
      } catch (...) {  // only the count misses the refusal
      }
    }
    return status;
  }

  absl::Status SubmitWithRegions(JobSpec spec, std::string& inline_input, const JobRegions& regions,
                                 std::shared_ptr<JobSink> sink, SubmitThread thread) {
    absl::Status status;
    try {
      status = SubmitWithRegionsOrThrow(std::move(spec), inline_input, regions, std::move(sink),
                                        thread);
    } catch (...) {
      status = FromException(std::current_exception());
    }
    return status;
  }

  RegionRegistry& regions() { return regions_; }

  // The ring a streamed upload lands in: buffers of the layout's largest chunk (chunk_plan.h:
  // the first chunks and the last are the largest of any layout), as many as
  // Limits::input_ring_bytes holds.
  absl::StatusOr<RingShape> RingFor(const Plan& plan, const ChunkLayout& layout) const {
    const int64_t count = layout.chunk_count;
    int64_t chunk_bytes = 0;
    for (int64_t k : {int64_t{0}, int64_t{1}, int64_t{2}, count - 1}) {
      if (k < 0 || k >= count) continue;
      chunk_bytes = std::max(chunk_bytes, ChunkInputRange(plan, layout, k).size());
    }
    // Whole pool pages, so that rings never share a page.
    chunk_bytes = (chunk_bytes + HostBlockPool::kAlignment - 1) / HostBlockPool::kAlignment *
                  HostBlockPool::kAlignment;
    const int64_t ring_limit = options_.limits.input_ring_bytes;
    if (chunk_bytes > ring_limit) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "input: one chunk of this job takes %.1f MiB, over the %.1f MiB an upload's ring "
          "holds (gpupiped --input-ring-mib)",
          Mib(chunk_bytes), Mib(ring_limit)));
    }
    RingShape shape;
    shape.buffer_bytes = chunk_bytes;
    shape.buffers =
        chunk_bytes == 0 ? 1 : std::max<int64_t>(1, std::min(count, ring_limit / chunk_bytes));
    return shape;
  }

  // A ring of `shape` from the pool for an upload of `size` bytes.
  absl::StatusOr<std::shared_ptr<InputRing>> NewRing(int64_t size, const Plan& plan,
                                                     const ChunkLayout& layout,
                                                     const RingShape& shape) {
    const int64_t bytes = shape.bytes();
    char* memory = nullptr;
    std::function<void()> release;
    bool pinned = false;
    if (bytes > 0) {
      if (!ring_pool_) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "input: streamed uploads are off on this server (gpupiped --input-ring-total-mib",
            ring_pool_error_.ok() ? " 0" : absl::StrCat(": ", ring_pool_error_.message()), ")"));
      }
      memory = ring_pool_->Allocate(bytes);
      if (memory == nullptr) {
        return absl::ResourceExhaustedError(absl::StrFormat(
            "input: the upload pool (%.1f MiB, gpupiped --input-ring-total-mib) has no room for "
            "this upload's %.1f MiB ring (%.1f MiB in use by other uploads); retry later",
            Mib(ring_pool_->capacity()), Mib(bytes), Mib(ring_pool_->used())));
      }
      pinned = ring_pool_->pinned();
      release = [pool = ring_pool_, memory] { pool->Free(memory); };
    }
    return std::make_shared<InputRing>(
        size, layout.chunk_count,
        [plan, layout](int64_t k) { return ChunkInputRange(plan, layout, k); }, memory,
        shape.buffers, shape.buffer_bytes, pinned, std::move(release),
        std::chrono::milliseconds(options_.limits.upload_idle_timeout_ms));
  }

  EngineDescription Describe() const {
    EngineDescription d;
    d.backend = backend_->name();
    d.device = backend_->device();
    d.levels = backend_->levels();
    d.limits = options_.limits;
    d.admission = options_.admission;
    d.regions = options_.regions;
    d.batching = options_.batching;
    d.direct_run = options_.direct_run;
    d.min_chunk_bytes = options_.chunk_policy.min_chunk_bytes;
    d.stagings = backend_->stagings();
    d.launch_modes = backend_->launch_modes();
    d.graph_cache = backend_->graph_cache_stats();
    return d;
  }

  void CountRefusal(const absl::Status& status) { job_stats_.Refused(status); }

  EngineStats Stats(bool with_clients, bool lane_activity) const {
    EngineStats stats;
    stats.backend = backend_->name();
    stats.batching = batch_counters_.snapshot();
    stats.direct_runs = direct_runs_.load(std::memory_order_relaxed);
    if (lane_activity) {
      std::vector<LaneRun> runs;
      {
        std::lock_guard<std::mutex> lock(activity_mu_);
        runs.assign(lane_runs_.begin(), lane_runs_.end());
      }
      for (const LaneRun& r : runs) {
        stats.lane_activity.push_back({backend_->LaneName(r.priority, r.lane),
                                       MicrosBetween(started_at_, r.start),
                                       MicrosBetween(started_at_, r.end), r.jobs, r.ok});
      }
    }
    stats.graph_cache = backend_->graph_cache_stats();
    stats.refused = job_stats_.refused();
    const std::array<LevelJobStats, kPriorityLevels> done = job_stats_.levels();
    std::map<std::string, JobCounts> client_done;
    if (with_clients) client_done = job_stats_.clients();
    // The ledger's figures are copied under ledger_mu_ alone (what they count changes under it,
    // with mu_ or without) and assembled after it, so that a stats reader holds up submissions
    // and lanes, which take the ledger inside mu_, for no more than the copy.
    std::array<std::pair<int, int>, kPriorityLevels> queued_running{};  // per level
    std::vector<Admission::ClientState> client_states;
    {
      std::lock_guard<std::mutex> ledger(ledger_mu_);
      for (const PriorityLevel& level : backend_->levels()) {
        queued_running[static_cast<size_t>(level.priority)] = {
            admission_.queued_jobs(level.priority),
            running_at_[static_cast<size_t>(level.priority)].load()};
      }
      client_states = admission_.client_states();
      stats.queued_bytes = admission_.queued_bytes();
    }
    for (const PriorityLevel& level : backend_->levels()) {
      EngineStats::Level l;
      l.priority = level.priority;
      l.lanes = level.lanes;
      std::tie(l.queued, l.running) = queued_running[static_cast<size_t>(level.priority)];
      l.done = done[static_cast<size_t>(level.priority)];
      stats.levels.push_back(std::move(l));
    }
    for (Admission::ClientState& c : client_states) {
      stats.uploads_in_progress += c.uploads;
      if (!with_clients) continue;
      EngineStats::Client client{std::move(c.client), c.jobs, c.uploads, c.queued_bytes, {}};
      if (auto it = client_done.find(client.client); it != client_done.end()) {
        client.jobs = std::move(it->second);
        client_done.erase(it);
      }
      stats.clients.push_back(std::move(client));
    }
    for (auto& [name, jobs] : client_done) {
      stats.clients.push_back({name, 0, 0, 0, std::move(jobs)});
    }
    stats.regions = regions_.registered();
    stats.region_mapped_bytes = regions_.mapped_bytes();
    stats.region_capacity_bytes = options_.regions.max_bytes;
    stats.max_queued_bytes = options_.admission.max_queued_bytes;
    if (ring_pool_) {
      stats.input_ring_used_bytes = ring_pool_->used();
      stats.input_ring_capacity_bytes = ring_pool_->capacity();
    }
    return stats;
  }

  void StopRunningJobs() {
    std::vector<std::shared_ptr<InputSource>> inputs;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_running_ = true;
      std::lock_guard<std::mutex> ledger(ledger_mu_);
      try {
        running_.ForEach([&](const QueuedJob& job) { inputs.push_back(job.input); });
      } catch (const std::bad_alloc&) {
        // Running jobs still stop at their next check of the interrupt; only an upload that
        // waits for bytes may wait longer (until its reader's idle timeout).
      }
    }
    // A job waiting for upload bytes learns it at once; the others at their next check.
    absl::Status stopped = OutOfMemory();
    try {
      stopped = JobInterrupt::Stopped();
    } catch (const std::bad_alloc&) {  // the uploads learn that the job is over all the same
    }
    for (const std::shared_ptr<InputSource>& input : inputs) {
      try {
        input->Fail(stopped);
      } catch (...) {  // that job stops at its next check instead
      }
    }
  }

  void Shutdown() {
    // Default-constructed queues allocate nothing; TakeAll moves every level's jobs into them
    // whole, so each queued job is ended below, whatever fails to allocate.
    std::array<ClientQueue<std::unique_ptr<QueuedJob>>, kPriorityLevels> abandoned;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (stopping_ && workers_.empty()) {
        direct_runs_done_.wait(lock, [&] { return direct_runs_in_progress_ == 0; });
        return;
      }
      stopping_ = true;
      for (size_t level = 0; level < queues_.size(); ++level) {
        abandoned[level] = queues_[level].TakeAll();
      }
    }
    for (std::condition_variable& cv : level_cv_) cv.notify_all();
    for (std::condition_variable& cv : gather_cv_) cv.notify_all();
    absl::Status why = OutOfMemory();
    try {
      why = absl::UnavailableError("the server shut down before the job ran");
    } catch (const std::bad_alloc&) {  // the jobs end all the same, with OutOfMemory()
    }
    for (auto& queue : abandoned) {
      while (!queue.empty()) {
        std::unique_ptr<QueuedJob> job = queue.Pop();
        Finish(*job, why, {}, /*started=*/false);
      }
    }
    StopRunningJobs();
    for (std::thread& t : workers_) {
      if (t.joinable()) t.join();
    }
    workers_.clear();
    // Direct runs are on their submitters' threads; the lanes they use must outlive them.
    std::unique_lock<std::mutex> lock(mu_);
    direct_runs_done_.wait(lock, [&] { return direct_runs_in_progress_ == 0; });
  }

  // Under mu_: Submit counts a job in the same critical section that sends its Accepted, so a
  // caller who has heard of a job finds it counted until it ended (all but one that could not
  // be queued, which has ended by the time Submit returns: EndUnqueued).
  int64_t jobs_in_flight() const {
    std::lock_guard<std::mutex> lock(mu_);
    return in_flight_.load();
  }

  uint32_t levels_waiting_for_lanes() const {
    std::lock_guard<std::mutex> lock(mu_);
    uint32_t levels = 0;
    for (int l = 0; l < kPriorityLevels; ++l) {
      if (!queues_[l].empty() && !lane_state_[static_cast<size_t>(l)].empty() &&
          IdleLaneLocked(l) < 0) {
        levels |= 1u << l;
      }
    }
    return levels;
  }

  bool accepting() const {
    std::lock_guard<std::mutex> lock(mu_);
    return !stopping_ && !stopping_accepting_;
  }

  bool Drain(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    stopping_accepting_ = true;
    return idle_.wait_for(lock, timeout, [&] { return in_flight_.load() == 0; });
  }

 private:
  // Refusals before Submit proper are counted here; Submit counts its own.
  absl::Status SubmitWithRegionsOrThrow(JobSpec spec, std::string& inline_input,
                                        const JobRegions& regions, std::shared_ptr<JobSink> sink,
                                        SubmitThread thread) {
    const auto refuse = [this](absl::Status status) {
      job_stats_.Refused(status);
      return status;
    };
    std::shared_ptr<Region> in_region;
    std::shared_ptr<Region> out_region;
    int64_t size = static_cast<int64_t>(inline_input.size());
    if (regions.input) {
      const RegionSlice& slice = *regions.input;
      if (!inline_input.empty()) {
        return refuse(absl::InvalidArgumentError(
            "input.data: must be empty when input_region is set (the bytes are in the region)"));
      }
      absl::StatusOr<std::shared_ptr<Region>> found =
          regions_.Find(spec.client, slice.region_id, "input_region.region_id");
      if (!found.ok()) return refuse(found.status());
      in_region = *std::move(found);
      const int64_t elements = ElementCount(spec.shape);
      const int64_t itemsize = DTypeSize(spec.dtype);
      const int64_t expected =
          elements < 0 || elements > std::numeric_limits<int64_t>::max() / itemsize
              ? -1
              : elements * itemsize;
      size = slice.length != 0 ? slice.length : expected;
      if (size >= 0) {
        if (absl::Status s = in_region->CheckRange(slice.offset, size, "input_region"); !s.ok()) {
          return refuse(s);
        }
      }
    }
    if (regions.output) {
      absl::StatusOr<std::shared_ptr<Region>> found =
          regions_.Find(spec.client, regions.output->region_id, "output_region.region_id");
      if (!found.ok()) return refuse(found.status());
      out_region = *std::move(found);
    }
    const RegionSlice in_slice = regions.input.value_or(RegionSlice{});
    const RegionSlice out_slice = regions.output.value_or(RegionSlice{});
    std::shared_ptr<JobSink> job_sink =
        out_region ? std::make_shared<RegionOutputSink>(sink, out_region, out_slice.offset) : sink;
    return Submit(
        std::move(spec), size, in_region ? InputPath::kRegion : InputPath::kInline,
        [&](const Plan& plan, const ChunkLayout&) -> absl::StatusOr<int64_t> {
          if (out_region) {
            const int64_t out_bytes = plan.output_elements * DTypeSize(plan.output_dtype);
            if (out_slice.offset < 0 || out_slice.offset > out_region->size()) {
              return out_region->CheckRange(out_slice.offset, 0, "output_region");
            }
            const int64_t length =
                out_slice.length != 0 ? out_slice.length : out_region->size() - out_slice.offset;
            if (absl::Status s = out_region->CheckRange(out_slice.offset, length, "output_region");
                !s.ok()) {
              return s;
            }
            if (length < out_bytes) {
              return absl::InvalidArgumentError(
                  absl::StrCat("output_region: ", length, " bytes do not hold the result's ",
                               out_bytes, " bytes (", DTypeName(plan.output_dtype), ", shape ",
                               ShapeString(plan.output_shape), ")"));
            }
            if (in_region && in_region->SameMemoryAs(*out_region) &&
                in_slice.offset < out_slice.offset + out_bytes &&
                out_slice.offset < in_slice.offset + size) {
              return absl::InvalidArgumentError(
                  "output_region: overlaps input_region; results would overwrite input the job "
                  "has not read yet");
            }
          }
          // A region input holds none of the daemon's memory while it waits.
          return in_region ? 0 : size;
        },
        [&](const Plan&,
            const ChunkLayout& layout) -> absl::StatusOr<std::shared_ptr<InputSource>> {
          if (!in_region) return InputSource::Complete(std::move(inline_input));
          // Split rows are combined on the host, which reads their input: those go through
          // copies, as does everything on a backend that does not page-lock.
          const bool direct = (in_region->pinned() || in_region->device()) &&
                              layout.mode != ChunkLayout::Mode::kSplitRow;
          return RegionInput(in_region, in_slice.offset, size, direct);
        },
        std::move(job_sink), out_region != nullptr, thread);
  }

  absl::Status SubmitOrThrow(JobSpec spec, int64_t input_size, InputPath path,
                             const HeldBytes& held_bytes, const TakeInput& take_input,
                             std::shared_ptr<JobSink> sink, bool output_to_region,
                             SubmitThread thread) {
    if (absl::Status s = ValidateJob(spec, input_size, options_.limits, path); !s.ok()) {
      return s;
    }
    if (absl::Status s = backend_->CheckOptions(spec); !s.ok()) return s;
    absl::StatusOr<Plan> plan = PlanJob(spec);
    if (!plan.ok()) return plan.status();
    if (absl::Status s = CheckWork(*plan, options_.limits.max_work_per_byte); !s.ok()) return s;
    if (spec.one_message) {
      if (absl::Status s = CheckOneMessageSpec(spec); !s.ok()) return s;
    }
    if (spec.dry_run) return RunDry(std::move(spec), *plan, *sink);
    absl::StatusOr<ChunkLayout> layout =
        ChooseLayout(spec, *plan, *backend_, options_.chunk_policy);
    if (!layout.ok()) return layout.status();
    if (spec.one_message) {
      if (absl::Status s = CheckOneMessageLayout(*plan, *layout, options_.limits.max_chunk_bytes);
          !s.ok()) {
        return s;
      }
    }
    absl::StatusOr<int64_t> held = held_bytes(*plan, *layout);
    if (!held.ok()) return held.status();
    if (Clock::now() >= spec.deadline) {
      return absl::DeadlineExceededError("the job's deadline passed before it was queued");
    }

    int level = 0;
    bool wake_all = false;
    absl::Status not_queued;  // why an accepted job could not be queued
    int direct_lane = -1;  // the idle lane a direct run takes, and the number of its run
    int64_t direct_run = 0;
    const bool may_run_here =
        thread == SubmitThread::kMayRun &&
        DirectRunEligible(options_.direct_run, *plan, *layout, input_size,
                          path == InputPath::kInline, output_to_region);
    auto job = std::make_unique<QueuedJob>();
    job->ticket = AdmissionTicket{spec.client, spec.priority, *held, path == InputPath::kStreamed};
    job->batch_key = BatchKey(spec, *plan, *layout, input_size, path == InputPath::kInline,
                              output_to_region, options_.batching);
    job->id = NextJobId();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_ || stopping_accepting_) {
        return absl::UnavailableError("the server is shutting down");
      }
      if (!device_lost_.ok()) {
        return absl::UnavailableError(
            absl::StrCat(device_lost_.message(), "; the server runs no more jobs"));
      }
      // Between this check and Queued below only Finish changes the ledger, which frees
      // shares: other submissions wait for mu_.
      if (absl::Status s = CheckAdmission(job->ticket); !s.ok()) return s;
      absl::StatusOr<std::shared_ptr<InputSource>> input = take_input(*plan, *layout);
      if (!input.ok()) return input.status();
      job->accepted_at = Clock::now();
      job->spec = std::move(spec);
      job->input = *std::move(input);
      job->plan = *std::move(plan);
      job->layout = *std::move(layout);
      job->sink = std::move(sink);
      job->sink->OnAccepted(
          AcceptedInfo{job->id, job->plan.output_dtype, job->plan.output_shape, backend_->name(),
                       job->spec.priority});
      // Accepted: from here the job ends with its own Done, also where it cannot be queued
      // (an allocation that fails). What may fail comes first, each part undone where a later
      // one fails; taking the job for a lane cannot fail.
      level = static_cast<int>(job->spec.priority);
      try {
        if (job->spec.explain) job->sink->OnPlan(backend_->Describe(job->spec, job->plan));
        {
          std::lock_guard<std::mutex> ledger(ledger_mu_);
          admission_.Queued(job->ticket);
        }
        if (may_run_here) {
          direct_lane = TakeIdleLaneLocked(level, !job->batch_key.empty(), &direct_run);
        }
        if (direct_lane >= 0) {
          StartLocked(*job);
        } else {
          try {
            queues_[level].Push(job->spec.client, std::move(job));  // moved only once queued
          } catch (...) {
            std::lock_guard<std::mutex> ledger(ledger_mu_);
            admission_.Ended(job->ticket, /*started=*/false);
            throw;
          }
          // One waiting worker is enough for one job; lanes gathering a batch must see it too.
          wake_all = gatherers_[level] > 0;
        }
        ++in_flight_;
      } catch (...) {
        not_queued = FromException(std::current_exception());
      }
    }
    if (!not_queued.ok()) {
      EndUnqueued(*job, not_queued);
      return absl::OkStatus();
    }
    if (direct_lane >= 0) {
      RunDirect(*job, direct_lane, direct_run);
      return absl::OkStatus();
    }
    WakeWorkers(level, wake_all);
    return absl::OkStatus();
  }

  // An accepted job that could not be queued (SubmitOrThrow) ends here: nothing of it is left
  // in the engine, and its Done is the one event still owed.
  void EndUnqueued(QueuedJob& job, const absl::Status& status) noexcept {
    try {
      job.input->Fail(status);  // an upload (Run) learns that its job is over
    } catch (...) {
    }
    try {
      job.sink->OnDone(status);
    } catch (...) {  // taken as made (JobSink)
    }
    RecordEnded(job, status, {}, /*started=*/false);
  }

  // An ended job's statistics and log line (EngineOptions::on_job_done). Where they cannot be
  // had (an allocation that fails) only they miss the job: its client has its Done, and the
  // engine's own counts go on.
  void RecordEnded(const QueuedJob& job, const absl::Status& status, const JobTiming& timing,
                   bool started) noexcept {
    try {
      const JobRecord record{job.id, job.spec, backend_->name(), status, timing};
      job_stats_.Ended(record, started);
      if (options_.on_job_done) options_.on_job_done(record);
    } catch (...) {
    }
  }

  // A dry run is accepted, planned and done at once; it never queues.
  absl::Status RunDry(JobSpec spec, const Plan& plan, JobSink& sink) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_ || stopping_accepting_) {
        return absl::UnavailableError("the server is shutting down");
      }
    }
    const std::string id = NextJobId();
    sink.OnAccepted(
        AcceptedInfo{id, plan.output_dtype, plan.output_shape, backend_->name(), spec.priority});
    // Accepted: the dry run ends with its own Done, whatever fails from here (JobSink).
    absl::Status status;
    try {
      sink.OnPlan(backend_->Describe(spec, plan));
    } catch (...) {
      status = FromException(std::current_exception());
    }
    try {
      sink.OnDone(status);
    } catch (...) {
    }
    try {
      if (options_.on_job_done) {
        options_.on_job_done(JobRecord{id, std::move(spec), backend_->name(), status, {}});
      }
    } catch (...) {
    }
    return absl::OkStatus();
  }

  // What each lane of each level does: nothing, runs a job a worker took, or runs one directly
  // on the thread that submitted it (RunDirect).
  enum class LaneState { kIdle, kWorker, kDirect };

  // A lane taken by a worker or a direct run, for one run or (Renew, RunAlone) several in a
  // row: which lane, the current run's number (JobTiming::lane_run), and handing it back
  // (Release: once, at the latest when the take ends).
  class LaneTake {
   public:
    LaneTake(Impl& impl, Priority priority, int lane, int64_t run)
        : impl_(impl), priority_(priority), lane_(lane), run_(run) {}
    LaneTake(const LaneTake&) = delete;
    LaneTake& operator=(const LaneTake&) = delete;
    ~LaneTake() { Release(); }

    Priority priority() const { return priority_; }
    int lane() const { return lane_; }
    int64_t run() const { return run_; }
    // The held lane goes on to another run (numbered `run`) without being handed back.
    void Renew(int64_t run) { run_ = run; }
    void Release() {
      if (!held_) return;
      held_ = false;
      impl_.ReleaseLane(priority_, lane_);
    }

   private:
    Impl& impl_;
    const Priority priority_;
    const int lane_;
    int64_t run_;
    bool held_ = true;
  };

  // A worker of `priority`'s level: hands over the results a lane's worker posted (reports
  // first: their clients are waiting), or takes a queued job (or a batch) and an idle lane of
  // its level and runs it there (RunAlone, RunBatch).
  void WorkerLoop(Priority priority) {
    const int level = static_cast<int>(priority);
    auto& queue = queues_[level];
    const size_t max_jobs = static_cast<size_t>(std::max(options_.batching.max_jobs, 1));
    for (;;) {
      std::unique_ptr<QueuedJob> alone;
      std::vector<std::unique_ptr<QueuedJob>> batch;
      std::optional<PostedReport> report;
      int lane = -1;
      int64_t run = 0;
      {
        std::unique_lock<std::mutex> lock(mu_);
        level_cv_[level].wait(lock, [&] {
          return stopping_ || !reports_[level].empty() ||
                 (!queue.empty() && IdleLaneLocked(level) >= 0);
        });
        if (!reports_[level].empty()) {
          report = std::move(reports_[level].front());
          reports_[level].pop_front();
        } else {
          lane = IdleLaneLocked(level);
          if (queue.empty() || lane < 0) return;  // stopping, and nothing left to run or report
          run = TakeLaneLocked(level, lane, LaneState::kWorker);
          alone = queue.Pop();
          StartLocked(*alone);
          if (!alone->batch_key.empty()) {
            // Room for a whole batch before another job leaves the queue, so that gathering
            // allocates nothing that could fail halfway.
            try {
              batch.reserve(max_jobs);
            } catch (const std::bad_alloc&) {
            }
            if (batch.capacity() >= max_jobs) {
              batch.push_back(std::move(alone));
              GatherBatchLocked(lock, queue, &batch);
            }
          }
        }
      }
      if (report) {
        report->outcome.timing.result_stream_us += MicrosBetween(report->posted, Clock::now());
        Report(*report->job, report->outcome);
        continue;
      }
      LaneTake take(*this, priority, lane, run);
      if (alone) {
        RunAlone(std::move(alone), take);
      } else if (batch.size() == 1) {
        Run(*batch.front(), take, /*hand_back=*/true);
      } else {
        RunBatch(batch, take);
      }
    }
  }

  // Runs `job` on `take`'s lane, then, while the level's next queued job is another single job,
  // that one on the same lane, posting each finished job's results for another worker of the
  // level to hand over (reports_). Handing over a small job's results takes about as long as
  // its run; this way the lane runs the next job meanwhile, instead of waiting for another
  // worker to wake up and take it. With nothing waiting, a job that could batch next, or the
  // level's workers behind with posted results, the lane is handed back and this thread hands
  // the results over itself, with no thread in between.
  void RunAlone(std::unique_ptr<QueuedJob> job, LaneTake& take) {
    const int level = static_cast<int>(take.priority());
    for (;;) {
      RunOutcome outcome = RunOnLane(*job, take);
      std::unique_ptr<QueuedJob> next;
      bool wake_all = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto& queue = queues_[level];
        // Only while fewer results wait posted than the level has lanes: a level whose workers
        // are behind gets this job's results from this thread, as without posting, so the
        // results' delay stays within about one hand-over per lane.
        if (!stopping_ && !queue.empty() && queue.Front()->batch_key.empty() &&
            reports_[level].size() < lane_state_[static_cast<size_t>(level)].size()) {
          // The report's place first: where it cannot be had, nothing has moved yet and the
          // job is reported here, as with nothing waiting.
          bool placed = false;
          try {
            reports_[level].emplace_back();
            placed = true;
          } catch (const std::bad_alloc&) {
          }
          if (placed) {
            reports_[level].back() =
                PostedReport{std::move(job), std::move(outcome), Clock::now()};
            next = queue.Pop();
            StartLocked(*next);
            take.Renew(++runs_started_);
            wake_all = gatherers_[level] > 0;
          }
        }
      }
      if (!next) {
        take.Release();
        Report(*job, outcome);
        return;
      }
      WakeWorkers(level, wake_all);
      job = std::move(next);
    }
  }

  // Without mu_: work for one waiting worker of `level` (a job or a posted report) arrived; with
  // `gatherers` (lanes of the level gather a batch, which must see it too), they are all woken
  // as well. They wait on a condition of their own, so that the one worker's wake-up can never
  // go to a lane that gathers (one that began to after `gatherers` was read, say), which would
  // not pass it on: the work would wait for the next wake-up of the level.
  void WakeWorkers(int level, bool gatherers) {
    level_cv_[level].notify_one();
    if (gatherers) gather_cv_[level].notify_all();
  }

  // With mu_ held: `lane` of `level` is taken for a run (`state`); returns the run's number.
  int64_t TakeLaneLocked(int level, int lane, LaneState state) {
    lane_state_[static_cast<size_t>(level)][static_cast<size_t>(lane)] = state;
    return ++runs_started_;
  }

  // With mu_ held: an idle lane of `level`, or -1.
  int IdleLaneLocked(int level) const {
    const std::vector<LaneState>& lanes = lane_state_[static_cast<size_t>(level)];
    for (size_t lane = 0; lane < lanes.size(); ++lane) {
      if (lanes[lane] == LaneState::kIdle) return static_cast<int>(lane);
    }
    return -1;
  }

  // The lane's run is over: it is idle for a worker or a direct run. Jobs queued meanwhile
  // wake a waiting worker, and lanes gathering a batch look again.
  void ReleaseLane(Priority priority, int lane) {
    const int level = static_cast<int>(priority);
    bool wake = false;
    bool wake_all = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      lane_state_[static_cast<size_t>(level)][static_cast<size_t>(lane)] = LaneState::kIdle;
      wake = !queues_[level].empty();
      wake_all = gatherers_[level] > 0;
    }
    if (wake) level_cv_[level].notify_one();
    if (wake_all) gather_cv_[level].notify_all();
  }

  // With mu_ held: an idle lane of `level` taken for a direct run (its run's number in
  // `*run`), or -1 where the level has queued jobs, a lane gathering a batch (the job is one it
  // may want) or no idle lane. A job that may batch (`batchable`) runs directly only while
  // nothing of its level runs: once jobs overlap, queueing lets the lanes batch them, which
  // saves more than the hand-offs cost.
  int TakeIdleLaneLocked(int level, bool batchable, int64_t* run) {
    if (stopping_ || !queues_[level].empty() || gatherers_[level] > 0) return -1;
    if (batchable && running_at_[level].load(std::memory_order_relaxed) > 0) return -1;
    if (options_.chunk_policy.priority_hold_us > 0 && gate_.HigherRunning(level)) return -1;
    const int lane = IdleLaneLocked(level);
    if (lane < 0) return -1;
    *run = TakeLaneLocked(level, lane, LaneState::kDirect);
    ++direct_runs_in_progress_;
    return lane;
  }

  // Runs a started job on the calling thread on `lane` (TakeIdleLaneLocked); the lane is
  // idle again once the job's run is over, before its results are handed over.
  void RunDirect(QueuedJob& job, int lane, int64_t run) {
    LaneTake take(*this, job.spec.priority, lane, run);
    try {
      Run(job, take, /*hand_back=*/true);
    } catch (...) {
      // The job was accepted: it ends with its own Done, never as a refused request. Finish
      // takes it out of running_ first, so a job still there has not been finished.
      bool finished = false;
      {
        std::lock_guard<std::mutex> ledger(ledger_mu_);
        finished = !running_.Contains(job);
      }
      if (!finished) {
        try {
          Finish(job, FromException(std::current_exception()), {}, /*started=*/true);
        } catch (...) {
        }
      }
    }
    direct_runs_.fetch_add(1, std::memory_order_relaxed);
    take.Release();  // the lane is never lost, whatever escaped
    // Last: Shutdown may destroy the engine once no direct run is in progress.
    std::lock_guard<std::mutex> lock(mu_);
    if (--direct_runs_in_progress_ == 0) direct_runs_done_.notify_all();
  }

  // A new job's id: the engine's prefix and a number no other of its jobs has. Made outside
  // mu_, so refused requests use numbers too (accepted ids may skip some) and concurrent
  // submissions may be accepted in another order than their numbers.
  std::string NextJobId() {
    return absl::StrFormat("%s-%06d", id_prefix_,
                           next_job_number_.fetch_add(1, std::memory_order_relaxed) + 1);
  }

  // With mu_ held: whether admission takes `ticket` now.
  absl::Status CheckAdmission(const AdmissionTicket& ticket) const {
    std::lock_guard<std::mutex> ledger(ledger_mu_);
    return admission_.Check(ticket);
  }

  // With mu_ held: the job leaves the queue for a lane.
  void StartLocked(QueuedJob& job) noexcept {
    std::lock_guard<std::mutex> ledger(ledger_mu_);
    admission_.Started(job.ticket);
    running_.PushBack(job);
    running_at_[static_cast<int>(job.spec.priority)].fetch_add(1, std::memory_order_relaxed);
  }

  // With mu_ held (through `lock`): adds to `jobs` (one batchable job) the queued jobs that
  // batch with it, waiting for more as scheduling/batching.h says.
  void GatherBatchLocked(std::unique_lock<std::mutex>& lock,
                         ClientQueue<std::unique_ptr<QueuedJob>>& queue,
                         std::vector<std::unique_ptr<QueuedJob>>* jobs) {
    const BatchPolicy& policy = options_.batching;
    const std::string key = jobs->front()->batch_key;
    const size_t max_jobs = static_cast<size_t>(policy.max_jobs);
    int64_t bytes = jobs->front()->input->size();
    // `jobs` has room for max_jobs (WorkerLoop), and TakeFronts allocates before it takes
    // anything, so a failed allocation leaves every job where it was.
    const auto take_more = [&] {
      std::vector<std::unique_ptr<QueuedJob>> more;
      try {
        more =
            queue.TakeFronts(max_jobs - jobs->size(), [&](const std::unique_ptr<QueuedJob>& job) {
              if (job->batch_key != key || bytes + job->input->size() > policy.max_bytes) {
                return false;
              }
              bytes += job->input->size();
              return true;
            });
      } catch (const std::bad_alloc&) {
        return;
      }
      for (std::unique_ptr<QueuedJob>& job : more) {
        StartLocked(*job);
        jobs->push_back(std::move(job));
      }
    };
    take_more();
    // Wait only while the lane has nothing else to do (its queue is empty) and others of its
    // level are running, whose clients may send more: a job alone never waits.
    const int level = static_cast<int>(jobs->front()->spec.priority);
    const Clock::time_point until = Clock::now() + std::chrono::microseconds(policy.window_us);
    while (jobs->size() < max_jobs && !stopping_ && queue.empty() &&
           running_at_[level].load(std::memory_order_relaxed) > static_cast<int>(jobs->size())) {
      ++gatherers_[level];
      const bool timed_out =
          gather_cv_[level].wait_until(lock, until) == std::cv_status::timeout;
      --gatherers_[level];
      take_more();
      if (timed_out) break;
    }
  }

  // Runs `jobs` (of one batch key, already started) as one job with their rows stacked, and
  // ends each with its own status and timing. Jobs whose reader left or whose deadline passed
  // while they waited take no part.
  // `take`: the lane the batch runs on, handed back once its run is over.
  void RunBatch(std::vector<std::unique_ptr<QueuedJob>>& jobs, LaneTake& take) {
    const Priority priority = take.priority();
    const int lane = take.lane();
    const Clock::time_point started = Clock::now();
    std::vector<QueuedJob*> members;
    try {
      members.reserve(jobs.size());
    } catch (...) {
      for (std::unique_ptr<QueuedJob>& job : jobs) Run(*job, take, /*hand_back=*/false);
      return;
    }
    for (std::unique_ptr<QueuedJob>& job : jobs) {
      const JobInterrupt interrupt(*job->sink, job->spec.deadline, &stop_running_);
      absl::Status why;
      try {
        why = interrupt.Check();
      } catch (...) {  // it runs; the batch's run asks again
      }
      if (!why.ok()) {
        JobTiming timing;
        timing.queue_us = MicrosBetween(job->accepted_at, started);
        Finish(*job, why, timing, /*started=*/true);
        continue;
      }
      members.push_back(job.get());
    }
    std::optional<PreparedBatch> batch;
    if (members.size() > 1) {
      try {
        batch = PrepareBatch(members);
      } catch (...) {
        batch.reset();
      }
    }
    if (!batch) {
      // Alone, or the batch could not be formed (it never fails for jobs that plan alone, but
      // no job is lost for it): each runs alone.
      for (QueuedJob* job : members) Run(*job, take, /*hand_back=*/false);
      return;
    }
    JobTiming timing;
    timing.bytes_in = batch->input->size();
    timing.lane_run = take.run();
    const JobInterrupt interrupt(*batch->sink, batch->spec.deadline, &stop_running_);
    absl::Status status;
    try {
      const ChunkJob chunk_job{
          batch->spec,  batch->plan, batch->layout, *batch->input,
          *batch->sink, interrupt,   &timing,       options_.limits.max_chunk_bytes};
      status =
          RunChunkPipeline(chunk_job, backend_->lane(priority, lane), gate_, options_.chunk_policy);
    } catch (...) {
      status = FromException(std::current_exception());
    }
    if (!status.ok()) {
      try {
        if (absl::Status why = interrupt.Check(); !why.ok()) status = why;
        NoteDeviceStatus();
      } catch (...) {  // the batch ends with the status it has
      }
    }
    const Clock::time_point finished = Clock::now();
    take.Release();
    if (timing.output_ready == Clock::time_point{}) timing.output_ready = finished;
    const int n = static_cast<int>(members.size());
    batch_counters_.Count(n);
    NoteLaneRun(priority, lane, started, finished, n, status.ok());
    for (size_t i = 0; i < members.size(); ++i) {
      QueuedJob& job = *members[i];
      // A member whose reader left ends with its own reason, whatever the others got.
      const absl::Status own = batch->sink->member_status(i);
      absl::Status job_status = own.ok() ? status : own;
      JobTiming t;
      try {
        const int64_t out_bytes = job.plan.output_elements * DTypeSize(job.plan.output_dtype);
        t = MemberTiming(timing, job.input->size(), out_bytes, batch->input->size(), n);
        t.accept_us = AcceptMicros(job);
        t.queue_us = MicrosBetween(job.accepted_at, started);
        t.total_us = MicrosBetween(job.accepted_at, timing.output_ready);
        t.result_stream_us = MicrosBetween(timing.output_ready, finished);
        t.gbps =
            t.total_us > 0 ? static_cast<double>(t.bytes_in + t.bytes_out) / (t.total_us * 1e3) : 0;
        if (job_status.ok()) job.sink->OnTiming(t);
      } catch (...) {
        // As Report: a sink that cannot take the timing ends the job with the error.
        job_status = FromException(std::current_exception());
      }
      Finish(job, job_status, t, /*started=*/true);
    }
  }

  // A batch ready to run: the stacked input, the job it runs as, and its sink.
  struct PreparedBatch {
    JobSpec spec;
    Plan plan;
    ChunkLayout layout;
    std::shared_ptr<InputSource> input;
    std::shared_ptr<BatchSink> sink;
  };

  // Stacks `members`' inputs and plans the batch; nullopt where it cannot be formed. May throw
  // (an allocation); nothing is lost then, as the members are untouched.
  std::optional<PreparedBatch> PrepareBatch(const std::vector<QueuedJob*>& members) {
    std::string stacked;
    std::vector<BatchMember> outputs;
    outputs.reserve(members.size());
    int64_t rows = 0;
    int64_t out_offset = 0;
    Clock::time_point deadline = Clock::time_point::min();
    for (QueuedJob* job : members) {
      const int64_t size = job->input->size();
      absl::StatusOr<InputChunk> bytes = job->input->Acquire(0, ByteRange{0, size});
      if (!bytes.ok()) return std::nullopt;
      stacked.append(bytes->data, static_cast<size_t>(size));
      job->input->Release(0);
      rows += size / (job->spec.shape.back() * DTypeSize(job->spec.dtype));
      const int64_t out_bytes = job->plan.output_elements * DTypeSize(job->plan.output_dtype);
      outputs.push_back({job->sink, out_offset, out_bytes});
      out_offset += out_bytes;
      deadline = std::max(deadline, job->spec.deadline);
    }
    PreparedBatch batch;
    batch.spec = BatchSpec(members.front()->spec, rows, deadline);
    absl::StatusOr<Plan> plan = PlanJob(batch.spec);
    if (!plan.ok()) return std::nullopt;
    absl::StatusOr<ChunkLayout> layout =
        ChooseLayout(batch.spec, *plan, *backend_, options_.chunk_policy);
    if (!layout.ok()) return std::nullopt;
    batch.plan = *std::move(plan);
    batch.layout = *std::move(layout);
    batch.input = InputSource::Complete(std::move(stacked));
    batch.sink = std::make_shared<BatchSink>(std::move(outputs));
    return batch;
  }

  void NoteLaneRun(Priority priority, int lane, Clock::time_point start, Clock::time_point end,
                   int jobs, bool ok) noexcept {
    std::lock_guard<std::mutex> lock(activity_mu_);
    if (lane_runs_.size() >= kLaneActivitySpans) lane_runs_.pop_front();
    try {
      lane_runs_.push_back({priority, lane, start, end, jobs, ok});
    } catch (...) {  // only the lanes' drawing misses the run
    }
  }

  // A job's run on a lane: its status and timing, to be handed over (Report).
  struct RunOutcome {
    absl::Status status;
    JobTiming timing;
  };
  // A finished job whose results a worker of its level hands over (RunAlone). Until then the
  // job counts as running (running_, running_at_, its client's admission share): its results
  // are still the daemon's.
  struct PostedReport {
    std::unique_ptr<QueuedJob> job;
    RunOutcome outcome;
    Clock::time_point posted;  // the wait until a worker takes it adds to result_stream_us
  };

  // Runs `job` on `take`'s lane; with `hand_back`, hands the lane back once the job no longer
  // uses it (a batch that runs its jobs one by one keeps it), then hands over its results.
  void Run(QueuedJob& job, LaneTake& take, bool hand_back) {
    const RunOutcome outcome = RunOnLane(job, take);
    if (hand_back) take.Release();
    Report(job, outcome);
  }

  // Runs `job` on `take`'s lane, which it keeps, up to the point where its results are ready
  // to hand over: its run is over and its timing complete.
  RunOutcome RunOnLane(QueuedJob& job, LaneTake& take) {
    const Priority priority = take.priority();
    const int lane = take.lane();
    JobTiming timing;
    const Clock::time_point started = Clock::now();
    timing.accept_us = AcceptMicros(job);
    timing.lane_run = take.run();
    timing.queue_us = MicrosBetween(job.accepted_at, started);
    timing.bytes_in = job.input->size();
    const JobInterrupt interrupt(*job.sink, job.spec.deadline, &stop_running_);
    absl::Status status;
    try {
      // A job whose client left, or whose deadline passed, while it waited takes no lane time.
      status = interrupt.Check();
      if (status.ok()) {
        const ChunkJob chunk_job{job.spec,  job.plan,  job.layout, *job.input,
                                 *job.sink, interrupt, &timing,    options_.limits.max_chunk_bytes};
        status = RunChunkPipeline(chunk_job, backend_->lane(priority, lane), gate_,
                                  options_.chunk_policy);
      }
    } catch (...) {
      status = FromException(std::current_exception());
    }
    if (!status.ok()) {
      try {
        // A job stopped for a reason of the interrupt's ends with that reason, whichever part
        // of the job noticed first (an upload failed by a cancel, a reader gone at its
        // deadline).
        if (absl::Status why = interrupt.Check(); !why.ok()) status = why;
        // An upload still arriving learns that its job is over.
        job.input->Fail(status);
        NoteDeviceStatus();
      } catch (...) {  // the job ends with the status it has
      }
    }
    const Clock::time_point finished = Clock::now();
    NoteLaneRun(priority, lane, started, finished, 1, status.ok());
    if (timing.output_ready == Clock::time_point{}) timing.output_ready = finished;
    timing.total_us = MicrosBetween(job.accepted_at, timing.output_ready);
    timing.result_stream_us = MicrosBetween(timing.output_ready, finished);
    timing.bytes_out = job.plan.output_elements * DTypeSize(job.plan.output_dtype);
    if (timing.total_us > 0) {
      timing.gbps = static_cast<double>(timing.bytes_in + timing.bytes_out) / (timing.total_us * 1e3);
    }
    return RunOutcome{std::move(status), std::move(timing)};
  }

  // Hands a run job's results over: its timing (when it succeeded), then its Done.
  void Report(QueuedJob& job, const RunOutcome& outcome) {
    absl::Status status = outcome.status;
    if (status.ok()) {
      try {
        job.sink->OnTiming(outcome.timing);
      } catch (...) {
        status = FromException(std::current_exception());
      }
    }
    Finish(job, status, outcome.timing, /*started=*/true);
  }

  // After a failed job: whether the backend can still run jobs; the first time it cannot,
  // refuse new jobs and tell the daemon.
  void NoteDeviceStatus() {
    absl::Status lost = backend_->DeviceStatus();
    if (lost.ok()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!device_lost_.ok()) return;
      device_lost_ = lost;
    }
    if (options_.on_device_lost) options_.on_device_lost(lost);
  }

  void Finish(QueuedJob& job, const absl::Status& status, const JobTiming& timing, bool started) {
    {
      // Before the client hears of it, so that its next job finds its share free. Only the
      // ledger: a job's end waits for the ledger's short sections, never for the engine mutex.
      std::lock_guard<std::mutex> ledger(ledger_mu_);
      admission_.Ended(job.ticket, started);
      if (running_.Erase(job)) {
        running_at_[static_cast<int>(job.spec.priority)].fetch_sub(1, std::memory_order_relaxed);
      }
    }
    try {
      job.sink->OnDone(status);
    } catch (...) {
      // The sink could not take its Done (JobSink): the job has ended all the same, and the
      // worker thread that ends it serves on.
    }
    RecordEnded(job, status, timing, started);
    if (--in_flight_ == 0) {
      std::lock_guard<std::mutex> lock(mu_);
      idle_.notify_all();
    }
  }

  std::unique_ptr<Backend> backend_;
  EngineOptions options_;
  std::string id_prefix_;
  PriorityGate gate_{kPriorityLevels};
  // Memory for input rings (NewRing); held by the rings it lends, so it outlives them.
  std::shared_ptr<HostBlockPool> ring_pool_;
  absl::Status ring_pool_error_;  // why there is no pool, when allocating it failed

  mutable std::mutex mu_;
  // Per priority level: idle workers wait for a posted report, or a job of their level and an
  // idle lane (level_cv_); lanes gathering a batch (gatherers_) wait for more (gather_cv_).
  std::array<std::condition_variable, kPriorityLevels> level_cv_;
  std::array<std::condition_variable, kPriorityLevels> gather_cv_;
  std::array<int, kPriorityLevels> gatherers_{};
  std::array<std::vector<LaneState>, kPriorityLevels> lane_state_;  // per level, per lane
  // Worker threads per lane: one runs a job on the lane while another hands over the results
  // of the job before, which for small jobs takes about as long as their run.
  static constexpr int kWorkersPerLane = 2;
  // Per level: finished jobs whose results wait for a worker to hand them over (RunAlone).
  std::array<std::deque<PostedReport>, kPriorityLevels> reports_;
  int64_t runs_started_ = 0;  // lane runs numbered so far (JobTiming::lane_run)
  int direct_runs_in_progress_ = 0;
  std::condition_variable direct_runs_done_;
  std::atomic<int64_t> direct_runs_{0};  // direct runs ended
  std::condition_variable idle_;
  bool stopping_ = false;
  bool stopping_accepting_ = false;
  std::atomic<bool> stop_running_{false};  // StopRunningJobs: every job's interrupt fires
  absl::Status device_lost_;               // why the backend can run no more jobs
  std::atomic<int64_t> next_job_number_{0};  // NextJobId
  // The ledger: every client's admission share, the running jobs (running_) and their count
  // per level, under ledger_mu_. Finish, Stats and a failed direct run take it alone, so that
  // a job's end never waits for the engine mutex; the rest take it inside mu_, never the other
  // way round. The counts are atomic so that scheduling may read them as hints under mu_
  // alone.
  mutable std::mutex ledger_mu_;
  Admission admission_;
  std::array<std::atomic<int>, kPriorityLevels> running_at_{};  // jobs taken by lanes, per level
  // After backend_, so that regions are unpinned while the backend still runs.
  // Mutable: reading its figures also sweeps idle regions.
  mutable RegionRegistry regions_;
  JobStats job_stats_;
  BatchCounters batch_counters_;
  const Clock::time_point started_at_;
  mutable std::mutex activity_mu_;
  std::deque<LaneRun> lane_runs_;  // the latest kLaneActivitySpans, oldest first
  std::array<ClientQueue<std::unique_ptr<QueuedJob>>, kPriorityLevels> queues_;
  // Jobs taken by lanes, until they end (the ledger, under ledger_mu_): the set allocates
  // nothing, so a job cannot fail halfway between the queue and its lane.
  IntrusiveList<QueuedJob, &QueuedJob::running> running_;
  std::atomic<int64_t> in_flight_{0};
  std::vector<std::thread> workers_;
};

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

std::unique_ptr<Engine> Engine::Create(std::unique_ptr<Backend> backend, EngineOptions options) {
  return std::unique_ptr<Engine>(
      new Engine(std::make_unique<Impl>(std::move(backend), std::move(options))));
}

absl::Status Engine::Submit(JobSpec spec, std::string& input, std::shared_ptr<JobSink> sink,
                            SubmitThread thread) {
  const int64_t size = static_cast<int64_t>(input.size());
  return impl_->Submit(
      std::move(spec), size, InputPath::kInline,
      [size](const Plan&, const ChunkLayout&) -> absl::StatusOr<int64_t> { return size; },
      [&input](const Plan&, const ChunkLayout&) -> absl::StatusOr<std::shared_ptr<InputSource>> {
        return InputSource::Complete(std::move(input));
      },
      std::move(sink), /*output_to_region=*/false, thread);
}

absl::Status Engine::Submit(JobSpec spec, std::shared_ptr<InputSource> input,
                            std::shared_ptr<JobSink> sink) {
  const int64_t size = input->size();
  return impl_->Submit(
      std::move(spec), size, InputPath::kInline,
      [size](const Plan&, const ChunkLayout&) -> absl::StatusOr<int64_t> { return size; },
      [&input](const Plan&, const ChunkLayout&) -> absl::StatusOr<std::shared_ptr<InputSource>> {
        return std::move(input);
      },
      std::move(sink));
}

absl::StatusOr<std::shared_ptr<InputRing>> Engine::SubmitStreamed(JobSpec spec,
                                                                  std::shared_ptr<JobSink> sink) {
  const int64_t elements = ElementCount(spec.shape);
  const int64_t itemsize = DTypeSize(spec.dtype);
  const int64_t size =
      elements < 0 || elements > std::numeric_limits<int64_t>::max() / itemsize
          ? -1
          : elements * itemsize;
  std::shared_ptr<InputRing> ring;
  RingShape shape;
  absl::Status status = impl_->Submit(
      std::move(spec), size, InputPath::kStreamed,
      [&](const Plan& plan, const ChunkLayout& layout) -> absl::StatusOr<int64_t> {
        absl::StatusOr<RingShape> ring_shape = impl_->RingFor(plan, layout);
        if (!ring_shape.ok()) return ring_shape.status();
        shape = *ring_shape;
        return shape.bytes();
      },
      [&](const Plan& plan,
          const ChunkLayout& layout) -> absl::StatusOr<std::shared_ptr<InputSource>> {
        absl::StatusOr<std::shared_ptr<InputRing>> made = impl_->NewRing(size, plan, layout, shape);
        if (!made.ok()) return made.status();
        ring = *made;
        return std::shared_ptr<InputSource>(ring);
      },
      std::move(sink));
  if (!status.ok()) return status;
  return ring;
}

absl::Status Engine::Submit(JobSpec spec, std::string& input, const JobRegions& regions,
                            std::shared_ptr<JobSink> sink, SubmitThread thread) {
  if (!regions.input && !regions.output) {
    return Submit(std::move(spec), input, std::move(sink), thread);
  }
  return impl_->SubmitWithRegions(std::move(spec), input, regions, std::move(sink), thread);
}

absl::StatusOr<RegionInfo> Engine::RegisterRegion(const std::string& client,
                                                  const std::string& shm_name, int64_t bytes,
                                                  const std::string& lease) {
  try {
    return impl_->regions().Register(client, shm_name, bytes, lease);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError("the server ran out of memory for this region");
  }
}

absl::StatusOr<RegionInfo> Engine::RegisterFdRegion(const std::string& client, int fd,
                                                    int64_t bytes, const std::string& lease) {
  try {
    return impl_->regions().RegisterFd(client, fd, bytes, lease);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError("the server ran out of memory for this region");
  }
}

absl::StatusOr<RegionInfo> Engine::RegisterCudaIpcRegion(const std::string& client,
                                                         const std::string& handle, int64_t bytes,
                                                         const std::string& lease) {
  try {
    return impl_->regions().RegisterCudaIpc(client, handle, bytes, lease);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError("the server ran out of memory for this region");
  }
}

absl::StatusOr<std::string> Engine::OpenRegionLease(const std::string& client) {
  return impl_->regions().OpenLease(client);
}

void Engine::EndRegionLease(const std::string& lease) { impl_->regions().EndLease(lease); }

absl::Status Engine::UnregisterRegion(const std::string& client, const std::string& region_id) {
  return impl_->regions().Unregister(client, region_id);
}

EngineDescription Engine::Describe() const { return impl_->Describe(); }
EngineStats Engine::Stats(bool with_clients, bool lane_activity) const {
  return impl_->Stats(with_clients, lane_activity);
}
void Engine::CountRefusal(const absl::Status& status) { impl_->CountRefusal(status); }

void Engine::StopRunningJobs() { impl_->StopRunningJobs(); }
void Engine::Shutdown() { impl_->Shutdown(); }
bool Engine::Drain(std::chrono::milliseconds timeout) { return impl_->Drain(timeout); }
int64_t Engine::jobs_in_flight() const { return impl_->jobs_in_flight(); }
uint32_t Engine::levels_waiting_for_lanes() const { return impl_->levels_waiting_for_lanes(); }
bool Engine::accepting() const { return impl_->accepting(); }

}  // namespace gpupipe::engine
