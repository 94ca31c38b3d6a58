#include "common/process_alive.h"

#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace bps {

namespace {
// The state letter of /proc/<pid>/stat, or 0 when it cannot be read.
char ProcessStateLetter(int pid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE* f = fopen(path, "r");
  if (!f) return 0;
  char buf[512] = {0};
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  const char* close_paren = strrchr(buf, ')');  // comm may contain spaces
  if (n == 0 || !close_paren || close_paren[1] == '\0') return 0;
  return close_paren[2];
}
}  // namespace

// A dead child stays a zombie until its launcher reaps it (torchrun may take
// seconds): kill(pid, 0) still succeeds then, so read its state too.
bool ProcessAlive(int pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  const char state = ProcessStateLetter(pid);  // 0: no procfs, trust kill()
  return state != 'Z' && state != 'X';
}

bool ProcessStopped(int pid) {
  const char state = ProcessStateLetter(pid);
  return state == 'T' || state == 't';
}

}  // namespace bps
