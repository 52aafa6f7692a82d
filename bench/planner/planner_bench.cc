// planner_bench: device time of planned pipelines on one GPU, through the daemon's own code
// path (ValidateJob, PlanJob, then LaunchPlan on a stream or a GraphCache capture of it), in
// the four launch modes (stream, pdl, graph, graph-pdl) and two stagings (pipeline with 2
// stages, the daemon default, and direct).
//
// Device time: CUDA events recorded just before and just after the plan's launches. A spin
// kernel enqueued ahead of the start event holds the device until the host has enqueued the
// whole plan, so the events see the device's work and its launch gaps, not host submission
// (the daemon hides that behind the input copy too). The host's own enqueue time is reported
// apart. Inputs are random, never zero, already in device memory; outputs stay there.
//
// Cases (see bench/planner/run.sh and the report it writes):
//   A  affine(2,1) | relu | sqrt | softmax, one row of 2^20
//   B  the same on 1024 x 1024
//   C  16 x softmax on 1024 x 1024 (a chain of dependent kernels), plus chains of empty
//      kernels (the launch floor), plus each chain kernel timed alone with events
//   D  6 elementwise ops on 2^28: the planner's fused step vs six single-op steps; and a
//      device-to-device copy of the same bytes for the bandwidth figure
//
// Output: one JSON object per line for every measurement and check, then a human table.
// `--isolated` instead runs case C's kernels once each, with a device synchronization between
// them and nothing else on the GPU, for Nsight Compute to time (run.sh does that); it writes
// the order of those kernels to --isolated-json.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/planner/bench_kernels.h"
#include "kernels/cuda/ops.h"
#include "nlohmann/json.hpp"
#include "server/engine/backends/cuda/graph_cache.h"
#include "server/engine/backends/cuda/step_launcher.h"
#include "server/engine/job/limits.h"
#include "server/engine/planning/plan.h"
#include "server/engine/job/types.h"
#include "server/engine/job/validate.h"

namespace gpupipe::bench {
namespace {

namespace kc = kernels::cuda;
using engine::JobSpec;
using engine::OpKind;
using engine::OpSpec;
using engine::Plan;
using engine::StepBuffers;
using json = nlohmann::json;

// ---- errors ----------------------------------------------------------------------------------

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "planner_bench: %s\n", what.c_str());
  std::exit(1);
}

void Check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    Die(std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
  }
}

#define CK(call) Check((call), #call)

// ---- options ---------------------------------------------------------------------------------

struct Options {
  bool isolated = false;
  bool describe = false;
  std::string isolated_json = "isolated-kernels.json";
  std::string cases = "ABCD";
  int warmup = 10;
  int reps = 50;  // timed repetitions per measurement (>= 30)
  uint64_t seed = 0;
};

Options ParseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Die("missing value after " + a);
      return argv[++i];
    };
    if (a == "--isolated") {
      o.isolated = true;
    } else if (a == "--describe") {
      o.describe = true;
    } else if (a == "--isolated-json") {
      o.isolated_json = value();
    } else if (a == "--cases") {
      o.cases = value();
    } else if (a == "--warmup") {
      o.warmup = std::stoi(value());
    } else if (a == "--reps") {
      o.reps = std::stoi(value());
    } else if (a == "--seed") {
      o.seed = std::stoull(value());
    } else if (a == "-h" || a == "--help") {
      std::printf(
          "usage: planner_bench [--cases ABCD] [--reps N] [--warmup N] [--seed S]\n"
          "       planner_bench --isolated [--isolated-json FILE]\n"
          "       planner_bench --describe   (the plans and their kernels; no GPU needed)\n");
      std::exit(0);
    } else {
      Die("unknown argument " + a);
    }
  }
  if (o.reps < 30) Die("--reps must be at least 30");
  if (o.warmup < 2) Die("--warmup must be at least 2");
  if (o.seed == 0) {
    o.seed = static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  }
  return o;
}

// ---- device ----------------------------------------------------------------------------------

struct Device {
  cudaDeviceProp prop{};
  int driver = 0;
  int runtime = 0;
  cudaStream_t stream = nullptr;
  void* d_scratch = nullptr;  // 16 bytes for the memset that separates the spin from a region
};

// ---- jobs and plans --------------------------------------------------------------------------

OpSpec Affine(double a, double b) {
  OpSpec op;
  op.kind = OpKind::kAffine;
  op.alpha = a;
  op.beta = b;
  return op;
}
OpSpec Simple(OpKind kind) {
  OpSpec op;
  op.kind = kind;
  return op;
}

Plan MakePlan(const std::vector<int64_t>& shape, const std::vector<OpSpec>& ops) {
  JobSpec spec;
  spec.dtype = engine::DType::kFloat32;
  spec.shape = shape;
  spec.ops = ops;
  engine::Limits limits;
  limits.max_input_bytes = int64_t{8} << 30;  // case D is 1 GiB, over the daemon's default
  int64_t n = engine::ElementCount(shape);
  if (absl::Status s = engine::ValidateJob(spec, n * 4, limits); !s.ok()) {
    Die("ValidateJob: " + std::string(s.ToString()));
  }
  absl::StatusOr<Plan> plan = engine::PlanJob(spec);
  if (!plan.ok()) Die("PlanJob: " + std::string(plan.status().ToString()));
  return *std::move(plan);
}

