// Command-line flags of gpupiped, parsed into a plain options struct.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/engine/backends/backend_factory.h"
#include "server/engine/job/types.h"
#include "server/logger.h"

namespace gpupipe::daemon {

struct DaemonOptions {
  std::string listen = "127.0.0.1:50051";
  std::string metrics_listen = "127.0.0.1:9464";  // --metrics-listen; empty: no metrics
  // The priority listener (rpc/priority_listener.h): --priority-listen (empty: none), the
  // lowest priority it takes (--priority-min), the calls it serves at once
  // (--priority-max-calls) and the threads that serve them (--priority-threads).
  std::string priority_listen;
  engine::Priority priority_min = engine::Priority::kHigh;
  int priority_max_calls = 64;
  int priority_threads = 2;
  engine::BackendChoice backend = engine::BackendChoice::kAuto;
  engine::CudaWait cuda_wait = engine::CudaWait::kAuto;  // --cuda-wait
  int device = 0;
  int streams_per_priority = 2;
  // --mapped-io-max-kib (engine::CudaBackendOptions::mapped_io_max_bytes; 0: off).
  int64_t mapped_io_max_bytes = engine::CudaBackendOptions{}.mapped_io_max_bytes;
  int64_t max_input_bytes = int64_t{64} << 20;
  // --device-memory: the budget of the lanes' device chunk buffers, as a fraction of the
  // device's memory or in bytes (bytes win when set).
  double device_memory_fraction = 0.25;
  int64_t device_memory_bytes = 0;
  int64_t chunk_bytes = int64_t{16} << 20;  // --chunk-mib
  int64_t input_ring_bytes = int64_t{64} << 20;         // --input-ring-mib
  int64_t input_ring_total_bytes = int64_t{512} << 20;  // --input-ring-total-mib
  int64_t rpc_memory_bytes = int64_t{128} << 20;        // --rpc-memory-mib
  // --rpc-stream-window-kib: the HTTP/2 flow-control window each stream is offered, fixed
  // (0: gRPC's automatic window, sized from its bandwidth-delay estimate).
  int64_t rpc_stream_window_bytes = int64_t{4} << 20;
  int64_t upload_idle_timeout_ms = 30000;               // --upload-idle-timeout-seconds
  // --priority-hold-ms: the longest a job holds its next chunk back while a job of a higher
  // priority runs (0: no holding).
  int64_t priority_hold_us = 20000;
  // Dynamic batching (engine/scheduling/batching.h): --batch-window-us (0: off),
  // --batch-max-jobs, --batch-max-kib.
  int64_t batch_window_us = 100;
  int batch_max_jobs = 64;
  int64_t batch_max_bytes = int64_t{4} << 20;
  // --direct-run-max-kib (engine/scheduling/direct_run.h; 0: off).
  int64_t direct_run_max_bytes = int64_t{64} << 10;
  int64_t max_stream_input_bytes = int64_t{4} << 30;
  int max_queued_jobs = 1024;  // per priority level
  int64_t max_queued_bytes = int64_t{2} << 30;
  int max_client_jobs = 256;                             // --max-client-jobs
  int64_t max_client_queued_bytes = int64_t{512} << 20;  // --max-client-queued-mib
  int max_client_uploads = 4;                            // --max-client-uploads
  int64_t max_client_unread_bytes = int64_t{256} << 20;  // --max-client-unread-mib
  int64_t max_unread_bytes = int64_t{1} << 30;           // --max-unread-mib
  int max_run_streams = 16;                              // --max-run-streams
  int64_t max_work_per_byte = 4096;                      // --max-work-per-byte
  int64_t max_region_bytes = int64_t{32} << 30;          // --max-region-gib
  int64_t max_client_region_bytes = int64_t{16} << 30;   // --max-client-region-gib
  int max_client_regions = 64;                           // --max-client-regions
  int max_regions = 1024;                                // --max-regions
  bool region_any_owner = false;                         // --region-any-owner
  std::string region_fd_socket;                          // --region-fd-socket
  int64_t region_idle_timeout_ms = 600000;               // --region-idle-timeout-seconds
  int64_t reader_idle_timeout_ms = 30000;                // --reader-idle-timeout-seconds
  int64_t reader_idle_busy_timeout_ms = 10000;           // --reader-idle-busy-seconds
  int64_t keepalive_ms = 60000;                          // --keepalive-seconds
  int64_t keepalive_timeout_ms = 20000;                  // --keepalive-timeout-seconds
  int64_t max_connection_idle_ms = 300000;               // --max-connection-idle-seconds
  int64_t handshake_timeout_ms = 10000;                  // --handshake-timeout-seconds
  int shutdown_grace_seconds = 10;
  // Transport security (paths; empty: none) and the listen rule's escape hatch.
  std::string tls_cert;       // --tls-cert
  std::string tls_key;        // --tls-key
  std::string tls_client_ca;  // --tls-client-ca
  std::string token_file;     // --token-file
  bool insecure = false;      // --insecure
  // --inject-device-fault KIND:N, in test builds only (CudaBackendOptions::inject_fault).
  std::string inject_fault;
  int64_t inject_fault_at_job = 0;
  bool log_jobs = true;
  LogFormat log_format = LogFormat::kText;  // --log-format
  LogLevel log_level = LogLevel::kInfo;     // --log-level
  // --log-gather-ms: about how long a job's info line may wait to be written with the lines
  // after it (Logger's gather delay); 0 writes each at once.
  int log_gather_ms = 50;
  bool help = false;
  bool version = false;
};

// Parses argv (without argv[0]). INVALID_ARGUMENT names the flag and the problem.
absl::StatusOr<DaemonOptions> ParseFlags(const std::vector<std::string>& args);

std::string Usage();

// Parses a --device-memory value: "40%" (of the device's memory), "512MiB", "2GiB", or a plain
// number of MiB. Sets exactly one of *fraction (0 < f <= 0.95) and *bytes.
absl::Status ParseDeviceMemory(const std::string& value, double* fraction, int64_t* bytes);

}  // namespace gpupipe::daemon
