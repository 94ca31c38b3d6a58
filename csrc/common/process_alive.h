// Whether a process still runs: the local reducer watches its peers' pids,
// the engine's watchdog reports them.
#pragma once

namespace bps {

// False once `pid` exited, including a zombie its launcher has not reaped.
bool ProcessAlive(int pid);

}  // namespace bps
