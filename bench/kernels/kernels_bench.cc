// kernels_bench: device time of gpupipe's kernels, one op at a time, against CUB and
// cudaMemcpy in the same process (PyTorch runs in torch_peers.py, in the same run.sh call).
//
// Every case works on the same 2^28 float32 input (1 GiB, far over the 60 MiB L2), either as
// one row of 2^28 or as 16384 x 16384. Each measurement: `--warmup` runs, then `--reps` timed
// runs; before each run a read of a 256 MiB buffer evicts the op's data (and any dirty lines)
// from L2 and a 20 us spin lets the host enqueue the whole region first; CUDA events around
// the op give its device time; the median is reported (p10, p90 and min too).
//
// Every staging strategy (StagingVariants() in gpupipe_ops.cu) is measured side by side,
// strategies with stages at each of kStageSweep. Every run's output is checked before it is
// timed: against CUB's output where a CUB peer exists, otherwise against the first staging
// variant's output, whose samples are written to --samples for torch_peers.py to compare with
// PyTorch on the same input (the input generator is reproducible there).
//
// Output: one JSON object per line on stdout (run.sh keeps it as kernels_bench.jsonl) and a
// human table on stderr. "winner" lines name the fastest strategy per op / dtype / size class,
// the data for the `auto` staging table.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/kernels/bench_device.h"
#include "bench/kernels/cub_peers.h"
#include "bench/kernels/gpupipe_ops.h"
#include "nlohmann/json.hpp"

namespace gpupipe::bench {
namespace {

namespace kc = kernels::cuda;
using json = nlohmann::json;

constexpr int64_t kElements = int64_t{1} << 28;
constexpr int64_t kSquare = int64_t{1} << 14;
constexpr size_t kFlushBytes = size_t{256} << 20;
constexpr size_t kWorkspaceBytes = size_t{512} << 20;  // generous: ops take what they need
constexpr uint64_t kSpinNs = 20000;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "kernels_bench: %s\n", what.c_str());
  std::exit(1);
}

void Check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    Die(std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
  }
}
#define CK(call) Check((call), #call)

void Emit(const json& j) {
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
}

// ---- options ---------------------------------------------------------------------------------

struct Options {
  int warmup = 5;
  int reps = 40;
  uint32_t seed = 0;
  std::string samples_dir;  // empty: no samples written
  std::string cases;        // comma-separated case ids; empty: all
};

Options ParseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Die("missing value after " + a);
      return argv[++i];
    };
    if (a == "--warmup") {
      o.warmup = std::stoi(value());
    } else if (a == "--reps") {
      o.reps = std::stoi(value());
    } else if (a == "--seed") {
      o.seed = static_cast<uint32_t>(std::stoul(value()));
    } else if (a == "--samples") {
      o.samples_dir = value();
    } else if (a == "--cases" || a == "--only") {
      o.cases = value();
    } else if (a == "-h" || a == "--help") {
      std::printf("usage: kernels_bench [--reps N] [--warmup N] [--seed S] [--samples DIR] "
                  "[--cases id,id,...]\n"
                  "  --cases (or --only) runs only the listed case ids, e.g. softmax,argmax\n");
      std::exit(0);
    } else {
      Die("unknown argument " + a);
    }
  }
  if (o.reps < 10) Die("--reps must be at least 10");
  if (o.warmup < 1) Die("--warmup must be at least 1");
  if (o.seed == 0) {
    o.seed = static_cast<uint32_t>(
        std::chrono::system_clock::now().time_since_epoch().count() & 0x7fffffff);
    if (o.seed == 0) o.seed = 1;
  }
  return o;
}

// ---- cases -----------------------------------------------------------------------------------

struct Range {
  int64_t begin, count;  // output elements
};

struct Case {
  std::string id;
  std::string label;
  KernelOpArgs args;
  std::optional<CubAlgo> cub;
  double bytes;               // read + written once each
  double atol = 0, rtol = 0;  // check tolerance (float outputs)
  std::vector<Range> samples; // output ranges written for torch_peers.py
};

// np.convolve taps: exact multiples of 1/64 so that products with the quantized input and
// their sums are exact in float32 (and in TF32). torch_peers.py uses the same formula.
std::vector<float> ConvolveTaps(int count) {
  std::vector<float> t(count);
  for (int j = 0; j < count; ++j) t[j] = static_cast<float>((j * 37) % 63 - 31) / 64.0f;
  return t;
}

