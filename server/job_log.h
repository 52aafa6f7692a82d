// The log line of a finished job: "job <id> <STATUS>" and its fields, named as the CLI's JSON
// names them (queue_us, total_us, bytes_in, gbps, ...), with the client's identity in every
// line. A job that failed inside the daemon (INTERNAL, UNKNOWN, DATA_LOSS) logs at error
// level; the rest, failures the client caused or asked for included, at info.
#pragma once

#include <string>
#include <vector>

#include "server/engine/engine.h"
#include "server/logger.h"

namespace gpupipe::daemon {

struct JobLogLine {
  LogLevel level = LogLevel::kInfo;
  std::string message;  // "job 1f2e-17 OK"
  std::vector<LogField> fields;
};

JobLogLine JobLog(const engine::JobRecord& record);

}  // namespace gpupipe::daemon