// Floats each of the plan's two ping-pong buffers must hold.
int64_t BufferElements(const Plan& plan) { return (plan.max_bytes + 3) / 4; }

// The same ops as one step each: what the daemon would run without elementwise fusion.
Plan MakeUnfusedPlan(const std::vector<int64_t>& shape, const std::vector<OpSpec>& ops) {
  Plan out = MakePlan(shape, {ops[0]});
  for (size_t i = 1; i < ops.size(); ++i) {
    Plan one = MakePlan(shape, {ops[i]});
    for (auto& s : one.steps) out.steps.push_back(s);
  }
  return out;
}

// ---- launch modes ----------------------------------------------------------------------------

enum class Mode { kStream, kPdl, kGraph, kGraphPdl };
constexpr Mode kModes[] = {Mode::kStream, Mode::kPdl, Mode::kGraph, Mode::kGraphPdl};

const char* ModeName(Mode m) {
  switch (m) {
    case Mode::kStream: return "stream";
    case Mode::kPdl: return "pdl";
    case Mode::kGraph: return "graph";
    case Mode::kGraphPdl: return "graph-pdl";
  }
  return "";
}
bool ModePdl(Mode m) { return m == Mode::kPdl || m == Mode::kGraphPdl; }
bool ModeGraph(Mode m) { return m == Mode::kGraph || m == Mode::kGraphPdl; }

struct StagingChoice {
  const char* name;
  kc::Staging staging;
  int stages;
};
constexpr StagingChoice kStagings[] = {{"pipeline2", kc::Staging::kPipeline, 2},
                                       {"direct", kc::Staging::kDirect, 2}};

kc::LaunchConfig ConfigFor(const Device& dev, const StagingChoice& st, bool pdl) {
  kc::LaunchConfig c;
  c.stream = dev.stream;
  c.staging = st.staging;
  c.stages = st.stages;
  c.pdl = pdl;
  c.multiprocessors = dev.prop.multiProcessorCount;
  return c;
}

// ---- timing ----------------------------------------------------------------------------------

struct Stats {
  double median = 0, p10 = 0, p90 = 0, min = 0;
};

Stats Summarize(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto q = [&](double f) {
    const double pos = f * (v.size() - 1);
    const size_t lo = static_cast<size_t>(pos);
    const size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - lo);
  };
  s.median = q(0.5);
  s.p10 = q(0.1);
  s.p90 = q(0.9);
  s.min = v.front();
  return s;
}

struct Timing {
  Stats device_us;
  Stats host_us;  // host time to enqueue the region (LaunchPlan, or GraphCache::Get + launch)
  double spin_us = 0;
  int late = 0;  // repetitions whose enqueue outlasted the spin (device time may hold host gaps)
  int reps = 0;
};

using Enqueue = std::function<cudaError_t(int rep)>;
using Prepare = std::function<void(int rep)>;

// Times `enqueue` (device time between two events) `reps` times after `warmup` untimed runs.
// `prepare` runs before each repetition, outside the timed region (e.g. restoring an input).
Timing TimeRegion(const Device& dev, int warmup, int reps, const Prepare& prepare,
                  const Enqueue& enqueue) {
  cudaEvent_t start, stop;
  CK(cudaEventCreate(&start));
  CK(cudaEventCreate(&stop));
  std::vector<double> dev_us, host_us, warm_host_us;
  double spin_us = 300.0;  // generous during warm-up; then sized from the enqueue times seen
  Timing t;
  for (int r = 0; r < warmup + reps; ++r) {
    if (r == warmup) {
      std::sort(warm_host_us.begin(), warm_host_us.end());
      const double worst = warm_host_us.empty() ? 100.0 : warm_host_us.back();
      spin_us = std::clamp(3.0 * worst + 20.0, 20.0, 20000.0);
    }
    if (prepare) prepare(r);
    CK(LaunchSpin(dev.stream, static_cast<uint64_t>(spin_us * 1000.0)));
    // Not a kernel: a PDL launch at the head of the region must not overlap the spin kernel,
    // as in the daemon, where the input copy precedes a plan's first kernel.
    CK(cudaMemsetAsync(dev.d_scratch, 0, 16, dev.stream));
    CK(cudaEventRecord(start, dev.stream));
    const auto h0 = std::chrono::steady_clock::now();
    CK(enqueue(r));
    const auto h1 = std::chrono::steady_clock::now();
    CK(cudaEventRecord(stop, dev.stream));
    CK(cudaStreamSynchronize(dev.stream));
    CK(cudaGetLastError());
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, start, stop));
    const double h = std::chrono::duration<double, std::micro>(h1 - h0).count();
    if (r >= warmup) {
      dev_us.push_back(ms * 1000.0);
      host_us.push_back(h);
      if (h > spin_us) ++t.late;
    } else if (r > 0) {  // the first run pays module loads and graph instantiation
      warm_host_us.push_back(h);
    }
  }
  CK(cudaEventDestroy(start));
  CK(cudaEventDestroy(stop));
  t.device_us = Summarize(dev_us);
  t.host_us = Summarize(host_us);
  t.spin_us = spin_us;
  t.reps = reps;
  return t;
}

// ---- output ----------------------------------------------------------------------------------

struct Row {
  std::string case_id, variant, staging, mode, l2;
  int kernels = 0;
  double median = 0, p10 = 0, p90 = 0;
  double extra = 0;  // GB/s where it applies
};
std::vector<Row> g_rows;

