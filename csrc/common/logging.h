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

// Text a peer supplied (an error frame, a handshake's reason, a host name
// from the store), made safe for one log line: control bytes, bytes that are
// not valid UTF-8 and DEL become \xNN, so a peer can neither forge log lines
// (newlines) nor send terminal escapes. Printable text, UTF-8 names included,
// is unchanged, and so is already escaped text: a message relayed through
// several processes is escaped once, whoever escapes it.
std::string Printable(const std::string& text);

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
