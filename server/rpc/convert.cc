#include "server/rpc/convert.h"

#include <cstdint>
#include <limits>

#include <google/protobuf/unknown_field_set.h>

#include "absl/strings/str_cat.h"
#include "server/engine/job/op_catalog.h"

namespace gpupipe::rpc {
namespace {

using engine::OpKind;

absl::Status RejectUnknownFields(const google::protobuf::Message& message,
                                 const std::string& field) {
  const auto& unknown = message.GetReflection()->GetUnknownFields(message);
  if (unknown.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      field, ": unknown field number ", unknown.field(0).number(),
      " (from a newer client? Describe lists what this server accepts)"));
}

absl::StatusOr<engine::DType> DecodeDType(v1::DType dtype) {
  switch (dtype) {
    case v1::DTYPE_FLOAT32: return engine::DType::kFloat32;
    case v1::DTYPE_FLOAT64: return engine::DType::kFloat64;
    case v1::DTYPE_FLOAT16: return engine::DType::kFloat16;
    case v1::DTYPE_INT32: return engine::DType::kInt32;
    case v1::DTYPE_INT64: return engine::DType::kInt64;
    case v1::DTYPE_UNSPECIFIED:
      return absl::InvalidArgumentError("input.dtype: must be set (for example DTYPE_FLOAT32)");
    default:
      return absl::InvalidArgumentError(absl::StrCat("input.dtype: unknown value ", dtype));
  }
}

absl::StatusOr<engine::OpSpec> DecodeOp(const v1::Op& op, int index) {
  const std::string field = absl::StrCat("ops[", index, "]");
  if (op.kind_case() == v1::Op::KIND_NOT_SET) {
    const auto& unknown = op.GetReflection()->GetUnknownFields(op);
    if (!unknown.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": unknown op kind (field number ", unknown.field(0).number(),
                       "); this server knows: ", engine::KnownOpNames()));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": no op kind is set; this server knows: ", engine::KnownOpNames()));
  }
  // The kind's own message, for the check every kind shares: no fields from a newer client.
  const google::protobuf::FieldDescriptor* kind_field =
      op.GetDescriptor()->FindFieldByNumber(op.kind_case());
  const google::protobuf::Message& params = op.GetReflection()->GetMessage(op, kind_field);
  if (auto s = RejectUnknownFields(params, absl::StrCat(field, " (", kind_field->name(), ")"));
      !s.ok()) {
    return s;
  }
  engine::OpSpec spec;
  switch (op.kind_case()) {
    case v1::Op::kAffine:
      spec.kind = OpKind::kAffine;
      if (op.affine().has_alpha()) spec.alpha = op.affine().alpha();
      if (op.affine().has_beta()) spec.beta = op.affine().beta();
      return spec;
    case v1::Op::kScale:
      spec.kind = OpKind::kScale;
      if (op.scale().has_alpha()) spec.alpha = op.scale().alpha();
      return spec;
    case v1::Op::kAdd:
      spec.kind = OpKind::kAdd;
      if (op.add().has_value()) spec.value = op.add().value();
      return spec;
    case v1::Op::kClamp:
      spec.kind = OpKind::kClamp;
      if (op.clamp().has_lo()) spec.lo = op.clamp().lo();
      if (op.clamp().has_hi()) spec.hi = op.clamp().hi();
      return spec;
    case v1::Op::kPow:
      spec.kind = OpKind::kPow;
      if (!op.pow().has_p()) {
        return absl::InvalidArgumentError(absl::StrCat(field, " (pow).p: is required"));
      }
      spec.p = op.pow().p();
      return spec;
    case v1::Op::kRelu: spec.kind = OpKind::kRelu; return spec;
    case v1::Op::kAbs: spec.kind = OpKind::kAbs; return spec;
    case v1::Op::kSqrt: spec.kind = OpKind::kSqrt; return spec;
    case v1::Op::kExp: spec.kind = OpKind::kExp; return spec;
    case v1::Op::kLog: spec.kind = OpKind::kLog; return spec;
    case v1::Op::kSigmoid: spec.kind = OpKind::kSigmoid; return spec;
    case v1::Op::kTanh: spec.kind = OpKind::kTanh; return spec;
    case v1::Op::kSum: spec.kind = OpKind::kSum; return spec;
    case v1::Op::kMin: spec.kind = OpKind::kMin; return spec;
    case v1::Op::kMax: spec.kind = OpKind::kMax; return spec;
    case v1::Op::kMean: spec.kind = OpKind::kMean; return spec;
    case v1::Op::kNorm2: spec.kind = OpKind::kNorm2; return spec;
    case v1::Op::kArgmax: spec.kind = OpKind::kArgmax; return spec;
    case v1::Op::kL2Normalize: spec.kind = OpKind::kL2Normalize; return spec;
    case v1::Op::kStandardize: spec.kind = OpKind::kStandardize; return spec;
    case v1::Op::kSoftmax: spec.kind = OpKind::kSoftmax; return spec;
    case v1::Op::kCumsum: spec.kind = OpKind::kCumsum; return spec;
    case v1::Op::kHistogram: {
      const v1::HistogramOp& h = op.histogram();
      spec.kind = OpKind::kHistogram;
      if (h.has_bins()) spec.bins = h.bins();
      if (!h.has_lo() || !h.has_hi()) {
        return absl::InvalidArgumentError(absl::StrCat(
            field, " (histogram).", h.has_lo() ? "hi" : "lo",
            ": is required (the range of the bins, e.g. histogram(bins=256, lo=0, hi=1))"));
      }
      spec.lo = h.lo();
      spec.hi = h.hi();
      return spec;
    }
    case v1::Op::kConvolve: {
      const v1::ConvolveOp& c = op.convolve();
      spec.kind = OpKind::kConvolve;
      spec.taps.assign(c.taps().begin(), c.taps().end());
      switch (c.mode()) {
        case v1::ConvolveOp::MODE_UNSPECIFIED:
        case v1::ConvolveOp::MODE_FULL: spec.mode = engine::ConvolveMode::kFull; break;
        case v1::ConvolveOp::MODE_SAME: spec.mode = engine::ConvolveMode::kSame; break;
        case v1::ConvolveOp::MODE_VALID: spec.mode = engine::ConvolveMode::kValid; break;
        default:
          return absl::InvalidArgumentError(absl::StrCat(
              field, " (convolve).mode: unknown value ", c.mode(), " (full, same or valid)"));
      }
      return spec;
    }
    case v1::Op::kTopk:
      spec.kind = OpKind::kTopk;
      if (!op.topk().has_k()) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, " (topk).k: is required (values kept per row, e.g. topk(k=16))"));
      }
      spec.k = op.topk().k();
      return spec;
    case v1::Op::KIND_NOT_SET:
      break;
  }
  return absl::InternalError(absl::StrCat(field, ": op kind ", op.kind_case(), " not decoded"));
}

}  // namespace