void Emit(const json& j) { std::cout << j.dump() << "\n" << std::flush; }

void EmitMeasure(const std::string& case_id, const std::string& variant,
                 const std::string& staging, const std::string& mode, const std::string& l2,
                 int kernels, int buffer_sets, const Timing& t, double bytes = 0) {
  json j = {{"kind", "measure"},
            {"case", case_id},
            {"variant", variant},
            {"staging", staging},
            {"mode", mode},
            {"l2", l2},
            {"kernels", kernels},
            {"buffer_sets", buffer_sets},
            {"reps", t.reps},
            {"median_us", t.device_us.median},
            {"p10_us", t.device_us.p10},
            {"p90_us", t.device_us.p90},
            {"min_us", t.device_us.min},
            {"host_enqueue_median_us", t.host_us.median},
            {"host_enqueue_p90_us", t.host_us.p90},
            {"spin_us", t.spin_us},
            {"late_reps", t.late}};
  double gbs = 0;
  if (bytes > 0) {
    gbs = bytes / (t.device_us.median * 1e-6) / 1e9;
    j["bytes"] = bytes;
    j["gb_per_s"] = gbs;
  }
  Emit(j);
  g_rows.push_back({case_id, variant, staging, mode, l2, kernels, t.device_us.median,
                    t.device_us.p10, t.device_us.p90, gbs});
}

json DescribeJson(const Plan& plan, const kc::LaunchConfig& config) {
  const engine::PlanDescription d = engine::DescribePlan(plan, config);
  json ks = json::array();
  for (const auto& k : d.kernels) {
    ks.push_back({{"name", k.name}, {"step", k.step}, {"ops", k.ops}, {"blocks", k.blocks},
                  {"threads", k.threads}});
  }
  return ks;
}

// ---- buffers ---------------------------------------------------------------------------------

// Device memory for one case: `sets` independent StepBuffers (rotated through to measure with
// a cold L2), each with its own random input, and a pristine copy of each input for plans that
// overwrite buffer 0 (two or more steps ping-pong through it). With `host_fill` the inputs
// come from the host and nothing here launches a kernel (for --isolated under a profiler).
class CaseBuffers {
 public:
  CaseBuffers(const Device& dev, int64_t elements, int64_t input_elements, int sets,
              bool keep_pristine, uint64_t seed, bool host_fill = false)
      : dev_(dev), input_elements_(input_elements), host_fill_(host_fill) {
    workspace_bytes_ = kc::RowOpsWorkspaceBytes();
    CK(cudaMalloc(&workspace_, workspace_bytes_));
    for (int s = 0; s < sets; ++s) {
      StepBuffers b;
      for (void*& p : b.d_buffers) CK(cudaMalloc(&p, elements * sizeof(float)));
      b.d_workspace = workspace_;  // ops on one stream may share one workspace
      b.workspace_bytes = workspace_bytes_;
      if (host_fill) {
        std::vector<float> h(input_elements);
        for (int64_t i = 0; i < input_elements; ++i) {
          h[i] = RandomValue(seed + s, static_cast<uint64_t>(i));
        }
        CK(cudaMemcpy(b.d_buffers[0], h.data(), input_elements * 4, cudaMemcpyHostToDevice));
        CK(cudaDeviceSynchronize());  // a pageable copy may return before its DMA completes
        host_inputs_.push_back(std::move(h));
      } else {
        CK(FillRandom(static_cast<float*>(b.d_buffers[0]), input_elements, seed + s,
                      dev.stream));
        // NaN everywhere else, so an unwritten output cannot pass a check.
        CK(cudaMemsetAsync(b.d_buffers[1], 0xFF, elements * sizeof(float), dev.stream));
      }
      sets_.push_back(b);
      if (keep_pristine && !host_fill) {
        void* p = nullptr;
        CK(cudaMalloc(&p, input_elements * sizeof(float)));
        CK(cudaMemcpyAsync(p, b.d_buffers[0], input_elements * sizeof(float),
                           cudaMemcpyDeviceToDevice, dev.stream));
        pristine_.push_back(p);
      }
      caches_.push_back(std::make_unique<engine::GraphCache>(32));
    }
    CK(cudaStreamSynchronize(dev.stream));
  }
  ~CaseBuffers() {
    caches_.clear();
    for (auto& b : sets_) {
      for (void* p : b.d_buffers) cudaFree(p);
    }
    for (void* p : pristine_) cudaFree(p);
    cudaFree(workspace_);
  }
  CaseBuffers(const CaseBuffers&) = delete;
  CaseBuffers& operator=(const CaseBuffers&) = delete;

  int sets() const { return static_cast<int>(sets_.size()); }
  const StepBuffers& set(int i) const { return sets_[i]; }
  engine::GraphCache& cache(int i) { return *caches_[i]; }
  bool has_pristine() const { return !pristine_.empty() || !host_inputs_.empty(); }
  // The input of set i as it was filled (device memory); null without a pristine copy.
  const float* pristine(int i) const {
    return pristine_.empty() ? nullptr : static_cast<const float*>(pristine_[i]);
  }

