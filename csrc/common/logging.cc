#include "common/logging.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>

#include <sys/time.h>
#include <unistd.h>

namespace bps {
namespace {

LogLevel ParseLevel(const char* text) {
  if (text == nullptr) return LogLevel::kWarning;
  std::string v(text);
  for (auto& c : v) c = static_cast<char>(toupper(c));
  if (v == "TRACE") return LogLevel::kTrace;
  if (v == "DEBUG") return LogLevel::kDebug;
  if (v == "INFO") return LogLevel::kInfo;
  if (v == "ERROR") return LogLevel::kError;
  return LogLevel::kWarning;
}

LogLevel g_level = ParseLevel(getenv("BYTEPS_LOG_LEVEL"));
std::mutex g_mu;
std::string g_identity = "byteps";

const char* LevelName(LogLevel l) {
  switch (l) {
    case LogLevel::kTrace: return "TRACE";
    case LogLevel::kDebug: return "DEBUG";
    case LogLevel::kInfo: return "INFO";
    case LogLevel::kWarning: return "WARNING";
    default: return "ERROR";
  }
}

}  // namespace

LogLevel CurrentLogLevel() { return g_level; }
void SetLogLevel(LogLevel level) { g_level = level; }
void SetLogIdentity(const std::string& identity) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_identity = identity;
}

void EmitLog(LogLevel level, const char* file, int line, const std::string& text) {
  timeval tv;
  gettimeofday(&tv, nullptr);
  tm local;
  localtime_r(&tv.tv_sec, &local);
  char when[32];
  strftime(when, sizeof(when), "%H:%M:%S", &local);
  const char* base = strrchr(file, '/');
  std::lock_guard<std::mutex> lock(g_mu);
  fprintf(stderr, "[%s.%03ld %s %s pid %d %s:%d] %s\n", when, static_cast<long>(tv.tv_usec / 1000),
          LevelName(level), g_identity.c_str(), static_cast<int>(getpid()), base ? base + 1 : file, line,
          text.c_str());
}

}  // namespace bps
