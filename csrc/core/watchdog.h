// Liveness checks used by the engine's watchdog (core/watchdog.cc).
#pragma once

namespace bps {

// False once `pid` exited, including a zombie its launcher has not reaped.
bool ProcessAlive(int pid);

}  // namespace bps