std::vector<Range> RowSamples(int64_t rows, int64_t width) {
  return {{0, width}, {width, width}, {(rows / 2) * width, width}, {(rows - 1) * width, width}};
}

std::vector<Range> EdgeSamples(int64_t n) {
  const int64_t w = 65536;
  return {{0, w}, {n / 2 - w / 2, w}, {n - w, w}};
}

std::vector<Case> MakeCases() {
  const double gib = static_cast<double>(kElements) * 4;
  std::vector<Case> c;
  auto args = [](KernelOp op, int64_t rows, int64_t cols) {
    KernelOpArgs a;
    a.op = op;
    a.rows = rows;
    a.cols = cols;
    return a;
  };
  const int64_t R = kSquare, C = kSquare;
  // Inputs are multiples of 1/256 with |partial sums| < 2^16: sums and scans are exact.
  c.push_back({"affine", "affine 2x+1, 2^28", args(KernelOp::kAffine, 1, kElements),
               CubAlgo::kTransformAffine, 2 * gib, 0, 0, EdgeSamples(kElements)});
  c.push_back({"sum-row", "sum, one row of 2^28", args(KernelOp::kSum, 1, kElements),
               CubAlgo::kReduceSum, gib, 0, 1e-6, {{0, 1}}});
  c.push_back({"sum-rows", "sum, 16384 x 16384", args(KernelOp::kSum, R, C),
               CubAlgo::kSegmentedSum, gib + R * 4, 0, 1e-6, {{0, R}}});
  c.push_back({"softmax", "softmax, 16384 x 16384", args(KernelOp::kSoftmax, R, C), std::nullopt,
               2 * gib, 1e-9, 2e-5, RowSamples(R, C)});
  c.push_back({"cumsum", "cumsum, one row of 2^28", args(KernelOp::kCumsum, 1, kElements),
               CubAlgo::kInclusiveSum, 2 * gib, 0, 1e-6, EdgeSamples(kElements)});
  KernelOpArgs hist = args(KernelOp::kHistogram, 1, kElements);
  hist.bins = 256;
  hist.lo = 0;
  hist.hi = 1;
  c.push_back({"histogram", "histogram(256, 0, 1), 2^28", hist, CubAlgo::kHistogramEven,
               gib + 256 * 8, 0, 0, {{0, 256}}});
  KernelOpArgs conv = args(KernelOp::kConvolve, 1, kElements);
  conv.taps = ConvolveTaps(63);
  c.push_back({"convolve", "convolve, 63 taps, same, 2^28", conv, std::nullopt, 2 * gib, 0, 0,
               EdgeSamples(kElements)});
  KernelOpArgs topk = args(KernelOp::kTopk, R, C);
  topk.k = 16;
  c.push_back({"topk", "topk(16), 16384 x 16384", topk, std::nullopt, gib + R * 16 * 4, 0, 0,
               {{0, R * 16}}});
  c.push_back({"argmax", "argmax, 16384 x 16384", args(KernelOp::kArgmax, R, C), std::nullopt,
               gib + R * 8, 0, 0, {{0, R}}});
  c.push_back({"standardize", "standardize, 16384 x 16384", args(KernelOp::kStandardize, R, C),
               std::nullopt, 2 * gib, 1e-5, 1e-5, RowSamples(R, C)});
  c.push_back({"l2normalize", "l2normalize, 16384 x 16384", args(KernelOp::kL2Normalize, R, C),
               std::nullopt, 2 * gib, 1e-8, 1e-5, RowSamples(R, C)});
  return c;
}

std::string Log2Label(int64_t v) {
  int e = 0;
  while ((int64_t{1} << e) < v) ++e;
  return (int64_t{1} << e) == v ? "2^" + std::to_string(e) : std::to_string(v);
}

// The size class the `auto` staging table keys on: rows held in registers, long rows split
// over blocks, or many rows each longer than a block holds.
std::string SizeClass(const KernelOpArgs& a) {
  if (a.op == KernelOp::kAffine) return "elementwise";
  if (a.cols <= 8192) return "short-rows";
  if (a.rows < 132) return "few-long-rows";
  return "many-long-rows";
}

// ---- timing ----------------------------------------------------------------------------------

struct Bench {
  Options opt;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  float* d_in = nullptr;
  void* d_out = nullptr;
  void* d_ref = nullptr;
  void* d_flush = nullptr;
  void* d_ws = nullptr;
  void* d_acc = nullptr;
  double copy_gbs = 0;
  json samples_index;
};

