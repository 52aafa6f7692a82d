// gpupiped's memory and scheduling flags: --device-memory as a percentage or a size,
// --chunk-mib, --input-ring-mib, --input-ring-total-mib, --priority-hold-ms,
// --direct-run-max-kib, --mapped-io-max-kib, --max-client-unread-mib, --max-unread-mib,
// --rpc-stream-window-kib, the listening addresses' ports, the priority listener's,
// --log-gather-ms.
#include "server/flags.h"

#include <gtest/gtest.h>

namespace gpupipe::daemon {
namespace {

TEST(Flags, DeviceMemoryTakesAPercentageOrASize) {
  absl::StatusOr<DaemonOptions> o = ParseFlags({"--device-memory", "40%", "--chunk-mib=8"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_DOUBLE_EQ(o->device_memory_fraction, 0.4);
  EXPECT_EQ(o->device_memory_bytes, 0);
  EXPECT_EQ(o->chunk_bytes, int64_t{8} << 20);

  o = ParseFlags({"--device-memory=2GiB"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->device_memory_bytes, int64_t{2} << 30);
  EXPECT_EQ(o->device_memory_fraction, 0);
  o = ParseFlags({"--device-memory", "512MiB"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->device_memory_bytes, int64_t{512} << 20);
  o = ParseFlags({"--device-memory", "300"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->device_memory_bytes, int64_t{300} << 20);
}

TEST(Flags, CudaWaitIsCudasChoiceByDefault) {
  absl::StatusOr<DaemonOptions> o = ParseFlags({});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->cuda_wait, engine::CudaWait::kAuto);
  const std::pair<const char*, engine::CudaWait> modes[] = {{"auto", engine::CudaWait::kAuto},
                                                            {"spin", engine::CudaWait::kSpin},
                                                            {"yield", engine::CudaWait::kYield},
                                                            {"block", engine::CudaWait::kBlock}};
  for (const auto& [name, mode] : modes) {
    o = ParseFlags({"--cuda-wait", name});
    ASSERT_TRUE(o.ok()) << name << ": " << o.status();
    EXPECT_EQ(o->cuda_wait, mode) << name;
  }
  o = ParseFlags({"--cuda-wait=sleep"});
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(o.status().message().find("--cuda-wait"), std::string::npos) << o.status();
}

TEST(Flags, BadDeviceMemoryNamesTheFlag) {
  for (const char* bad : {"0%", "96%", "-1GiB", "lots", "GiB", ""}) {
    absl::StatusOr<DaemonOptions> o = ParseFlags({"--device-memory", bad});
    ASSERT_FALSE(o.ok()) << bad;
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(o.status().message().find("--device-memory"), std::string::npos) << o.status();
  }
  EXPECT_FALSE(ParseFlags({"--chunk-mib", "0"}).ok());
}

TEST(Flags, InputRingsDefaultTo64MiBPerUploadIn512MiBAndZeroTurnsUploadsOff) {
  absl::StatusOr<DaemonOptions> o = ParseFlags({});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->input_ring_bytes, int64_t{64} << 20);
  EXPECT_EQ(o->input_ring_total_bytes, int64_t{512} << 20);
  o = ParseFlags({"--input-ring-mib=8", "--input-ring-total-mib", "0"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->input_ring_bytes, int64_t{8} << 20);
  EXPECT_EQ(o->input_ring_total_bytes, 0);
  o = ParseFlags({"--input-ring-mib", "0"});
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("--input-ring-mib"), std::string::npos) << o.status();
  // A pool smaller than one upload's ring could never serve an upload.
  o = ParseFlags({"--input-ring-mib", "64", "--input-ring-total-mib", "32"});
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("--input-ring-total-mib"), std::string::npos)
      << o.status();
}

TEST(Flags, ListeningPortsAreZeroTo65535) {
  for (const char* flag : {"--listen", "--priority-listen", "--metrics-listen"}) {
    for (const char* bad : {"127.0.0.1:117608", "127.0.0.1:-1", "127.0.0.1:", "127.0.0.1",
                            "[::1]:65536", "[::1]", "host:port"}) {
      absl::StatusOr<DaemonOptions> o = ParseFlags({flag, bad});
      ASSERT_FALSE(o.ok()) << flag << " " << bad;
      EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_NE(o.status().message().find(flag), std::string::npos) << o.status();
    }
  }
  for (const char* good : {"127.0.0.1:0", "0.0.0.0:65535", "[::]:50051", "localhost:7",
                           "unix:/run/gpupipe.sock"}) {
    EXPECT_TRUE(ParseFlags({"--listen", good}).ok()) << good;
  }
  EXPECT_TRUE(ParseFlags({"--metrics-listen", ""}).ok());  // no metrics
}

TEST(Flags, StreamWindowIs4MiBByDefaultAndZeroLeavesItToGrpc) {
  absl::StatusOr<DaemonOptions> o = ParseFlags({});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->rpc_stream_window_bytes, int64_t{4} << 20);
  o = ParseFlags({"--rpc-stream-window-kib=256"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->rpc_stream_window_bytes, int64_t{256} << 10);
  o = ParseFlags({"--rpc-stream-window-kib", "0"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->rpc_stream_window_bytes, 0);
  for (const char* bad : {"63", "-1", "1048577"}) {
    o = ParseFlags({"--rpc-stream-window-kib", bad});
    ASSERT_FALSE(o.ok()) << bad;
    EXPECT_NE(o.status().message().find("--rpc-stream-window-kib"), std::string::npos)
        << o.status();
  }
}

TEST(Flags, AStalledReaderLosesItsLaneAfter30SOr10SWhileJobsWait) {
  absl::StatusOr<DaemonOptions> o = ParseFlags({});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->reader_idle_timeout_ms, 30000);
  EXPECT_EQ(o->reader_idle_busy_timeout_ms, 10000);
  o = ParseFlags({"--reader-idle-busy-seconds=0"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->reader_idle_busy_timeout_ms, 0);
  o = ParseFlags({"--reader-idle-busy-seconds", "3"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->reader_idle_busy_timeout_ms, 3000);
  for (const char* bad : {"-1", "86401", "x"}) {
    o = ParseFlags({"--reader-idle-busy-seconds", bad});
    ASSERT_FALSE(o.ok()) << bad;
    EXPECT_NE(o.status().message().find("--reader-idle-busy-seconds"), std::string::npos)
        << o.status();
  }
}

TEST(Flags, UnreadResultsAre256MiBPerClientIn1GiBByDefault) {
  absl::StatusOr<DaemonOptions> o = ParseFlags({});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->max_client_unread_bytes, int64_t{256} << 20);
  EXPECT_EQ(o->max_unread_bytes, int64_t{1} << 30);
  o = ParseFlags({"--max-client-unread-mib=8", "--max-unread-mib", "64"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->max_client_unread_bytes, int64_t{8} << 20);
  EXPECT_EQ(o->max_unread_bytes, int64_t{64} << 20);
  for (const char* flag : {"--max-client-unread-mib", "--max-unread-mib"}) {
    o = ParseFlags({flag, "0"});  // no off switch: results wait in memory either way
    ASSERT_FALSE(o.ok()) << flag;
    EXPECT_NE(o.status().message().find(flag), std::string::npos) << o.status();
  }
}

TEST(Flags, RegionLimitsHaveTheirDefaultsAndZeroGibTurnsRegionsOff) {
  absl::StatusOr<DaemonOptions> o = ParseFlags({});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->max_region_bytes, int64_t{32} << 30);
  EXPECT_EQ(o->max_client_region_bytes, int64_t{16} << 30);
  EXPECT_EQ(o->max_client_regions, 64);
  EXPECT_EQ(o->max_regions, 1024);
  EXPECT_EQ(o->region_idle_timeout_ms, 600000);
  EXPECT_FALSE(o->region_any_owner);
  o = ParseFlags({"--max-region-gib", "0", "--max-client-region-gib=2", "--max-client-regions", "3",
                  "--max-regions", "9", "--region-idle-timeout-seconds", "5",
                  "--region-any-owner"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->max_region_bytes, 0);
  EXPECT_EQ(o->max_client_region_bytes, int64_t{2} << 30);
  EXPECT_EQ(o->max_client_regions, 3);
  EXPECT_EQ(o->max_regions, 9);
  EXPECT_EQ(o->region_idle_timeout_ms, 5000);
  EXPECT_TRUE(o->region_any_owner);
  o = ParseFlags({"--max-regions", "0"});
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("--max-regions"), std::string::npos) << o.status();
}

TEST(Flags, PriorityHoldDefaultsTo20MsAndZeroTurnsItOff) {
  absl::StatusOr<DaemonOptions> o = ParseFlags({});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->priority_hold_us, 20000);
  o = ParseFlags({"--priority-hold-ms", "0"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->priority_hold_us, 0);
  o = ParseFlags({"--priority-hold-ms=250"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->priority_hold_us, 250000);
  o = ParseFlags({"--priority-hold-ms", "60001"});
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("--priority-hold-ms"), std::string::npos) << o.status();
}

TEST(Flags, DirectRunsTakeJobsOf64KibByDefaultAndZeroTurnsThemOff) {
  absl::StatusOr<DaemonOptions> o = ParseFlags({});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->direct_run_max_bytes, 64 << 10);
  o = ParseFlags({"--direct-run-max-kib", "0"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->direct_run_max_bytes, 0);
  o = ParseFlags({"--direct-run-max-kib=8"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->direct_run_max_bytes, 8 << 10);
  o = ParseFlags({"--direct-run-max-kib", "-1"});
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("--direct-run-max-kib"), std::string::npos) << o.status();
}

TEST(Flags, SmallJobsRunWithoutCopiesUpTo64KibByDefaultAndZeroTurnsThatOff) {
  absl::StatusOr<DaemonOptions> o = ParseFlags({});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->mapped_io_max_bytes, 64 << 10);
  EXPECT_EQ(o->mapped_io_max_bytes, engine::CudaBackendOptions{}.mapped_io_max_bytes);
  o = ParseFlags({"--mapped-io-max-kib", "0"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->mapped_io_max_bytes, 0);
  o = ParseFlags({"--mapped-io-max-kib=256"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->mapped_io_max_bytes, 256 << 10);
  for (const char* bad : {"-1", "1048577", "64k"}) {
    o = ParseFlags({"--mapped-io-max-kib", bad});
    ASSERT_FALSE(o.ok()) << bad;
    EXPECT_NE(o.status().message().find("--mapped-io-max-kib"), std::string::npos) << o.status();
  }
}

TEST(Flags, JobLinesGatherFor50MsByDefaultAndZeroWritesEachAtOnce) {
  absl::StatusOr<DaemonOptions> o = ParseFlags({});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->log_gather_ms, 50);
  o = ParseFlags({"--log-gather-ms", "0"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->log_gather_ms, 0);
  o = ParseFlags({"--log-gather-ms=10000"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->log_gather_ms, 10000);
  for (const char* bad : {"-1", "10001", "50ms"}) {
    o = ParseFlags({"--log-gather-ms", bad});
    ASSERT_FALSE(o.ok()) << bad;
    EXPECT_NE(o.status().message().find("--log-gather-ms"), std::string::npos) << o.status();
  }
}

TEST(Flags, LogsAreTextAtInfoByDefaultAndBadValuesNameTheFlag) {
  absl::StatusOr<DaemonOptions> o = ParseFlags({});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->log_format, LogFormat::kText);
  EXPECT_EQ(o->log_level, LogLevel::kInfo);
  o = ParseFlags({"--log-format=json", "--log-level", "warning"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->log_format, LogFormat::kJson);
  EXPECT_EQ(o->log_level, LogLevel::kWarning);
  o = ParseFlags({"--log-level", "debug"});
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("--log-level"), std::string::npos) << o.status();
  o = ParseFlags({"--log-format", "logfmt"});
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("--log-format"), std::string::npos) << o.status();
}

TEST(Flags, ThePriorityListenerIsOffByDefaultAndTakesHighJobs64AtATimeOnTwoThreads) {
  absl::StatusOr<DaemonOptions> o = ParseFlags({});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->priority_listen, "");
  EXPECT_EQ(o->priority_min, engine::Priority::kHigh);
  EXPECT_EQ(o->priority_max_calls, 64);
  EXPECT_EQ(o->priority_threads, 2);
  o = ParseFlags({"--priority-listen", "127.0.0.1:50052", "--priority-min=normal",
                  "--priority-max-calls", "3", "--priority-threads=5"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->priority_listen, "127.0.0.1:50052");
  EXPECT_EQ(o->priority_min, engine::Priority::kNormal);
  EXPECT_EQ(o->priority_max_calls, 3);
  EXPECT_EQ(o->priority_threads, 5);
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--priority-min", "urgent"},
        std::vector<std::string>{"--priority-max-calls", "0"},
        std::vector<std::string>{"--priority-max-calls", "1025"},
        std::vector<std::string>{"--priority-threads", "0"},
        std::vector<std::string>{"--priority-threads", "65"},
        std::vector<std::string>{"--listen", "127.0.0.1:7", "--priority-listen", "127.0.0.1:7"}}) {
    o = ParseFlags(bad);
    ASSERT_FALSE(o.ok()) << bad[0];
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(o.status().message().find("--priority-"), std::string::npos) << o.status();
  }
}

TEST(Flags, MetricsListenOnLoopbackByDefaultAndEmptyTurnsThemOff) {
  absl::StatusOr<DaemonOptions> o = ParseFlags({});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->metrics_listen, "127.0.0.1:9464");
  o = ParseFlags({"--metrics-listen", ""});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->metrics_listen, "");
}

}  // namespace
}  // namespace gpupipe::daemon