absl::StatusOr<engine::JobSpec> DecodeJobSpec(const v1::SubmitRequest& request) {
  engine::JobSpec spec;
  if (!request.has_input()) {
    return absl::InvalidArgumentError("input: must be set (dtype, shape and data)");
  }
  absl::StatusOr<engine::DType> dtype = DecodeDType(request.input().dtype());
  if (!dtype.ok()) return dtype.status();
  spec.dtype = *dtype;
  spec.shape.assign(request.input().shape().begin(), request.input().shape().end());
  spec.ops.reserve(request.ops_size());
  for (int i = 0; i < request.ops_size(); ++i) {
    absl::StatusOr<engine::OpSpec> op = DecodeOp(request.ops(i), i);
    if (!op.ok()) return op.status();
    spec.ops.push_back(*op);
  }
  absl::StatusOr<engine::Priority> priority = DecodePriority(request.priority());
  if (!priority.ok()) return priority.status();
  spec.priority = *priority;
  const v1::LaunchOptions& options = request.options();
  switch (options.staging()) {
    case v1::STAGING_AUTO: spec.staging = engine::Staging::kAuto; break;
    case v1::STAGING_DIRECT: spec.staging = engine::Staging::kDirect; break;
    case v1::STAGING_PIPELINE: spec.staging = engine::Staging::kPipeline; break;
    case v1::STAGING_PIPELINE_THREAD: spec.staging = engine::Staging::kPipelineThread; break;
    case v1::STAGING_PRIMITIVES: spec.staging = engine::Staging::kPrimitives; break;
    case v1::STAGING_BULK: spec.staging = engine::Staging::kBulk; break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "options.staging: unknown value ", options.staging(),
          " (auto, direct, pipeline, pipeline-thread, primitives or bulk)"));
  }
  switch (options.launch()) {
    case v1::LAUNCH_AUTO: spec.launch = engine::LaunchMode::kAuto; break;
    case v1::LAUNCH_STREAM: spec.launch = engine::LaunchMode::kStream; break;
    case v1::LAUNCH_PDL: spec.launch = engine::LaunchMode::kPdl; break;
    case v1::LAUNCH_GRAPH: spec.launch = engine::LaunchMode::kGraph; break;
    case v1::LAUNCH_GRAPH_PDL: spec.launch = engine::LaunchMode::kGraphPdl; break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("options.launch: unknown value ", options.launch(),
                       " (auto, stream, pdl, graph or graph-pdl)"));
  }
  spec.profile = options.profile();
  spec.chunk_bytes = options.chunk_bytes() > static_cast<uint64_t>(INT64_MAX)
                         ? INT64_MAX
                         : static_cast<int64_t>(options.chunk_bytes());
  spec.timeline = options.timeline();
  spec.explain = request.explain();
  spec.dry_run = request.dry_run();
  spec.stages = options.stages() > 8 ? 9 : static_cast<int>(options.stages());
  spec.client_tag = request.client_tag();
  return spec;
}

