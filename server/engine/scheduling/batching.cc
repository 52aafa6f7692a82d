#include "server/engine/scheduling/batching.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace gpupipe::engine {
namespace {

// `v`'s bits as they are: the key is only ever compared, never shown, and this is exact (0.0
// and -0.0 apart) and cheap, which matters since every small job makes a key.
void AppendBits(double v, std::string* key) {
  char bytes[sizeof(double)];
  std::memcpy(bytes, &v, sizeof(double));
  key->append(bytes, sizeof(double));
}

// Every parameter an op's result depends on, exactly. The doubles take 8 bytes each and the
// taps are counted, so no two different ops make the same text.
void AppendOp(const OpSpec& op, std::string* key) {
  absl::StrAppend(key, static_cast<int>(op.kind), "(");
  for (double v : {op.alpha, op.beta, op.value, op.lo, op.hi, op.p}) AppendBits(v, key);
  absl::StrAppend(key, op.bins, ",", static_cast<int>(op.mode), ",", op.k, ",",
                  op.taps.size(), ":");
  for (double t : op.taps) AppendBits(t, key);
  key->push_back(')');
}

}  // namespace

std::string BatchKey(const JobSpec& spec, const Plan& plan, const ChunkLayout& layout,
                     int64_t input_bytes, bool inline_input, bool output_to_region,
                     const BatchPolicy& policy) {
  if (!policy.enabled() || !inline_input || output_to_region) return "";
  if (spec.profile || spec.timeline || spec.explain || spec.dry_run || spec.shape.empty()) {
    return "";
  }
  if (layout.mode != ChunkLayout::Mode::kRows || layout.chunk_count != 1) return "";
  if (input_bytes <= 0 || input_bytes > policy.max_bytes) return "";
  const int64_t output_bytes = plan.output_elements * DTypeSize(plan.output_dtype);
  if (plan.output_elements <= 0 || output_bytes > policy.max_member_output_bytes) return "";
  // A reduction drops the last axis: an op along the last axis after it works across rows,
  // which stacking would mix up. Elementwise ops after it still work on each value alone.
  bool reduced = false;
  for (const PlanStep& step : plan.steps) {
    if (reduced && step.kind != StepKind::kElementwise) return "";
    reduced |= step.reduces();
  }
  std::string key =
      absl::StrCat(DTypeName(spec.dtype), "|", PriorityName(spec.priority), "|", spec.shape.back(),
                   "|", StagingName(spec.staging), "|", spec.stages, "|",
                   LaunchModeName(spec.launch), "|", spec.chunk_bytes, "|");
  for (const OpSpec& op : spec.ops) AppendOp(op, &key);
  return key;
}

JobSpec BatchSpec(const JobSpec& first, int64_t total_rows,
                  std::chrono::steady_clock::time_point deadline) {
  JobSpec spec = first;
  spec.shape = {total_rows, first.shape.back()};
  spec.deadline = deadline;
  spec.explain = false;
  spec.client_tag.clear();
  return spec;
}

BatchSink::BatchSink(std::vector<BatchMember> members)
    : members_(std::move(members)), gone_(members_.size()) {}

absl::Status BatchSink::OnChunk(int64_t offset, const char* data, int64_t size) {
  const int64_t end = offset + size;
  bool anyone = false;
  for (size_t i = 0; i < members_.size(); ++i) {
    const BatchMember& m = members_[i];
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!gone_[i].ok()) continue;
    }
    const int64_t from = std::max(offset, m.out_offset);
    const int64_t to = std::min(end, m.out_offset + m.out_bytes);
    if (from < to) {
      absl::Status s = m.sink->OnChunk(from - m.out_offset, data + (from - offset), to - from);
      if (!s.ok()) {
        std::lock_guard<std::mutex> lock(mu_);
        gone_[i] = std::move(s);
        continue;
      }
    }
    anyone = true;
  }
  if (anyone) return absl::OkStatus();
  return ReaderStatus();
}

absl::Status BatchSink::ReaderStatus() const {
  absl::Status first;
  for (size_t i = 0; i < members_.size(); ++i) {
    absl::Status s;
    {
      std::lock_guard<std::mutex> lock(mu_);
      s = gone_[i];
    }
    if (s.ok()) s = members_[i].sink->ReaderStatus();
    if (s.ok()) return absl::OkStatus();
    if (first.ok()) first = s;
  }
  return first;
}

absl::Status BatchSink::member_status(size_t i) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!gone_[i].ok()) return gone_[i];
  }
  return members_[i].sink->ReaderStatus();
}

JobTiming MemberTiming(const JobTiming& batch, int64_t member_bytes_in, int64_t member_bytes_out,
                       int64_t batch_bytes_in, int jobs) {
  JobTiming t = batch;
  const double share = batch_bytes_in > 0 ? static_cast<double>(member_bytes_in) /
                                                static_cast<double>(batch_bytes_in)
                                          : 1.0 / std::max(jobs, 1);
  t.h2d_us *= share;
  t.compute_us *= share;
  t.d2h_us *= share;
  t.host_staging_us *= share;
  t.bytes_in = member_bytes_in;
  t.bytes_out = member_bytes_out;
  t.batch_jobs = jobs;
  return t;
}

const std::vector<int>& BatchCounters::SizeBounds() {
  static const auto* bounds = new std::vector<int>{2, 4, 8, 16, 32, 64, 128};
  return *bounds;
}

void BatchCounters::Count(int jobs) {
  std::lock_guard<std::mutex> lock(mu_);
  if (counts_.size_counts.empty()) counts_.size_counts.assign(SizeBounds().size() + 1, 0);
  ++counts_.batches;
  counts_.batched_jobs += jobs;
  counts_.largest = std::max(counts_.largest, jobs);
  const auto& bounds = SizeBounds();
  const size_t bucket =
      static_cast<size_t>(std::lower_bound(bounds.begin(), bounds.end(), jobs) - bounds.begin());
  ++counts_.size_counts[bucket];
}

BatchCounters::Snapshot BatchCounters::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  Snapshot s = counts_;
  if (s.size_counts.empty()) s.size_counts.assign(SizeBounds().size() + 1, 0);
  return s;
}

}  // namespace gpupipe::engine