struct Stats {
  double median_us, p10_us, p90_us, min_us;
  int reps;
};

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * (v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - lo);
}

Stats Time(Bench& b, const std::function<cudaError_t()>& fn) {
  std::vector<double> us;
  for (int r = 0; r < b.opt.warmup + b.opt.reps; ++r) {
    CK(FlushL2(b.d_flush, kFlushBytes, b.d_acc, b.stream));
    CK(LaunchSpin(b.stream, kSpinNs));
    CK(cudaEventRecord(b.start, b.stream));
    CK(fn());
    CK(cudaEventRecord(b.stop, b.stream));
    CK(cudaEventSynchronize(b.stop));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, b.start, b.stop));
    if (r >= b.opt.warmup) us.push_back(ms * 1000.0);
  }
  return {Quantile(us, 0.5), Quantile(us, 0.1), Quantile(us, 0.9),
          *std::min_element(us.begin(), us.end()), b.opt.reps};
}

json StatsJson(const Stats& s, double bytes, double copy_gbs) {
  const double gbs = bytes / (s.median_us * 1e3);
  json j = {{"median_us", s.median_us}, {"p10_us", s.p10_us}, {"p90_us", s.p90_us},
            {"min_us", s.min_us},       {"reps", s.reps},     {"gb_per_s", gbs}};
  if (copy_gbs > 0) j["pct_of_copy"] = 100.0 * gbs / copy_gbs;
  return j;
}

// ---- checks and samples ----------------------------------------------------------------------

json CheckJson(const CompareResult& r, const std::string& against) {
  return {{"ok", r.ok()},
          {"against", against},
          {"bad", r.bad},
          {"max_abs_err", r.max_abs_err},
          {"max_abs_ref", r.max_abs_ref}};
}

CompareResult CheckOutput(Bench& b, const Case& c, int64_t out_n) {
  CompareResult r;
  const bool is_int = KernelOpOutputElementBytes(c.args.op) == 8;
  if (is_int) {
    const bool ref_int32 = c.cub.has_value();  // CUB's histogram counts are int32
    CK(CompareInt(static_cast<const int64_t*>(b.d_out), b.d_ref, ref_int32, out_n, b.d_acc,
                  b.stream, &r));
  } else {
    CK(CompareFloat(static_cast<const float*>(b.d_out), static_cast<const float*>(b.d_ref), out_n,
                    c.atol, c.rtol, b.d_acc, b.stream, &r));
  }
  return r;
}

void WriteSamples(Bench& b, const Case& c, const std::string& variant) {
  if (b.opt.samples_dir.empty()) return;
  const int elem = KernelOpOutputElementBytes(c.args.op);
  std::vector<char> host;
  json ranges = json::array();
  for (const Range& r : c.samples) {
    const size_t off = host.size();
    host.resize(off + r.count * elem);
    CK(cudaMemcpy(host.data() + off, static_cast<char*>(b.d_out) + r.begin * elem,
                  r.count * elem, cudaMemcpyDeviceToHost));
    ranges.push_back({r.begin, r.count});
  }
  const std::string file = c.id + ".bin";
  std::ofstream f(b.opt.samples_dir + "/" + file, std::ios::binary);
  f.write(host.data(), static_cast<std::streamsize>(host.size()));
  if (!f) Die("cannot write " + b.opt.samples_dir + "/" + file);
  b.samples_index["cases"][c.id] = {{"file", file},
                                    {"dtype", elem == 8 ? "int64" : "float32"},
                                    {"ranges", ranges},
                                    {"variant", variant},
                                    {"atol", c.atol},
                                    {"rtol", c.rtol}};
  std::ofstream idx(b.opt.samples_dir + "/samples.json");
  idx << b.samples_index.dump(1) << "\n";
}

// ---- one case --------------------------------------------------------------------------------