v1::DType EncodeDType(engine::DType dtype) {
  switch (dtype) {
    case engine::DType::kFloat32: return v1::DTYPE_FLOAT32;
    case engine::DType::kFloat64: return v1::DTYPE_FLOAT64;
    case engine::DType::kFloat16: return v1::DTYPE_FLOAT16;
    case engine::DType::kInt32: return v1::DTYPE_INT32;
    case engine::DType::kInt64: return v1::DTYPE_INT64;
  }
  return v1::DTYPE_UNSPECIFIED;
}

absl::StatusOr<engine::Priority> DecodePriority(v1::Priority priority) {
  switch (priority) {
    case v1::PRIORITY_UNSPECIFIED:
    case v1::PRIORITY_NORMAL: return engine::Priority::kNormal;
    case v1::PRIORITY_LOW: return engine::Priority::kLow;
    case v1::PRIORITY_HIGH: return engine::Priority::kHigh;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("priority: unknown value ", priority, " (low, normal or high)"));
  }
}

v1::Priority EncodePriority(engine::Priority priority) {
  switch (priority) {
    case engine::Priority::kLow: return v1::PRIORITY_LOW;
    case engine::Priority::kNormal: return v1::PRIORITY_NORMAL;
    case engine::Priority::kHigh: return v1::PRIORITY_HIGH;
  }
  return v1::PRIORITY_UNSPECIFIED;
}

v1::Staging EncodeStaging(engine::Staging staging) {
  switch (staging) {
    case engine::Staging::kAuto: return v1::STAGING_AUTO;
    case engine::Staging::kDirect: return v1::STAGING_DIRECT;
    case engine::Staging::kPipeline: return v1::STAGING_PIPELINE;
    case engine::Staging::kPipelineThread: return v1::STAGING_PIPELINE_THREAD;
    case engine::Staging::kPrimitives: return v1::STAGING_PRIMITIVES;
    case engine::Staging::kBulk: return v1::STAGING_BULK;
  }
  return v1::STAGING_AUTO;
}

v1::LaunchMode EncodeLaunchMode(engine::LaunchMode mode) {
  switch (mode) {
    case engine::LaunchMode::kAuto: return v1::LAUNCH_AUTO;
    case engine::LaunchMode::kStream: return v1::LAUNCH_STREAM;
    case engine::LaunchMode::kPdl: return v1::LAUNCH_PDL;
    case engine::LaunchMode::kGraph: return v1::LAUNCH_GRAPH;
    case engine::LaunchMode::kGraphPdl: return v1::LAUNCH_GRAPH_PDL;
  }
  return v1::LAUNCH_AUTO;
}

