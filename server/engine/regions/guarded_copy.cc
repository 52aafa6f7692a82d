#include "server/engine/regions/guarded_copy.h"

#include <csetjmp>
#include <csignal>
#include <atomic>
#include <cstring>
#include <mutex>

#include "absl/strings/str_cat.h"

namespace gpupipe::engine {
namespace {

// The jump target of this thread's guarded copy in progress; null outside one.
thread_local sigjmp_buf* t_guard = nullptr;
struct sigaction g_previous {};

void OnSigbus(int signal, siginfo_t* info, void* context) {
  if (sigjmp_buf* guard = t_guard; guard != nullptr) {
    t_guard = nullptr;
    siglongjmp(*guard, 1);
  }
  // Not a fault of a guarded copy: hand it to whoever handled SIGBUS before.
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(signal, info, context);
    return;
  }
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN &&
      g_previous.sa_handler != nullptr) {
    g_previous.sa_handler(signal);
    return;
  }
  // The default action, now: a fault re-runs its access on return and a sent signal is
  // raised again, and either ends the process, as SIGBUS would have without this handler.
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  sigaction(SIGBUS, &fallback, nullptr);
  raise(SIGBUS);
}

void InstallHandler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_sigaction = OnSigbus;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    sigaction(SIGBUS, &action, &g_previous);
  });
}

}  // namespace

absl::Status GuardedCopy(void* dst, const void* src, size_t bytes, const char* what) {
  InstallHandler();
  sigjmp_buf guard;
  // Saves the signal mask, so that SIGBUS is unblocked again after a jump out of its handler.
  if (sigsetjmp(guard, 1) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(what,
                     ": its shared-memory object no longer covers these bytes (was it truncated "
                     "while the job ran?)"));
  }
  // The fences keep the compiler from moving the guard's stores across the copy, which it
  // would otherwise be free to do: nothing but the signal handler reads them.
  t_guard = &guard;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  std::memcpy(dst, src, bytes);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_guard = nullptr;
  return absl::OkStatus();
}

}  // namespace gpupipe::engine
