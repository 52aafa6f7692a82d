#include "server/engine/job/types.h"

#include "absl/strings/str_join.h"

namespace gpupipe::engine {

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kFloat16: return "float16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
  }
  return "unknown";
}

int64_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return 4;
    case DType::kFloat64: return 8;
    case DType::kFloat16: return 2;
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
  }
  return 0;
}

const char* PriorityName(Priority priority) {
  switch (priority) {
    case Priority::kLow: return "low";
    case Priority::kNormal: return "normal";
    case Priority::kHigh: return "high";
  }
  return "unknown";
}

const char* StagingName(Staging staging) {
  switch (staging) {
    case Staging::kAuto: return "auto";
    case Staging::kDirect: return "direct";
    case Staging::kPipeline: return "pipeline";
    case Staging::kPipelineThread: return "pipeline-thread";
    case Staging::kPrimitives: return "primitives";
    case Staging::kBulk: return "bulk";
  }
  return "unknown";
}

const char* LaunchModeName(LaunchMode mode) {
  switch (mode) {
    case LaunchMode::kAuto: return "auto";
    case LaunchMode::kStream: return "stream";
    case LaunchMode::kPdl: return "pdl";
    case LaunchMode::kGraph: return "graph";
    case LaunchMode::kGraphPdl: return "graph-pdl";
  }
  return "unknown";
}

const char* ConvolveModeName(ConvolveMode mode) {
  switch (mode) {
    case ConvolveMode::kFull: return "full";
    case ConvolveMode::kSame: return "same";
    case ConvolveMode::kValid: return "valid";
  }
  return "unknown";
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return "[" + absl::StrJoin(shape, ", ") + "]";
}

}  // namespace gpupipe::engine