absl::StatusOr<engine::JobRegions> DecodeJobRegions(const v1::SubmitRequest& request) {
  engine::JobRegions regions;
  const auto decode = [](const v1::RegionSlice& slice,
                         const char* field) -> absl::StatusOr<engine::RegionSlice> {
    constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    if (slice.region_id().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".region_id: empty; give the id RegisterRegion returned"));
    }
    if (slice.offset() > kMax || slice.length() > kMax) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": offset or length out of range"));
    }
    return engine::RegionSlice{slice.region_id(), static_cast<int64_t>(slice.offset()),
                               static_cast<int64_t>(slice.length())};
  };
  if (request.has_input_region()) {
    absl::StatusOr<engine::RegionSlice> in = decode(request.input_region(), "input_region");
    if (!in.ok()) return in.status();
    regions.input = *std::move(in);
  }
  if (request.has_output_region()) {
    absl::StatusOr<engine::RegionSlice> out = decode(request.output_region(), "output_region");
    if (!out.ok()) return out.status();
    regions.output = *std::move(out);
  }
  return regions;
}

v1::JobEvent EncodeAccepted(const engine::AcceptedInfo& info) {
  v1::JobEvent event;
  event.set_job_id(info.job_id);
  v1::Accepted* accepted = event.mutable_accepted();
  accepted->set_job_id(info.job_id);
  accepted->set_output_dtype(EncodeDType(info.output_dtype));
  for (int64_t d : info.output_shape) accepted->add_output_shape(d);
  accepted->set_backend(info.backend);
  return event;
}

v1::JobEvent EncodeTiming(const std::string& job_id, const engine::JobTiming& t) {
  v1::JobEvent event;
  event.set_job_id(job_id);
  v1::Timing* timing = event.mutable_timing();
  timing->set_accept_us(t.accept_us);
  timing->set_queue_us(t.queue_us);
  timing->set_h2d_us(t.h2d_us);
  timing->set_compute_us(t.compute_us);
  timing->set_d2h_us(t.d2h_us);
  timing->set_total_us(t.total_us);
  timing->set_result_stream_us(t.result_stream_us);
  timing->set_bytes_in(t.bytes_in);
  timing->set_bytes_out(t.bytes_out);
  timing->set_kernels(t.kernels);
  timing->set_stream(t.stream);
  timing->set_staging(t.staging);
  timing->set_launch(t.launch);
  timing->set_graph(t.graph);
  for (const engine::JobTiming::Step& step : t.steps) {
    v1::StepTiming* st = timing->add_steps();
    st->set_step(step.step);
    st->set_ops(step.ops);
    st->set_kernels(step.kernels);
    st->set_device_us(step.device_us);
  }
  for (const engine::JobTiming::Kernel& kernel : t.kernel_times) {
    v1::KernelTiming* kt = timing->add_kernel_times();
    kt->set_index(kernel.index);
    kt->set_name(kernel.name);
    kt->set_step(kernel.step);
    kt->set_device_us(kernel.device_us);
  }
  timing->set_chunks(t.chunks);
  timing->set_batch_jobs(t.batch_jobs);
  timing->set_gbps(t.gbps);
  for (const engine::JobTiming::TimelineEntry& e : t.timeline) {
    v1::TimelineEntry* te = timing->add_timeline();
    te->set_stream(e.stream);
    te->set_stage(e.stage);
    te->set_chunk(e.chunk);
    te->set_start_us(e.start_us);
    te->set_end_us(e.end_us);
  }
  return event;
}

v1::JobEvent EncodePlan(const std::string& job_id, const engine::PlanDescription& plan) {
  v1::JobEvent event;
  event.set_job_id(job_id);
  v1::Plan* out = event.mutable_plan();
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    const engine::KernelDescription& k = plan.kernels[i];
    v1::PlannedKernel* pk = out->add_kernels();
    pk->set_index(static_cast<int>(i));
    pk->set_name(k.name);
    pk->set_step(k.step);
    pk->set_ops(k.ops);
    pk->set_rows(k.rows);
    pk->set_cols(k.cols);
    pk->set_blocks(k.blocks);
    pk->set_threads(k.threads);
  }
  for (const engine::EdgeDescription& e : plan.edges) {
    v1::PlanEdge* pe = out->add_edges();
    pe->set_from(e.from);
    pe->set_to(e.to);
    pe->set_kind(e.kind);
    pe->set_reason(e.reason);
  }
  out->set_launch(plan.launch);
  out->set_staging(plan.staging);
  return event;
}

v1::JobEvent EncodeDone(const std::string& job_id, const absl::Status& status) {
  v1::JobEvent event;
  event.set_job_id(job_id);
  event.mutable_done()->set_code(static_cast<int>(status.code()));
  event.mutable_done()->set_message(std::string(status.message()));
  return event;
}

