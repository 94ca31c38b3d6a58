#include "common/net_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <algorithm>
#include <cstring>
#include <thread>

#include "common/config.h"
#include "common/logging.h"

namespace bps {

Status ParseHostPort(const std::string& text, HostPort* out) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos) return Status::Invalid("address '" + text + "' is not host:port");
  out->host = text.substr(0, colon);
  out->port = atoi(text.c_str() + colon + 1);
  if (out->port <= 0 || out->port > 65535) return Status::Invalid("address '" + text + "' has an invalid port");
  return Status::OK();
}

Status ResolveIPv4(const std::string& host, sockaddr_in* out) {
  memset(out, 0, sizeof(*out));
  out->sin_family = AF_INET;
  if (inet_pton(AF_INET, host.c_str(), &out->sin_addr) == 1) return Status::OK();
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    return Status::Invalid("cannot resolve host '" + host + "': " + gai_strerror(rc));
  }
  out->sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
  freeaddrinfo(res);
  return Status::OK();
}

Status InterfaceAddress(const std::string& interface, std::string* address) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return Status::Internal(std::string("getifaddrs: ") + strerror(errno));
  std::string found;
  for (ifaddrs* it = list; it; it = it->ifa_next) {
    if (it->ifa_addr && it->ifa_addr->sa_family == AF_INET && interface == it->ifa_name) {
      char buf[INET_ADDRSTRLEN];
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(it->ifa_addr)->sin_addr, buf, sizeof(buf));
      found = buf;
      break;
    }
  }
  std::string existing;
  for (ifaddrs* it = list; it; it = it->ifa_next) {
    if (!it->ifa_addr || it->ifa_addr->sa_family != AF_INET) continue;
    char buf[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(it->ifa_addr)->sin_addr, buf, sizeof(buf));
    existing += (existing.empty() ? "" : ", ") + std::string(it->ifa_name) + " (" + buf + ")";
  }
  freeifaddrs(list);
  if (found.empty()) {
    return Status::Invalid("DMLC_INTERFACE='" + interface + "' has no IPv4 address on this host; interfaces here: " +
                           (existing.empty() ? std::string("none") : existing));
  }
  *address = found;
  return Status::OK();
}

void SetNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

void SetLivenessProbes(int fd, double timeout_seconds) {
  const int t = std::max(3, static_cast<int>(timeout_seconds));
  int on = 1, idle = std::max(1, t / 3), interval = std::max(1, t / 9), count = 3;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
  unsigned int user_timeout_ms = static_cast<unsigned int>(t) * 1000u;
  setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof(user_timeout_ms));
}

void SetNonBlocking(int fd, bool on) {
  int flags = fcntl(fd, F_GETFL, 0);
  fcntl(fd, F_SETFL, on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK));
}

namespace {

// What a refused or unanswered connect means for the peer a member waits
// for: a port where nothing listens belongs to a peer that has not started
// or is already gone (a job that failed or finished ends its scheduler);
// silence means the host or the route is the problem.
std::string WhyUnreachable(int err) {
  if (err == ECONNREFUSED) {
    return "nothing listens there (Connection refused): it has not started yet, or it is already gone (a job that "
           "failed or finished ends its scheduler; see its log)";
  }
  if (err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH) {
    return std::string("the host does not answer (") + strerror(err) + "): check the address and the network";
  }
  return strerror(err);
}
}  // namespace

