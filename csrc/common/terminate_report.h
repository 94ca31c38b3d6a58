// Says where a std::terminate came from before the process aborts.
//
// "terminate called without an active exception" alone does not say which
// thread died or why (a joinable std::thread destroyed, a forced unwind
// through a noexcept frame when Python ends a daemon thread at exit). The
// handler prints the thread's name and a native backtrace to stderr, then
// hands over to the handler it replaced (which prints the usual line and
// aborts).
#pragma once

namespace bps {

// Idempotent; installed once per process by the first engine Init.
void InstallTerminateReport();

}  // namespace bps