v1::DescribeResponse EncodeDescription(const engine::EngineDescription& d,
                                       const std::string& server_version) {
  v1::DescribeResponse response;
  response.set_backend(d.backend);
  response.set_server_version(server_version);
  if (d.device) {
    v1::Device* device = response.mutable_device();
    device->set_name(d.device->name);
    device->set_ordinal(d.device->ordinal);
    device->set_multiprocessors(d.device->multiprocessors);
    device->set_memory_bytes(d.device->memory_bytes);
    device->set_compute_capability(d.device->compute_capability);
    device->set_least_stream_priority(d.device->least_stream_priority);
    device->set_greatest_stream_priority(d.device->greatest_stream_priority);
    device->set_driver_version(d.device->driver_version);
    device->set_runtime_version(d.device->runtime_version);
    device->set_kernel_code(d.device->kernel_code);
    for (const std::string& feature : d.device->features) device->add_features(feature);
    device->set_wait(d.device->wait);
    for (const engine::PriorityLevel& level : d.levels) {
      v1::PriorityMapping* m = device->add_priorities();
      m->set_priority(EncodePriority(level.priority));
      m->set_device_priority(level.device_priority);
      m->set_streams(level.lanes);
    }
  }
  for (const engine::OpInfo& info : engine::OpCatalog()) {
    v1::OpInfo* op = response.add_ops();
    op->set_name(std::string(info.name));
    op->set_kind(std::string(engine::OpClassName(info.op_class)));
    op->set_description(std::string(info.description));
    for (const engine::ParamInfo& p : info.params) {
      v1::ParamInfo* param = op->add_params();
      param->set_name(std::string(p.name));
      param->set_type(std::string(p.type));
      param->set_required(p.required);
      if (!p.required) {
        param->set_default_value(p.default_text != nullptr ? std::string(p.default_text)
                                                           : absl::StrCat(p.default_value));
      }
      param->set_description(std::string(p.description));
    }
    for (engine::DType dtype : info.dtypes) op->add_dtypes(EncodeDType(dtype));
  }
  v1::Limits* limits = response.mutable_limits();
  limits->set_max_input_bytes(d.limits.max_input_bytes);
  limits->set_max_stream_input_bytes(d.limits.max_stream_input_bytes);
  limits->set_max_ops(d.limits.max_ops);
  limits->set_max_chunk_bytes(d.limits.max_chunk_bytes);
  limits->set_max_rank(d.limits.max_rank);
  limits->set_input_ring_bytes(d.limits.input_ring_bytes);
  limits->set_input_ring_total_bytes(d.limits.input_ring_total_bytes);
  limits->set_min_chunk_bytes(d.min_chunk_bytes);
  limits->set_max_work_per_byte(d.limits.max_work_per_byte);
  limits->set_max_queued_jobs(d.admission.max_queued_jobs);
  limits->set_max_queued_bytes(d.admission.max_queued_bytes);
  limits->set_max_client_jobs(d.admission.max_client_jobs);
  limits->set_max_client_queued_bytes(d.admission.max_client_queued_bytes);
  limits->set_max_client_uploads(d.admission.max_client_uploads);
  limits->set_upload_idle_timeout_ms(d.limits.upload_idle_timeout_ms);
  limits->set_max_region_bytes(d.regions.max_bytes);
  limits->set_max_client_region_bytes(d.regions.max_client_bytes);
  limits->set_max_client_regions(d.regions.max_client_regions);
  limits->set_region_idle_timeout_ms(d.regions.idle_timeout.count());
  limits->set_max_region_input_bytes(d.limits.max_region_input_bytes);
  limits->set_max_regions(d.regions.max_regions);
  for (engine::Staging s : d.stagings) response.add_stagings(EncodeStaging(s));
  for (engine::LaunchMode m : d.launch_modes) response.add_launch_modes(EncodeLaunchMode(m));
  v1::GraphCacheStats* graphs = response.mutable_graph_cache();
  graphs->set_hits(d.graph_cache.hits);
  graphs->set_updates(d.graph_cache.updates);
  graphs->set_misses(d.graph_cache.misses);
  graphs->set_evictions(d.graph_cache.evictions);
  graphs->set_entries(d.graph_cache.entries);
  graphs->set_capacity(d.graph_cache.capacity);
  v1::Batching* batching = response.mutable_batching();
  batching->set_window_us(d.batching.enabled() ? d.batching.window_us : 0);
  batching->set_max_jobs(d.batching.max_jobs);
  batching->set_max_bytes(d.batching.max_bytes);
  response.set_direct_run_max_bytes(d.direct_run.enabled() ? d.direct_run.max_bytes : 0);
  return response;
}

