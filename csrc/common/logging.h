// Minimal leveled logging to stderr, prefixed with the process's role/rank.
// Level from BYTEPS_LOG_LEVEL (TRACE, DEBUG, INFO, WARNING, ERROR; default WARNING).
#pragma once
#include <sstream>
#include <string>

namespace bps {

enum class LogLevel { kTrace = 0, kDebug = 1, kInfo = 2, kWarning = 3, kError = 4 };

LogLevel CurrentLogLevel();
void SetLogLevel(LogLevel level);
void SetLogIdentity(const std::string& identity);  // e.g. "worker 3"
void EmitLog(LogLevel level, const char* file, int line, const std::string& text);

class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line) : level_(level), file_(file), line_(line) {}
  ~LogMessage() { EmitLog(level_, file_, line_, stream_.str()); }
  std::ostringstream& stream() { return stream_; }

 private:
  LogLevel level_;
  const char* file_;
  int line_;
  std::ostringstream stream_;
};

}  // namespace bps

#define BPS_LOG(LEVEL)                                                 \
  if (::bps::LogLevel::k##LEVEL < ::bps::CurrentLogLevel()) {          \
  } else                                                               \
    ::bps::LogMessage(::bps::LogLevel::k##LEVEL, __FILE__, __LINE__).stream()