void RunCase(Bench& b, const Case& c, int multiprocessors) {
  const KernelOpArgs& a = c.args;
  if (!KernelOpBuilt(a.op)) {
    Emit({{"kind", "not_built"}, {"case", c.id}, {"label", c.label}});
    std::fprintf(stderr, "%-34s not built (kernel header missing in this checkout)\n",
                 c.label.c_str());
    return;
  }
  const int64_t out_n = KernelOpOutputElements(a);
  const size_t out_bytes = static_cast<size_t>(out_n) * KernelOpOutputElementBytes(a.op);
  std::string reference = "first-variant";

  if (c.cub) {
    cudaError_t err;
    std::unique_ptr<CubPeer> peer =
        CubPeer::Create(*c.cub, a.rows, a.cols, a.bins, static_cast<float>(a.lo),
                        static_cast<float>(a.hi), b.stream, &err);
    Check(err, "CubPeer::Create");
    CK(cudaMemsetAsync(b.d_ref, 0, out_bytes, b.stream));  // histogram counts start at 0
    CK(peer->Run(b.d_in, b.d_ref));
    CK(cudaStreamSynchronize(b.stream));
    const Stats s = Time(b, [&] { return peer->Run(b.d_in, b.d_ref); });
    json j = {{"kind", "peer"}, {"case", c.id}, {"label", c.label}, {"peer", peer->name()}};
    j.update(StatsJson(s, c.bytes, b.copy_gbs));
    Emit(j);
    std::fprintf(stderr, "%-34s %-36s %10.1f us %7.0f GB/s\n", c.label.c_str(), peer->name(),
                 s.median_us, c.bytes / (s.median_us * 1e3));
    reference = peer->name();
  }

  bool have_reference = c.cub.has_value();
  json best;
  for (const StagingVariant& v : StagingVariants()) {
    std::vector<int> stages_list;
    if (v.uses_stages) {
      stages_list.assign(std::begin(kStageSweep), std::end(kStageSweep));
    } else {
      stages_list = {kc::LaunchConfig{}.stages};
    }
    json best_of_variant;
    for (int stages : stages_list) {
      kc::LaunchConfig cfg;
      cfg.stream = b.stream;
      cfg.staging = v.staging;
      cfg.stages = stages;
      cfg.pdl = true;
      cfg.multiprocessors = multiprocessors;
      const std::string vname =
          v.uses_stages ? std::string(v.name) + std::to_string(stages) : std::string(v.name);
      // Poison the output (NaN floats, -1 counts) so unwritten results fail the check.
      CK(cudaMemsetAsync(b.d_out, 0xFF, out_bytes, b.stream));
      int kernels = 0;
      cudaError_t err = RunKernelOp(a, b.d_in, b.d_out, b.d_ws, kWorkspaceBytes, cfg, &kernels);
      if (err == cudaSuccess) err = cudaStreamSynchronize(b.stream);
      if (err != cudaSuccess) {
        Emit({{"kind", "error"}, {"case", c.id}, {"staging", v.name}, {"stages", stages},
              {"error", cudaGetErrorName(err)}});
        std::fprintf(stderr, "%-34s %-36s error %s\n", c.label.c_str(), vname.c_str(),
                     cudaGetErrorName(err));
        if (err != cudaErrorInvalidValue && err != cudaErrorNotSupported) Die("device fault");
        continue;
      }
      json check;
      if (!have_reference) {
        // The first variant becomes the reference of the others; torch_peers.py checks it.
        CK(cudaMemcpyAsync(b.d_ref, b.d_out, out_bytes, cudaMemcpyDeviceToDevice, b.stream));
        CK(cudaStreamSynchronize(b.stream));
        WriteSamples(b, c, vname);
        have_reference = true;
        reference = "first-variant (" + vname + ")";
        check = {{"ok", true}, {"against", "torch (samples)"}};
      } else {
        if (c.cub && !b.opt.samples_dir.empty() && !b.samples_index["cases"].contains(c.id)) {
          WriteSamples(b, c, vname);
        }
        check = CheckJson(CheckOutput(b, c, out_n), reference);
      }
      const Stats s = Time(b, [&] {
        return RunKernelOp(a, b.d_in, b.d_out, b.d_ws, kWorkspaceBytes, cfg, nullptr);
      });
      json j = {{"kind", "ours"}, {"case", c.id},   {"label", c.label},
                {"staging", v.name}, {"stages", v.uses_stages ? stages : 0},
                {"kernels", kernels}, {"check", check}};
      j.update(StatsJson(s, c.bytes, b.copy_gbs));
      Emit(j);
      std::fprintf(stderr, "%-34s %-36s %10.1f us %7.0f GB/s %5.1f%% of copy, %d kernel(s), "
                   "check %s\n",
                   c.label.c_str(), vname.c_str(), s.median_us, c.bytes / (s.median_us * 1e3),
                   100.0 * c.bytes / (s.median_us * 1e3) / b.copy_gbs, kernels,
                   check["ok"].get<bool>() ? "ok" : "FAILED");
      if (check["ok"].get<bool>() &&
          (best_of_variant.is_null() || s.median_us < best_of_variant["median_us"].get<double>())) {
        best_of_variant = j;
      }
    }
    if (!best_of_variant.is_null()) {
      Emit({{"kind", "best_stages"}, {"case", c.id}, {"staging", v.name},
            {"stages", best_of_variant["stages"]},
            {"median_us", best_of_variant["median_us"]}});
      if (best.is_null() || best_of_variant["median_us"].get<double>() <
                                best["median_us"].get<double>()) {
        best = best_of_variant;
      }
    }
  }
  if (!best.is_null()) {
    Emit({{"kind", "winner"},
          {"op", c.id},
          {"dtype", "float32"},
          {"rows", a.rows},
          {"cols", a.cols},
          {"shape", Log2Label(a.rows) + " x " + Log2Label(a.cols)},
          {"size_class", SizeClass(a)},
          {"staging", best["staging"]},
          {"stages", best["stages"]},
          {"median_us", best["median_us"]}});
  }
}

