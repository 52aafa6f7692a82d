// The engine's job model: plain data, independent of gRPC and of any backend.
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace gpupipe::engine {

enum class DType { kFloat32, kFloat64, kFloat16, kInt32, kInt64 };

enum class Priority { kLow = 0, kNormal = 1, kHigh = 2 };
inline constexpr int kPriorityLevels = 3;

enum class Staging { kAuto, kDirect, kPipeline, kPipelineThread, kPrimitives, kBulk };
enum class LaunchMode { kAuto, kStream, kPdl, kGraph, kGraphPdl };

enum class OpKind {
  // elementwise
  kAffine, kScale, kAdd, kRelu, kClamp, kAbs, kSqrt, kExp, kLog, kSigmoid, kTanh, kPow,
  // row reductions
  kSum, kMin, kMax, kMean, kNorm2, kArgmax,
  // row multi-pass
  kSoftmax, kL2Normalize, kStandardize,
  // row scans and ops that replace the last axis
  kCumsum, kHistogram, kConvolve, kTopk,
};

// np.convolve's modes.
enum class ConvolveMode { kFull, kSame, kValid };

// One op with its parameters, defaults already applied. Each kind reads only its own fields.
struct OpSpec {
  OpKind kind = OpKind::kRelu;
  double alpha = 1.0;  // affine, scale
  double beta = 0.0;   // affine
  double value = 0.0;  // add
  double lo = -std::numeric_limits<double>::infinity();  // clamp; histogram (required there)
  double hi = std::numeric_limits<double>::infinity();   // clamp; histogram (required there)
  double p = 1.0;      // pow
  int64_t bins = 10;   // histogram (NumPy's default)
  std::vector<double> taps;                  // convolve
  ConvolveMode mode = ConvolveMode::kFull;   // convolve
  int64_t k = 0;       // topk (required)
};

struct JobSpec {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;  // empty = scalar
  std::vector<OpSpec> ops;
  Priority priority = Priority::kNormal;
  Staging staging = Staging::kAuto;
  int stages = 0;  // 0 = backend default
  LaunchMode launch = LaunchMode::kAuto;
  bool profile = false;  // time every plan step with its own events
  // Input bytes per chunk of the overlapped pipeline; 0 = the backend's default. Backends cap
  // it at what a lane holds.
  int64_t chunk_bytes = 0;
  bool timeline = false;  // report each chunk's stages (JobTiming::timeline)
  bool explain = false;  // report the plan
  bool dry_run = false;  // plan only; run nothing
  // The job's whole outcome must travel in one message (SubmitSmall): a job that runs as more
  // than one chunk, whose result is larger than one message or that reports a plan (explain,
  // dry_run) is refused with INVALID_ARGUMENT before it is accepted
  // (planning/one_message.h).
  bool one_message = false;
  std::string client_tag;
  // Set by whoever submits the job, not by the request: the client it belongs to (per-client
  // limits and fairness, scheduling/; all anonymous jobs share the empty name), and when the
  // caller stops waiting for it (the job then ends with DEADLINE_EXCEEDED, queued or running).
  std::string client;
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  // When the service received the request (JobTiming::accept_us); unset: not known.
  std::chrono::steady_clock::time_point received_at;
};

const char* DTypeName(DType dtype);  // "float32", ...
int64_t DTypeSize(DType dtype);
const char* PriorityName(Priority priority);  // "low", "normal", "high"
// "auto", "direct", "pipeline", "pipeline-thread", "primitives", "bulk"
const char* StagingName(Staging staging);
const char* LaunchModeName(LaunchMode mode);  // "auto", "stream", "pdl", "graph", "graph-pdl"
const char* ConvolveModeName(ConvolveMode mode);  // "full", "same", "valid"
std::string ShapeString(const std::vector<int64_t>& shape);  // "[2, 3]"

}  // namespace gpupipe::engine