  // Puts set i's original input back into its buffer 0.
  void Restore(int i) {
    if (host_fill_) {
      CK(cudaMemcpy(sets_[i].d_buffers[0], host_inputs_[i].data(), input_elements_ * 4,
                    cudaMemcpyHostToDevice));
      CK(cudaDeviceSynchronize());
      return;
    }
    CK(cudaMemcpyAsync(sets_[i].d_buffers[0], pristine_[i], input_elements_ * sizeof(float),
                       cudaMemcpyDeviceToDevice, dev_.stream));
  }
  void Poison(int i, int buffer, int64_t elements) {
    CK(cudaMemsetAsync(sets_[i].d_buffers[buffer], 0xFF, elements * sizeof(float), dev_.stream));
  }

 private:
  const Device& dev_;
  int64_t input_elements_;
  bool host_fill_;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::vector<StepBuffers> sets_;
  std::vector<void*> pristine_;
  std::vector<std::vector<float>> host_inputs_;
  std::vector<std::unique_ptr<engine::GraphCache>> caches_;
};

// Enqueues `plan` on buffer set `set` in `mode`: LaunchPlan directly, or the daemon's
// GraphCache lookup (a hit after the first call) and a graph launch.
cudaError_t EnqueuePlan(const Plan& plan, CaseBuffers& bufs, int set, const kc::LaunchConfig& cfg,
                        Mode mode) {
  int kernels = 0;
  if (!ModeGraph(mode)) return engine::LaunchPlan(plan, bufs.set(set), cfg, &kernels);
  absl::StatusOr<engine::GraphCache::Lookup> g = bufs.cache(set).Get(
      engine::PlanTopologyKey(plan, cfg), engine::PlanParamsKey(plan), cfg.stream,
      [&](int* captured) { return engine::LaunchPlan(plan, bufs.set(set), cfg, captured); });
  if (!g.ok()) Die("GraphCache::Get: " + std::string(g.status().ToString()));
  return cudaGraphLaunch(g->exec, cfg.stream);
}

// Times `plan` in every staging and mode. `cold`: rotate through all buffer sets (each run
// finds its data outside L2); otherwise reuse set 0 (hot L2, as a replayed graph on one input
// sees it). Plans with two or more steps get their input restored before every repetition.
void MeasurePlan(const Device& dev, const Options& opt, const std::string& case_id,
                 const std::string& variant, const Plan& plan, CaseBuffers& bufs, bool cold,
                 double bytes = 0) {
  const bool restore_each = plan.steps.size() >= 2 && bufs.has_pristine();
  const int sets = cold ? bufs.sets() : 1;
  const int warmup = std::max(opt.warmup, sets);
  const int reps = cold ? std::max(opt.reps, 2 * sets) : opt.reps;
  for (const StagingChoice& st : kStagings) {
    for (Mode mode : kModes) {
      const kc::LaunchConfig cfg = ConfigFor(dev, st, ModePdl(mode));
      if (bufs.has_pristine()) {
        for (int s = 0; s < sets; ++s) bufs.Restore(s);
      }
      const int kernels = static_cast<int>(engine::DescribePlan(plan, cfg).kernels.size());
      const Timing t = TimeRegion(
          dev, warmup, reps,
          [&](int r) {
            if (restore_each) bufs.Restore(r % sets);
          },
          [&](int r) { return EnqueuePlan(plan, bufs, r % sets, cfg, mode); });
      EmitMeasure(case_id, variant, st.name, ModeName(mode), cold ? "cold" : "hot", kernels,
                  sets, t, bytes);
    }
  }
}

// ---- correctness -----------------------------------------------------------------------------

// Float64 host reference of a plan made of elementwise programs and row softmaxes.
std::vector<double> HostReference(const Plan& plan, const std::vector<float>& input) {
  std::vector<double> x(input.begin(), input.end());
  auto apply = [](const kernels::EwProgram& p, double v) {
    for (int i = 0; i < p.count; ++i) {
      const auto& in = p.instrs[i];
      switch (in.op) {
        case kernels::EwOpcode::kAffine: v = static_cast<double>(in.a) * v + in.b; break;
        case kernels::EwOpcode::kRelu: v = v < 0 ? 0 : v; break;
        case kernels::EwOpcode::kSqrt: v = std::sqrt(v); break;
        default: Die("HostReference: opcode not covered");
      }
    }
    return v;
  };
  for (const auto& step : plan.steps) {
    for (double& v : x) v = apply(step.program, v);
    if (step.kind == engine::StepKind::kRowSoftmax) {
      for (int64_t r = 0; r < step.rows; ++r) {
        double* row = x.data() + r * step.cols;
        double m = -INFINITY, s = 0;
        for (int64_t c = 0; c < step.cols; ++c) m = std::max(m, row[c]);
        for (int64_t c = 0; c < step.cols; ++c) s += std::exp(row[c] - m);
        for (int64_t c = 0; c < step.cols; ++c) row[c] = std::exp(row[c] - m) / s;
      }
    } else if (step.kind != engine::StepKind::kElementwise) {
      Die("HostReference: step kind not covered");
    }
  }
  return x;
}