Status ConnectWithRetry(const HostPort& target, double timeout_seconds, int* fd_out, const char* waiting_for,
                        const std::function<bool(std::string* why)>& give_up) {
  sockaddr_in addr;
  BPS_RETURN_IF_ERROR(ResolveIPv4(target.host, &addr));
  addr.sin_port = htons(static_cast<uint16_t>(target.port));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  std::string last_error;
  int last_errno = 0;
  int delay_ms = 10;
  const auto started = std::chrono::steady_clock::now();
  // The first note comes after a second: a peer starting beside us is there
  // by then, and a member whose peer is gone learns it at once, not at the end.
  auto next_note = started + std::chrono::seconds(1);
  while (true) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return Status::Internal(std::string("socket: ") + strerror(errno));
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
      SetNoDelay(fd);
      *fd_out = fd;
      return Status::OK();
    }
    last_errno = errno;
    last_error = strerror(errno);
    close(fd);
    if (std::chrono::steady_clock::now() >= deadline) {
      const std::string waited = std::to_string(static_cast<int>(timeout_seconds)) + " s";
      if (waiting_for) {
        return Status::PeerFailure(std::string(waiting_for) + " at " + target.ToString() + " is not reachable: " +
                                   WhyUnreachable(last_errno) + "; gave up after " + waited +
                                   " (BYTEPS_RENDEZVOUS_TIMEOUT); check DMLC_PS_ROOT_URI and DMLC_PS_ROOT_PORT");
      }
      return Status::PeerFailure("cannot connect to " + target.ToString() + " within " + waited + ": " + last_error);
    }
    std::string why;
    if (give_up && give_up(&why)) {
      return Status::PeerFailure(why + " (while connecting to " + target.ToString() + ": " + last_error + ")");
    }
    if (waiting_for && std::chrono::steady_clock::now() >= next_note) {
      BPS_LOG(Warning) << waiting_for << " at " << target.ToString() << " is not reachable yet: "
                       << WhyUnreachable(last_errno) << "; still trying " << WaitProgress(started, timeout_seconds);
      next_note += std::chrono::seconds(kWaitNoteSeconds);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    delay_ms = std::min(delay_ms * 2, 500);
  }
}

std::string WaitProgress(std::chrono::steady_clock::time_point started, double limit_seconds) {
  const auto waited =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started).count();
  if (limit_seconds < 0) return "(" + std::to_string(waited) + " s)";
  return "(" + std::to_string(waited) + " s of " + FormatSeconds(limit_seconds) + " s, BYTEPS_RENDEZVOUS_TIMEOUT)";
}

Status ListenOn(const std::string& host, int port, int backlog, int* fd_out, int* bound_port) {
  sockaddr_in addr;
  if (host.empty() || host == "0.0.0.0") {
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
  } else {
    BPS_RETURN_IF_ERROR(ResolveIPv4(host, &addr));
  }
  addr.sin_port = htons(static_cast<uint16_t>(port));
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Internal(std::string("socket: ") + strerror(errno));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    std::string err = strerror(errno);
    close(fd);
    return Status::Invalid("cannot listen on " + host + ":" + std::to_string(port) + ": " + err);
  }
  if (listen(fd, backlog) != 0) {
    std::string err = strerror(errno);
    close(fd);
    return Status::Internal("listen: " + err);
  }
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  *bound_port = ntohs(addr.sin_port);
  *fd_out = fd;
  return Status::OK();
}

static std::string FormatAddress(const sockaddr_in& addr, bool with_port) {
  char buf[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &addr.sin_addr, buf, sizeof(buf));
  return with_port ? std::string(buf) + ":" + std::to_string(ntohs(addr.sin_port)) : std::string(buf);
}

std::string LocalAddressOf(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "";
  return FormatAddress(addr, false);
}

std::string PeerAddressOf(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "?";
  return FormatAddress(addr, true);
}

static Status WaitFd(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  int rc = poll(&p, 1, timeout_ms);
  if (rc == 0) return Status::Timeout("no data within " + std::to_string(timeout_ms) + " ms");
  if (rc < 0 && errno != EINTR) return Status::PeerFailure(std::string("poll: ") + strerror(errno));
  return Status::OK();
}

Status WriteFully(int fd, const void* data, size_t len, int timeout_ms) {
  const char* p = static_cast<const char*>(data);
  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      BPS_RETURN_IF_ERROR(WaitFd(fd, POLLOUT, timeout_ms));
      continue;
    }
    return Status::PeerFailure(std::string("connection lost while sending: ") + (n == 0 ? "closed" : strerror(errno)));
  }
  return Status::OK();
}

Status ReadFully(int fd, void* data, size_t len, int timeout_ms) {
  char* p = static_cast<char*>(data);
  while (len > 0) {
    ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return Status::PeerFailure("connection closed by peer");
    if (errno == EAGAIN || errno == EINTR) {
      BPS_RETURN_IF_ERROR(WaitFd(fd, POLLIN, timeout_ms));
      continue;
    }
    return Status::PeerFailure(std::string("connection lost while receiving: ") + strerror(errno));
  }
  return Status::OK();
}

}  // namespace bps

namespace bps {
std::string RouteAddressTo(const std::string& host) {
  sockaddr_in addr;
  if (!ResolveIPv4(host, &addr).ok()) return "";
  addr.sin_port = htons(9);
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) out = LocalAddressOf(fd);
  close(fd);
  return out;
}
}  // namespace bps
