// Conversion between the gpupipe.v1 protos and the engine's plain types. Decoding validates
// what only the proto can tell (unset oneofs, unknown enum values, fields from newer clients);
// the engine validates the rest.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpupipe/v1/gpupipe.pb.h"
#include "server/engine/engine.h"
#include "server/engine/job/types.h"

namespace gpupipe::rpc {

// INVALID_ARGUMENT naming the field when the request cannot be expressed as a JobSpec. The
// input bytes are not touched (the caller moves them separately).
absl::StatusOr<engine::JobSpec> DecodeJobSpec(const v1::SubmitRequest& request);

// The request's input and output regions (either may be absent); INVALID_ARGUMENT for an
// empty id or an offset or length beyond int64.
absl::StatusOr<engine::JobRegions> DecodeJobRegions(const v1::SubmitRequest& request);

// A request's priority (unspecified: normal); INVALID_ARGUMENT for a value this server does
// not know.
absl::StatusOr<engine::Priority> DecodePriority(v1::Priority priority);

v1::DType EncodeDType(engine::DType dtype);
v1::Priority EncodePriority(engine::Priority priority);
v1::Staging EncodeStaging(engine::Staging staging);
v1::LaunchMode EncodeLaunchMode(engine::LaunchMode mode);

v1::JobEvent EncodeAccepted(const engine::AcceptedInfo& info);
v1::JobEvent EncodePlan(const std::string& job_id, const engine::PlanDescription& plan);
v1::JobEvent EncodeTiming(const std::string& job_id, const engine::JobTiming& timing);
v1::JobEvent EncodeDone(const std::string& job_id, const absl::Status& status);
v1::DescribeResponse EncodeDescription(const engine::EngineDescription& description,
                                       const std::string& server_version);
v1::StatsResponse EncodeStats(const engine::EngineStats& stats, const std::string& server_version,
                              double uptime_seconds);

}  // namespace gpupipe::rpc