// Runs `plan` once on set 0 (poisoned buffers, original input) with and without PDL in every
// staging, and compares with a float64 reference by ||out - ref|| / ||ref||: on the host for
// inputs up to 2^24 elements, on the device (elementwise-only plans) above that.
void CheckPlan(const Device& dev, const std::string& case_id, const std::string& variant,
               const Plan& plan, CaseBuffers& bufs) {
  const int out_buf = static_cast<int>(plan.steps.size() % 2);
  const int64_t n_in = plan.input_elements, n_out = plan.output_elements;
  const bool on_host = n_in <= (int64_t{1} << 24);
  if (!on_host && out_buf == 0 && bufs.pristine(0) == nullptr) {
    Die("CheckPlan: the plan overwrites its input and there is no pristine copy");
  }
  // Every run starts from the same input (restored when the plan overwrites it), so one
  // reference serves them all.
  std::vector<double> ref;
  if (on_host) {
    std::vector<float> in_host(n_in);
    if (bufs.has_pristine()) bufs.Restore(0);
    CK(cudaMemcpyAsync(in_host.data(), bufs.set(0).d_buffers[0], n_in * 4,
                       cudaMemcpyDeviceToHost, dev.stream));
    CK(cudaStreamSynchronize(dev.stream));
    ref = HostReference(plan, in_host);
  }
  for (const StagingChoice& st : kStagings) {
    for (bool pdl : {false, true}) {
      const kc::LaunchConfig cfg = ConfigFor(dev, st, pdl);
      if (bufs.has_pristine()) bufs.Restore(0);
      bufs.Poison(0, 1, BufferElements(plan));
      int kernels = 0;
      CK(engine::LaunchPlan(plan, bufs.set(0), cfg, &kernels));
      CK(cudaStreamSynchronize(dev.stream));
      CK(cudaGetLastError());
      const float* d_out = static_cast<const float*>(bufs.set(0).d_buffers[out_buf]);
      double err2 = 0, ref2 = 0;
      uint64_t bad = 0;
      if (on_host) {
        std::vector<float> out(n_out);
        CK(cudaMemcpy(out.data(), d_out, n_out * 4, cudaMemcpyDeviceToHost));
        for (int64_t i = 0; i < n_out; ++i) {
          if (std::isfinite(ref[i]) && !std::isfinite(out[i])) {
            ++bad;
            continue;
          }
          err2 += (out[i] - ref[i]) * (out[i] - ref[i]);
          ref2 += ref[i] * ref[i];
        }
      } else {
        // Elementwise-only plan: the steps' programs composed are the function computed.
        kernels::EwProgram all;
        for (const auto& s : plan.steps) {
          if (s.kind != engine::StepKind::kElementwise) Die("CheckPlan: large row plan");
          for (int i = 0; i < s.program.count; ++i) {
            if (!all.Append(s.program.instrs[i])) Die("CheckPlan: program too long");
          }
        }
        const float* d_in = bufs.pristine(0) != nullptr
                                ? bufs.pristine(0)
                                : static_cast<const float*>(bufs.set(0).d_buffers[0]);
        double* d_acc = nullptr;
        CK(cudaMalloc(reinterpret_cast<void**>(&d_acc), 3 * sizeof(double)));
        CK(cudaMemsetAsync(d_acc, 0, 3 * sizeof(double), dev.stream));
        CK(CheckElementwise(d_in, d_out, n_out, all, d_acc, dev.stream));
        double acc[3];
        CK(cudaMemcpyAsync(acc, d_acc, sizeof(acc), cudaMemcpyDeviceToHost, dev.stream));
        CK(cudaStreamSynchronize(dev.stream));
        CK(cudaFree(d_acc));
        err2 = acc[0];
        ref2 = acc[1];
        std::memcpy(&bad, &acc[2], sizeof(bad));
      }
      const double rel = ref2 > 0 ? std::sqrt(err2 / ref2) : INFINITY;
      const bool ok = bad == 0 && rel < 1e-4;
      Emit({{"kind", "check"},
            {"case", case_id},
            {"variant", variant},
            {"staging", st.name},
            {"pdl", pdl},
            {"kernels", kernels},
            {"rel_l2_error", rel},
            {"nonfinite_outputs", bad},
            {"ok", ok}});
      if (!ok) Die("check failed: case " + case_id + " " + variant + " " + st.name);
    }
  }
  if (bufs.has_pristine()) bufs.Restore(0);
  CK(cudaStreamSynchronize(dev.stream));
}

// ---- cases -----------------------------------------------------------------------------------

std::vector<OpSpec> SoftmaxPipelineOps() {
  return {Affine(2, 1), Simple(OpKind::kRelu), Simple(OpKind::kSqrt), Simple(OpKind::kSoftmax)};
}

// Enough buffer sets that the rotation's footprint is three times the L2.
int ColdSets(const Device& dev, int64_t bytes_per_set) {
  const int64_t l2 = std::max<int64_t>(dev.prop.l2CacheSize, 1 << 20);
  return static_cast<int>(std::clamp<int64_t>((3 * l2 + bytes_per_set - 1) / bytes_per_set, 2, 64));
}

void RunSoftmaxPipelineCase(const Device& dev, const Options& opt, const std::string& id,
                            const std::vector<int64_t>& shape) {
  const Plan plan = MakePlan(shape, SoftmaxPipelineOps());
  const int64_t bytes_per_set = 2 * BufferElements(plan) * 4;
  CaseBuffers bufs(dev, BufferElements(plan), plan.input_elements,
                   ColdSets(dev, bytes_per_set), false, opt.seed + 1000 * id[0]);
  for (const StagingChoice& st : kStagings) {
    Emit({{"kind", "plan"}, {"case", id}, {"variant", "planner"}, {"staging", st.name},
          {"steps", plan.steps.size()}, {"kernels", DescribeJson(plan, ConfigFor(dev, st, true))}});
  }
  CheckPlan(dev, id, "planner", plan, bufs);
  MeasurePlan(dev, opt, id, "planner", plan, bufs, /*cold=*/false);
  MeasurePlan(dev, opt, id, "planner", plan, bufs, /*cold=*/true);
}

