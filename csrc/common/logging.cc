#include "common/logging.h"

#include <cstdint>
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

namespace {

// Length of the valid UTF-8 sequence starting at s[i] (2-4), or 0.
size_t Utf8SequenceLength(const std::string& s, size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  size_t n = 0;
  uint32_t min = 0, cp = 0;
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2, min = 0x80, cp = c & 0x1f;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3, min = 0x800, cp = c & 0x0f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4, min = 0x10000, cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    const unsigned char d = static_cast<unsigned char>(s[i + k]);
    if ((d & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (d & 0x3f);
  }
  // Overlong forms, surrogates and code points past U+10FFFF are not text;
  // C1 controls (U+0080-U+009F) act as terminal escapes.
  if (cp < min || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff || (cp >= 0x80 && cp <= 0x9f)) return 0;
  return n;
}

}  // namespace

std::string Printable(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    if (size_t n = c >= 0x80 ? Utf8SequenceLength(text, i) : 0) {
      out.append(text, i, n);
      i += n;
      continue;
    }
    char hex[5];
    snprintf(hex, sizeof(hex), "\\x%02x", c);
    out += hex;
    ++i;
  }
  return out;
}

}  // namespace bps
