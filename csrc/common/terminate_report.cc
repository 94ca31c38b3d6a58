#include "common/terminate_report.h"

#include <execinfo.h>
#include <pthread.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>

namespace bps {
namespace {

std::terminate_handler previous_handler = nullptr;

void ReportThenTerminate() {
  // Only async-signal-safe-ish calls: the process may be in any state.
  char name[32] = "?";
  pthread_getname_np(pthread_self(), name, sizeof(name));
  char line[160];
  const int n = std::snprintf(line, sizeof(line),
                              "byteps-native: std::terminate in thread '%s' (pid %d); native backtrace:\n", name,
                              static_cast<int>(getpid()));
  if (n > 0) (void)!write(STDERR_FILENO, line, static_cast<size_t>(n) < sizeof(line) ? n : sizeof(line) - 1);
  void* frames[64];
  const int depth = backtrace(frames, 64);
  backtrace_symbols_fd(frames, depth, STDERR_FILENO);
  if (previous_handler != nullptr) previous_handler();
  std::abort();
}

}  // namespace

void InstallTerminateReport() {
  static std::once_flag once;
  std::call_once(once, [] { previous_handler = std::set_terminate(ReportThenTerminate); });
}

}  // namespace bps
