#include "common/process_cpu.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>

#include "gtest/gtest.h"

namespace gpupipe {
namespace {

// Spins this thread until it has used `seconds` of CPU by the thread clock, so the test does
// not depend on how busy the machine is.
void Spin(double seconds) {
  timespec start{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start);
  volatile double sink = 0;
  for (;;) {
    for (int i = 0; i < 100000; ++i) sink = sink + std::sqrt(static_cast<double>(i));
    timespec now{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    const double used = static_cast<double>(now.tv_sec - start.tv_sec) +
                        static_cast<double>(now.tv_nsec - start.tv_nsec) / 1e9;
    if (used >= seconds) return;
  }
}

TEST(ProcessCpu, ThisProcessCountsTheCpuItUses) {
  const double before = ProcessCpuSeconds();
  Spin(0.2);
  const double used = ProcessCpuSeconds() - before;
  EXPECT_GE(used, 0.2);
  EXPECT_LT(used, 5.0);
}

TEST(ProcessCpu, ProcAgreesWithGetrusageWithinItsTicks) {
  Spin(0.1);
  const std::optional<double> proc = ProcessCpuSecondsOf(getpid());
  const double self = ProcessCpuSeconds();
  ASSERT_TRUE(proc.has_value());
  // /proc counts whole clock ticks, user and system apart; getrusage is read after it.
  EXPECT_GT(*proc, 0.05);
  EXPECT_LE(*proc, self + 0.03);
  EXPECT_GE(*proc, self - 0.05);
}

TEST(ProcessCpu, AChildsCpuIsReadUntilItIsReaped) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    Spin(0.2);
    _exit(0);
  }
  // Wait for its end without reaping it, so /proc still has its figures.
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);
  const std::optional<double> cpu = ProcessCpuSecondsOf(child);
  ASSERT_TRUE(cpu.has_value());
  EXPECT_GE(*cpu, 0.15);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  EXPECT_FALSE(ProcessCpuSecondsOf(child).has_value());
}

TEST(ProcessCpu, NoSuchProcessIsNotAFigure) {
  EXPECT_FALSE(ProcessCpuSecondsOf(-1).has_value());
  EXPECT_FALSE(ProcessCpuSecondsOf(0).has_value());
}

}  // namespace
}  // namespace gpupipe
