// Whether a process still runs: the local reducer watches its peers' pids,
// the engine's watchdog reports them.
#pragma once

namespace bps {

// False once `pid` exited, including a zombie its launcher has not reaped.
bool ProcessAlive(int pid);

// True while `pid` is stopped (SIGSTOP, SIGTSTP) or held by a debugger: alive,
// yet it will do nothing. Only used to name a wait's cause, never to fail one:
// a process stopped for a moment (job control, a debugger) goes on afterwards.
bool ProcessStopped(int pid);

}  // namespace bps