namespace {

void EncodeHistogram(const engine::LatencyHistogram& h, v1::LatencyHistogram* out) {
  for (double b : engine::LatencyHistogram::kBounds) out->add_bounds_seconds(b);
  for (int64_t c : h.counts) out->add_counts(c);
  out->set_sum_seconds(h.sum);
  out->set_count(h.count);
}

void EncodeCounts(const engine::JobCounts& c, v1::JobCounts* out) {
  for (const auto& [status, n] : c.by_status) (*out->mutable_by_status())[status] = n;
  out->set_bytes_in(c.bytes_in);
  out->set_bytes_out(c.bytes_out);
  out->set_device_seconds(c.device_seconds);
}

}  // namespace

v1::StatsResponse EncodeStats(const engine::EngineStats& stats, const std::string& server_version,
                              double uptime_seconds) {
  v1::StatsResponse out;
  out.set_backend(stats.backend);
  out.set_server_version(server_version);
  out.set_uptime_seconds(uptime_seconds);
  for (const engine::EngineStats::Level& l : stats.levels) {
    v1::PriorityStats* p = out.add_priorities();
    p->set_priority(EncodePriority(l.priority));
    p->set_lanes(l.lanes);
    p->set_running(l.running);
    p->set_queued(l.queued);
    EncodeCounts(l.done.jobs, p->mutable_jobs());
    EncodeHistogram(l.done.queue_wait, p->mutable_queue_wait());
    EncodeHistogram(l.done.device_time, p->mutable_device_time());
    EncodeHistogram(l.done.total_time, p->mutable_total_time());
  }
  for (const engine::EngineStats::Client& c : stats.clients) {
    v1::ClientStats* client = out.add_clients();
    client->set_client(c.client);
    client->set_active_jobs(c.active_jobs);
    client->set_uploads(c.uploads);
    client->set_queued_bytes(c.queued_bytes);
    EncodeCounts(c.jobs, client->mutable_jobs());
  }
  v1::PoolStats* rings = out.add_pools();
  rings->set_name("input_rings");
  rings->set_used_bytes(stats.input_ring_used_bytes);
  rings->set_capacity_bytes(stats.input_ring_capacity_bytes);
  v1::PoolStats* queued = out.add_pools();
  queued->set_name("queued_inputs");
  queued->set_used_bytes(stats.queued_bytes);
  queued->set_capacity_bytes(stats.max_queued_bytes);
  v1::PoolStats* regions = out.add_pools();
  regions->set_name("regions");
  regions->set_used_bytes(stats.region_mapped_bytes);
  regions->set_capacity_bytes(stats.region_capacity_bytes);
  out.set_regions(stats.regions);
  v1::GraphCacheStats* g = out.mutable_graph_cache();
  g->set_hits(stats.graph_cache.hits);
  g->set_updates(stats.graph_cache.updates);
  g->set_misses(stats.graph_cache.misses);
  g->set_evictions(stats.graph_cache.evictions);
  g->set_entries(stats.graph_cache.entries);
  g->set_capacity(stats.graph_cache.capacity);
  out.set_uploads_in_progress(stats.uploads_in_progress);
  for (const auto& [reason, n] : stats.refused) (*out.mutable_rejected())[reason] = n;
  v1::BatchStats* b = out.mutable_batching();
  b->set_batches(stats.batching.batches);
  b->set_batched_jobs(stats.batching.batched_jobs);
  for (int bound : engine::BatchCounters::SizeBounds()) b->add_size_bounds(bound);
  for (int64_t n : stats.batching.size_counts) b->add_size_counts(n);
  b->set_largest(stats.batching.largest);
  out.set_direct_runs(stats.direct_runs);
  for (const engine::EngineStats::LaneSpan& span : stats.lane_activity) {
    v1::LaneSpan* l = out.add_lane_activity();
    l->set_lane(span.lane);
    l->set_start_us(span.start_us);
    l->set_end_us(span.end_us);
    l->set_jobs(span.jobs);
    l->set_ok(span.ok);
  }
  return out;
}

}  // namespace gpupipe::rpc