// Chains of empty kernels: the cost of a kernel boundary with nothing to do.
void MeasureEmptyChain(const Device& dev, const Options& opt, const std::string& variant,
                       const std::string& staging, const std::vector<std::pair<dim3, dim3>>& geo) {
  engine::GraphCache cache(8);
  for (Mode mode : kModes) {
    const bool pdl = ModePdl(mode);
    auto enqueue_all = [&]() -> cudaError_t {
      for (const auto& [grid, block] : geo) {
        if (cudaError_t e = LaunchEmpty(dev.stream, grid, block, pdl); e != cudaSuccess) return e;
      }
      return cudaSuccess;
    };
    const std::string topo = variant + "/" + staging + "/" + (pdl ? "pdl" : "stream");
    const Timing t = TimeRegion(dev, opt.warmup, opt.reps, nullptr, [&](int) -> cudaError_t {
      if (!ModeGraph(mode)) return enqueue_all();
      absl::StatusOr<engine::GraphCache::Lookup> g =
          cache.Get(topo, "", dev.stream, [&](int* /*kernels*/) { return enqueue_all(); });
      if (!g.ok()) Die("GraphCache::Get: " + std::string(g.status().ToString()));
      return cudaGraphLaunch(g->exec, dev.stream);
    });
    EmitMeasure("C", variant, staging, ModeName(mode), "hot", static_cast<int>(geo.size()), 1, t);
  }
}

// The plan's kernels in launch order as single-kernel graphs (from a capture of LaunchPlan
// without PDL), so each can be run or timed alone with exactly its own arguments.
struct IsolatedKernel {
  std::string name;
  cudaGraphExec_t exec = nullptr;
};

std::vector<IsolatedKernel> IsolateKernels(const Device& dev, const Plan& plan,
                                           const CaseBuffers& bufs, const StagingChoice& st) {
  const kc::LaunchConfig cfg = ConfigFor(dev, st, /*pdl=*/false);
  const engine::PlanDescription desc = engine::DescribePlan(plan, cfg);
  cudaGraph_t graph = nullptr;
  CK(cudaStreamBeginCapture(dev.stream, cudaStreamCaptureModeThreadLocal));
  int kernels = 0;
  const cudaError_t launched = engine::LaunchPlan(plan, bufs.set(0), cfg, &kernels);
  CK(cudaStreamEndCapture(dev.stream, &graph));
  CK(launched);

  size_t n = 0;
  CK(cudaGraphGetNodes(graph, nullptr, &n));
  std::vector<cudaGraphNode_t> nodes(n);
  CK(cudaGraphGetNodes(graph, nodes.data(), &n));
  // Order the chain: each node's single predecessor comes before it.
  std::map<cudaGraphNode_t, cudaGraphNode_t> pred;
  for (cudaGraphNode_t node : nodes) {
    size_t nd = 0;
#if CUDART_VERSION >= 13000
    CK(cudaGraphNodeGetDependencies(node, nullptr, nullptr, &nd));
#else
    CK(cudaGraphNodeGetDependencies(node, nullptr, &nd));
#endif
    if (nd > 1) Die("isolated: the plan's graph is not a chain");
    std::vector<cudaGraphNode_t> deps(nd);
    if (nd == 1) {
#if CUDART_VERSION >= 13000
      CK(cudaGraphNodeGetDependencies(node, deps.data(), nullptr, &nd));
#else
      CK(cudaGraphNodeGetDependencies(node, deps.data(), &nd));
#endif
    }
    pred[node] = nd == 1 ? deps[0] : nullptr;
  }
  std::vector<cudaGraphNode_t> order;
  cudaGraphNode_t prev = nullptr;
  for (size_t i = 0; i < n; ++i) {
    cudaGraphNode_t next = nullptr;
    for (auto& [node, p] : pred) {
      if (p == prev && std::find(order.begin(), order.end(), node) == order.end()) next = node;
    }
    if (next == nullptr) Die("isolated: broken chain");
    order.push_back(next);
    prev = next;
  }
  if (order.size() != desc.kernels.size()) {
    Die("isolated: " + std::to_string(order.size()) + " graph nodes but DescribePlan lists " +
        std::to_string(desc.kernels.size()) + " kernels");
  }
  std::vector<IsolatedKernel> out;
  for (size_t k = 0; k < order.size(); ++k) {
    cudaGraphNodeType type;
    CK(cudaGraphNodeGetType(order[k], &type));
    if (type != cudaGraphNodeTypeKernel) Die("isolated: a plan node is not a kernel");
    cudaGraph_t clone = nullptr;
    CK(cudaGraphClone(&clone, graph));
    std::vector<cudaGraphNode_t> others;  // looked up before the clone changes
    for (size_t j = 0; j < order.size(); ++j) {
      if (j == k) continue;
      cudaGraphNode_t c = nullptr;
      CK(cudaGraphNodeFindInClone(&c, order[j], clone));
      others.push_back(c);
    }
    for (cudaGraphNode_t c : others) CK(cudaGraphDestroyNode(c));
    IsolatedKernel ik;
    ik.name = desc.kernels[k].name;
    CK(cudaGraphInstantiate(&ik.exec, clone, 0));
    CK(cudaGraphDestroy(clone));
    out.push_back(ik);
  }
  CK(cudaGraphDestroy(graph));
  return out;
}