int Main(int argc, char** argv) {
  Bench b;
  b.opt = ParseOptions(argc, argv);
  int device = 0;
  CK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, device));
  int driver = 0, runtime = 0;
  CK(cudaDriverGetVersion(&driver));
  CK(cudaRuntimeGetVersion(&runtime));
  Emit({{"kind", "device"}, {"name", prop.name}, {"sms", prop.multiProcessorCount},
        {"l2_bytes", prop.l2CacheSize}, {"driver_api", driver}, {"runtime", runtime},
        {"cccl", CcclVersion()}, {"seed", b.opt.seed}, {"reps", b.opt.reps},
        {"warmup", b.opt.warmup}, {"flush_bytes", kFlushBytes}});

  CK(cudaStreamCreateWithFlags(&b.stream, cudaStreamNonBlocking));
  CK(cudaEventCreate(&b.start));
  CK(cudaEventCreate(&b.stop));
  const size_t bytes = kElements * sizeof(float);
  void* d_in = nullptr;
  CK(cudaMalloc(&d_in, bytes));
  b.d_in = static_cast<float*>(d_in);
  CK(cudaMalloc(&b.d_out, bytes));
  CK(cudaMalloc(&b.d_ref, bytes));
  CK(cudaMalloc(&b.d_flush, kFlushBytes));
  CK(cudaMalloc(&b.d_ws, kWorkspaceBytes));
  CK(cudaMalloc(&b.d_acc, 64));
  CK(cudaMemsetAsync(b.d_flush, 0, kFlushBytes, b.stream));
  CK(cudaMemsetAsync(b.d_ws, 0, kWorkspaceBytes, b.stream));
  CK(FillQuantized(b.d_in, kElements, b.opt.seed, b.stream));
  CK(cudaStreamSynchronize(b.stream));
  b.samples_index = {{"seed", b.opt.seed}, {"n", kElements}, {"square", kSquare},
                     {"cases", json::object()}};

  // The copy peer: a device-to-device copy of the same 1 GiB (read + written).
  const Stats copy = Time(b, [&] {
    return cudaMemcpyAsync(b.d_out, b.d_in, bytes, cudaMemcpyDeviceToDevice, b.stream);
  });
  b.copy_gbs = 2.0 * bytes / (copy.median_us * 1e3);
  json cj = {{"kind", "peer"}, {"case", "copy"}, {"peer", "cudaMemcpy D2D"}};
  cj.update(StatsJson(copy, 2.0 * bytes, 0));
  Emit(cj);
  std::fprintf(stderr, "%-34s %-36s %10.1f us %7.0f GB/s\n", "copy, 1 GiB", "cudaMemcpy D2D",
               copy.median_us, b.copy_gbs);

  for (const Case& c : MakeCases()) {
    if (!b.opt.cases.empty() && ("," + b.opt.cases + ",").find("," + c.id + ",") == std::string::npos) {
      continue;
    }
    RunCase(b, c, prop.multiProcessorCount);
  }
  Emit({{"kind", "done"}});
  return 0;
}

}  // namespace
}  // namespace gpupipe::bench

int main(int argc, char** argv) { return gpupipe::bench::Main(argc, argv); }
