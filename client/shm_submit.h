// Runs a job with its input and its result in shared memory: the same-host data plane. The
// input is written into a fresh shared-memory object, the daemon maps it and a second object
// for the result (RegisterRegion), and the job's stream carries only its events and timing. On
// the cuda backend both are page-locked, so the device copies straight from and to them.
//
// The daemon must run on this host and see this process's /dev/shm (a container needs
// --ipc=host or a shared /dev/shm); RegionsUnavailable tells the errors that mean it does not,
// for callers that fall back to sending the bytes over the connection.
#ifndef GPUPIPE_CLIENT_SHM_SUBMIT_H_
#define GPUPIPE_CLIENT_SHM_SUBMIT_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "client/job_client.h"

namespace gpupipe {
namespace client {

// Fills the `n` input bytes at `buffer` (shared memory the daemon will read).
using InputFill = std::function<absl::Status(char* buffer, int64_t n)>;

// Runs `request` (its input with dtype and shape and no data) with `input_bytes` bytes from
// `fill`: creates and registers the input region, asks the daemon for the result's shape (a
// dry run), creates and registers the result's region, runs the job, and hands the result to
// `sink` (Begin, then one Write of the whole result) or, without one, keeps it in
// JobResult::output. The regions are unregistered and removed on return, whatever happened.
// Errors as JobClient::Submit's, and RegisterRegion's.
absl::StatusOr<JobResult> SubmitThroughSharedMemory(JobClient& client, v1::SubmitRequest request,
                                                    int64_t input_bytes, const InputFill& fill,
                                                    EventCallback on_event = {},
                                                    ResultSink* sink = nullptr);

// Whether `status` (from SubmitThroughSharedMemory) says the daemon cannot use this process's
// shared memory at all: it cannot see the object (another host or IPC namespace), may not
// open it, has regions off, or predates them; or this process cannot create the memory (no
// room in /dev/shm). Other errors are the job's.
bool RegionsUnavailable(const absl::Status& status);

// Whether `target` names this host: a Unix socket, localhost, or a loopback address (with or
// without a port or a dns:/ipv4:/ipv6: scheme). Never a list of several daemons: a region
// belongs to one.
bool IsLocalTarget(const std::string& target);

}  // namespace client
}  // namespace gpupipe

#endif  // GPUPIPE_CLIENT_SHM_SUBMIT_H_