Plan ChainPlan() {
  std::vector<OpSpec> ops(16, Simple(OpKind::kSoftmax));
  return MakePlan({1024, 1024}, ops);
}

void RunChainCase(const Device& dev, const Options& opt) {
  const Plan plan = ChainPlan();
  CaseBuffers bufs(dev, BufferElements(plan), plan.input_elements, 1, true, opt.seed + 3000);
  for (const StagingChoice& st : kStagings) {
    Emit({{"kind", "plan"}, {"case", "C"}, {"variant", "planner"}, {"staging", st.name},
          {"steps", plan.steps.size()}, {"kernels", DescribeJson(plan, ConfigFor(dev, st, true))}});
  }
  CheckPlan(dev, "C", "planner", plan, bufs);
  MeasurePlan(dev, opt, "C", "planner", plan, bufs, /*cold=*/false);

  for (const StagingChoice& st : kStagings) {
    // Empty chain with the real chain's launch geometry (the floor), and with one warp each.
    std::vector<std::pair<dim3, dim3>> geo, tiny;
    for (const auto& k : engine::DescribePlan(plan, ConfigFor(dev, st, true)).kernels) {
      geo.push_back({dim3(static_cast<unsigned>(k.blocks)), dim3(static_cast<unsigned>(k.threads))});
      tiny.push_back({dim3(1), dim3(32)});
    }
    MeasureEmptyChain(dev, opt, "empty", st.name, geo);
    if (st.staging == kc::Staging::kPipeline) MeasureEmptyChain(dev, opt, "empty-1x32", "-", tiny);

    // Fallback for Nsight Compute: every chain kernel timed alone with events (each includes a
    // single-node graph launch, so it reads a little high).
    bufs.Restore(0);
    std::vector<IsolatedKernel> ks = IsolateKernels(dev, plan, bufs, st);
    for (size_t k = 0; k < ks.size(); ++k) {
      const Timing t = TimeRegion(dev, 3, opt.reps, nullptr,
                                  [&](int) { return cudaGraphLaunch(ks[k].exec, dev.stream); });
      Emit({{"kind", "isolated_events"}, {"case", "C"}, {"staging", st.name}, {"index", k},
            {"name", ks[k].name}, {"median_us", t.device_us.median}, {"p10_us", t.device_us.p10},
            {"p90_us", t.device_us.p90}});
      CK(cudaGraphExecDestroy(ks[k].exec));
    }
  }
}

// Case D's ops, chosen so that no value is negative at the sqrt (no NaN to excuse in checks).
std::vector<OpSpec> ElementwiseOps() {
  return {Affine(1.5, 0.5), Simple(OpKind::kRelu), Affine(0.9, 0.1),
          Simple(OpKind::kSqrt), Affine(2, 0),     Simple(OpKind::kRelu)};
}

void RunElementwiseCase(const Device& dev, const Options& opt) {
  const int64_t n = int64_t{1} << 28;
  const std::vector<OpSpec> ops = ElementwiseOps();
  const Plan fused = MakePlan({n}, ops);
  const Plan six = MakeUnfusedPlan({n}, ops);
  if (fused.steps.size() != 1) Die("case D: the planner did not fuse the six ops into one step");
  if (six.steps.size() != 6) Die("case D: unfused plan has " + std::to_string(six.steps.size()));
  CaseBuffers bufs(dev, n, n, 1, true, opt.seed + 4000);
  for (const StagingChoice& st : kStagings) {
    Emit({{"kind", "plan"}, {"case", "D"}, {"variant", "fused"}, {"staging", st.name},
          {"steps", fused.steps.size()}, {"kernels", DescribeJson(fused, ConfigFor(dev, st, true))}});
  }
  CheckPlan(dev, "D", "fused", fused, bufs);
  CheckPlan(dev, "D", "six-kernels", six, bufs);
  const double bytes = 2.0 * n * 4;  // read once, written once
  MeasurePlan(dev, opt, "D", "fused", fused, bufs, /*cold=*/true, bytes);
  MeasurePlan(dev, opt, "D", "six-kernels", six, bufs, /*cold=*/true, bytes);

  // Copy peer, same bytes, same run.
  const Timing t = TimeRegion(dev, opt.warmup, opt.reps, nullptr, [&](int) {
    return cudaMemcpyAsync(bufs.set(0).d_buffers[1], bufs.set(0).d_buffers[0], n * 4,
                           cudaMemcpyDeviceToDevice, dev.stream);
  });
  EmitMeasure("D", "cudaMemcpy-d2d", "-", "stream", "cold", 0, 1, t, bytes);
}

// ---- --isolated ------------------------------------------------------------------------------

// Case C's kernels, each launched once with a device synchronization between, and no other
// kernel in the process (inputs are copied from the host), so that the n-th kernel Nsight
// Compute sees is the n-th entry of the list written to --isolated-json.
void RunIsolated(const Device& dev, const Options& opt) {
  const Plan plan = ChainPlan();
  CaseBuffers bufs(dev, BufferElements(plan), plan.input_elements, 1, true, opt.seed + 3000,
                   /*host_fill=*/true);
  json list = json::array();
  for (const StagingChoice& st : kStagings) {
    bufs.Restore(0);
    std::vector<IsolatedKernel> ks = IsolateKernels(dev, plan, bufs, st);
    for (size_t k = 0; k < ks.size(); ++k) {
      CK(cudaGraphLaunch(ks[k].exec, dev.stream));
      CK(cudaDeviceSynchronize());
      list.push_back({{"case", "C"}, {"staging", st.name}, {"index", k}, {"name", ks[k].name}});
      CK(cudaGraphExecDestroy(ks[k].exec));
    }
  }
  std::ofstream f(opt.isolated_json);
  f << json{{"kind", "isolated_order"}, {"kernels", list}}.dump() << "\n";
  if (!f) Die("cannot write " + opt.isolated_json);
  std::printf("planner_bench --isolated: %zu kernels launched, order in %s\n", list.size(),
              opt.isolated_json.c_str());
}

// ---- --describe ------------------------------------------------------------------------------

// Every case's plans as DescribePlan gives them for a 132-multiprocessor device. Makes no CUDA
// call, so it runs anywhere the benchmark builds.
void RunDescribe() {
  Device dev;
  dev.prop.multiProcessorCount = 132;
  dev.stream = reinterpret_cast<cudaStream_t>(1);  // never used: Describe* ignore the stream
  const std::vector<OpSpec> d_ops = ElementwiseOps();
  const std::vector<std::pair<std::string, Plan>> plans = {
      {"A", MakePlan({int64_t{1} << 20}, SoftmaxPipelineOps())},
      {"B", MakePlan({1024, 1024}, SoftmaxPipelineOps())},
      {"C", ChainPlan()},
      {"D fused", MakePlan({int64_t{1} << 28}, d_ops)},
      {"D six-kernels", MakeUnfusedPlan({int64_t{1} << 28}, d_ops)}};
  for (const auto& [name, plan] : plans) {
    for (const StagingChoice& st : kStagings) {
      Emit({{"kind", "plan"}, {"case", name}, {"staging", st.name}, {"steps", plan.steps.size()},
            {"buffer_elements", BufferElements(plan)},
            {"kernels", DescribeJson(plan, ConfigFor(dev, st, true))}});
    }
  }
}

// ---- table -----------------------------------------------------------------------------------

void PrintTable() {
  std::printf("\n%-4s %-15s %-10s %-10s %-5s %4s %12s %10s %10s %10s %9s\n", "case", "variant",
              "staging", "mode", "L2", "kern", "median us", "p10", "p90", "us/kernel", "GB/s");
  for (const Row& r : g_rows) {
    char gbs[32] = "";
    if (r.extra > 0) std::snprintf(gbs, sizeof(gbs), "%9.0f", r.extra);
    std::printf("%-4s %-15s %-10s %-10s %-5s %4d %12.2f %10.2f %10.2f %10.3f %9s\n",
                r.case_id.c_str(), r.variant.c_str(), r.staging.c_str(), r.mode.c_str(),
                r.l2.c_str(), r.kernels, r.median, r.p10, r.p90,
                r.kernels > 0 ? r.median / r.kernels : 0.0, gbs);
  }
}

Device OpenDevice() {
  Device dev;
  CK(cudaSetDevice(0));
  CK(cudaGetDeviceProperties(&dev.prop, 0));
  CK(cudaDriverGetVersion(&dev.driver));
  CK(cudaRuntimeGetVersion(&dev.runtime));
  CK(cudaStreamCreateWithFlags(&dev.stream, cudaStreamNonBlocking));
  CK(cudaMalloc(&dev.d_scratch, 16));
  return dev;
}

}  // namespace
}  // namespace gpupipe::bench

int main(int argc, char** argv) {
  using namespace gpupipe::bench;
  const Options opt = ParseOptions(argc, argv);
  if (opt.describe) {
    RunDescribe();
    return 0;
  }
  Device dev = OpenDevice();
  if (opt.isolated) {
    RunIsolated(dev, opt);
    return 0;
  }
  Emit({{"kind", "device"},
        {"name", dev.prop.name},
        {"multiprocessors", dev.prop.multiProcessorCount},
        {"l2_bytes", dev.prop.l2CacheSize},
        {"memory_bytes", dev.prop.totalGlobalMem},
        {"cc", std::to_string(dev.prop.major) + "." + std::to_string(dev.prop.minor)},
        {"driver_api", dev.driver},
        {"runtime_api", dev.runtime},
        {"seed", opt.seed},
        {"reps", opt.reps},
        {"warmup", opt.warmup}});
  const auto t0 = std::chrono::steady_clock::now();
  for (char c : opt.cases) {
    switch (c) {
      case 'A': RunSoftmaxPipelineCase(dev, opt, "A", {int64_t{1} << 20}); break;
      case 'B': RunSoftmaxPipelineCase(dev, opt, "B", {1024, 1024}); break;
      case 'C': RunChainCase(dev, opt); break;
      case 'D': RunElementwiseCase(dev, opt); break;
      default: Die(std::string("unknown case ") + c);
    }
  }
  Emit({{"kind", "done"},
        {"wall_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()}});
  PrintTable();
  CK(cudaStreamDestroy(dev.stream));
  return 0;
}
