#include "transport/tcp/handshake_acceptor.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <algorithm>
#include <list>
#include <map>
#include <utility>
#include <vector>
#include <mutex>

#include "common/logging.h"
#include "common/net_util.h"

namespace bps {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kTickMs = 100;  // deadline resolution; also how long a listen pause lasts

}  // namespace

struct HandshakeSession;

// Refused and dropped connections, logged at a bounded rate: the first of an
// interval in full (a misconfigured peer of the job is named at once), the
// rest counted by reason and source address and summarised in one line when
// the interval ends. A port scanner or a stranger looping on the port writes
// at most two lines per interval, whatever it sends.
class RefusalLog {
 public:
  static constexpr std::chrono::seconds kInterval{10};
  static constexpr size_t kMaxSources = 1024;  // distinct addresses counted per interval

  // Logs `line` now, or counts it for the summary.
  void Note(const std::string& owner, const std::string& address, const std::string& why, const std::string& line) {
    const auto now = Clock::now();
    if (!in_interval_ || now - started_ >= kInterval) {
      Summarise(owner);
      in_interval_ = true;
      started_ = now;
      BPS_LOG(Warning) << owner << ": " << line << " (further refusals are summarised every "
                       << kInterval.count() << " s)";
      return;
    }
    ++counted_;
    ++by_reason_[KindOf(why)];
    std::string host = address.substr(0, address.rfind(':'));  // a scanner changes ports
    if (host.empty()) host = "no address";
    if (by_source_.size() < kMaxSources || by_source_.count(host)) {
      ++by_source_[host];
    } else {
      ++by_source_["other addresses"];
    }
  }
  // Says what the current interval counted (the owner stops).
  void Flush(const std::string& owner) {
    Summarise(owner);
    in_interval_ = false;
  }
  // From the loop's tick: ends an interval that is over.
  void Tick(const std::string& owner) {
    if (in_interval_ && Clock::now() - started_ >= kInterval) {
      Summarise(owner);
      in_interval_ = false;  // the next refusal is logged in full again
    }
  }

 private:
  // Handshake failures by cause, in words a reader acts on.
  static std::string KindOf(const std::string& why) {
    static const std::pair<const char*, const char*> kKinds[] = {
        {"bad magic", "not byteps-native (bad magic)"},
        {"wire version", "another wire version"},
        {"malformed", "malformed hello"},
        {"BYTEPS_JOB_TOKEN", "without this job's BYTEPS_JOB_TOKEN"},
        {"not completed within", "handshake not completed in time"},
        {"closed the connection", "hung up mid-handshake"},
        {"connection lost", "hung up mid-handshake"},
        {"handshakes pending", "evicted: too many handshakes pending"},
        {"file descriptors", "out of file descriptors"},
        {"cannot accept", "out of file descriptors"},
    };
    for (const auto& k : kKinds) {
      if (why.find(k.first) != std::string::npos) return k.second;
    }
    return "other";
  }
  static std::string Top(const std::map<std::string, int>& counts, size_t n) {
    std::vector<std::pair<int, std::string>> sorted;
    for (const auto& kv : counts) sorted.emplace_back(-kv.second, kv.first);
    std::sort(sorted.begin(), sorted.end());
    std::string out;
    for (size_t i = 0; i < sorted.size() && i < n; ++i) {
      out += (i ? ", " : "") + std::to_string(-sorted[i].first) + " " + sorted[i].second;
    }
    if (sorted.size() > n) out += ", ...";
    return out;
  }
  void Summarise(const std::string& owner) {
    if (counted_ == 0) return;
    BPS_LOG(Warning) << owner << ": " << counted_ << " more connections refused or dropped in the last "
                     << kInterval.count() << " s: " << Top(by_reason_, by_reason_.size())
                     << "; top sources: " << Top(by_source_, 3);
    counted_ = 0;
    by_reason_.clear();
    by_source_.clear();
  }

  bool in_interval_ = false;
  Clock::time_point started_{};
  int counted_ = 0;
  std::map<std::string, int> by_reason_;
  std::map<std::string, int> by_source_;
};

struct HandshakeAcceptor::Core : std::enable_shared_from_this<HandshakeAcceptor::Core> {
  EventLoop* loop;
  int listen_fd;
  std::string token;
  Options options;
  OnAdmitted on_admitted;

  std::mutex mu;  // held by every loop callback, and by on_admitted
  bool stopped = false;
  bool listening_paused = false;
  std::list<std::shared_ptr<HandshakeSession>> pending;  // oldest first
  std::atomic<int> pending_count{0};
  int timer_fd = -1;
  RefusalLog refusals;

  void OnAcceptable();
  void OnTick();
  void Advance(HandshakeSession* s, uint32_t events);
  void Drop(HandshakeSession* s, const std::string& why, bool quiet);
  void Finish(HandshakeSession* s);
  // A refused or dropped connection from `address` ("" when none was accepted).
  void NoteRefusal(const std::string& address, const std::string& why, const std::string& line);
};

struct HandshakeSession : Pollable {
  enum Phase { kSendChallenge, kReadHello, kSendAnswer };
  std::weak_ptr<HandshakeAcceptor::Core> core;
  int fd = -1;
  Clock::time_point started, deadline;
  PeerIdentity peer;
  HandshakeFrame challenge, hello, answer;
  Phase phase = kSendChallenge;
  size_t done_bytes = 0;  // of the frame of the current phase
  Status verdict;
  std::list<std::shared_ptr<HandshakeSession>>::iterator where;

  ~HandshakeSession() override {
    if (fd >= 0) close(fd);
  }
  void OnEvents(uint32_t events) override {
    if (auto c = core.lock()) c->Advance(this, events);
  }
};

namespace {

struct ListenWatcher : Pollable {
  std::weak_ptr<HandshakeAcceptor::Core> core;
  void OnEvents(uint32_t) override {
    if (auto c = core.lock()) c->OnAcceptable();
  }
};

struct TickWatcher : Pollable {
  std::weak_ptr<HandshakeAcceptor::Core> core;
  int fd = -1;
  ~TickWatcher() override {
    if (fd >= 0) close(fd);
  }
  void OnEvents(uint32_t) override {
    uint64_t expirations;
    (void)!read(fd, &expirations, sizeof(expirations));
    if (auto c = core.lock()) c->OnTick();
  }
};

// Moves bytes of the current frame; true once it is complete. *st is set on
// a broken or closed socket; EAGAIN leaves both false/OK (wait for the loop).
bool Transfer(HandshakeSession* s, bool sending, Status* st) {
  char* frame = reinterpret_cast<char*>(sending ? (s->phase == HandshakeSession::kSendChallenge ? &s->challenge
                                                                                                  : &s->answer)
                                                : &s->hello);
  while (s->done_bytes < sizeof(HandshakeFrame)) {
    ssize_t n = sending ? send(s->fd, frame + s->done_bytes, sizeof(HandshakeFrame) - s->done_bytes,
                               MSG_NOSIGNAL | MSG_DONTWAIT)
                        : recv(s->fd, frame + s->done_bytes, sizeof(HandshakeFrame) - s->done_bytes, MSG_DONTWAIT);
    if (n > 0) {
      s->done_bytes += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
    *st = Status::PeerFailure(n == 0 ? "closed the connection during the handshake"
                                     : std::string("connection lost during the handshake: ") + strerror(errno));
    return false;
  }
  return true;
}

}  // namespace

void HandshakeAcceptor::Core::NoteRefusal(const std::string& address, const std::string& why,
                                          const std::string& line) {
  refusals.Note(options.owner, address, why, line);
}

void HandshakeAcceptor::Core::Drop(HandshakeSession* s, const std::string& why, bool quiet) {
  if (!quiet) NoteRefusal(s->peer.address, why, "dropped connection from " + s->peer.address + ": " + why);
  auto keep = *s->where;  // the session may be the caller of Advance
  pending.erase(s->where);
  pending_count = static_cast<int>(pending.size());
  loop->Unregister(s->fd);  // on the loop thread: destroyed after this callback
}

void HandshakeAcceptor::Core::Finish(HandshakeSession* s) {
  auto keep = *s->where;
  pending.erase(s->where);
  pending_count = static_cast<int>(pending.size());
  loop->Unregister(s->fd);
  if (!s->verdict.ok()) {
    NoteRefusal(s->peer.address, s->verdict.message(),
                "rejected connection from " + s->peer.address + ": " + s->verdict.message());
    return;  // the session closes the socket when it goes
  }
  int fd = s->fd;
  s->fd = -1;  // ownership passes to the owner
  on_admitted(fd, s->peer);
}

void HandshakeAcceptor::Core::Advance(HandshakeSession* s, uint32_t events) {
  std::lock_guard<std::mutex> lock(mu);
  if (stopped || s->fd < 0) return;
  (void)events;  // errors and hang-ups show up as failed send/recv
  Status st;
  while (st.ok()) {
    if (s->phase == HandshakeSession::kSendChallenge) {
      if (!Transfer(s, true, &st)) break;
      s->phase = HandshakeSession::kReadHello;
      s->done_bytes = 0;
      loop->Modify(s->fd, EPOLLIN | EPOLLRDHUP);
    } else if (s->phase == HandshakeSession::kReadHello) {
      if (!Transfer(s, false, &st)) break;
      s->verdict = JudgeHello(token, s->challenge, s->hello, &s->answer, &s->peer);
      s->phase = HandshakeSession::kSendAnswer;
      s->done_bytes = 0;
      loop->Modify(s->fd, EPOLLOUT);
    } else {
      if (!Transfer(s, true, &st)) break;
      Finish(s);
      return;
    }
  }
  if (!st.ok()) {
    // A rejected stranger that hangs up before reading our answer is still
    // rejected: say why, not that it hung up.
    Drop(s, s->verdict.ok() ? st.message() : s->verdict.message(), false);
  }
}

void HandshakeAcceptor::Core::OnAcceptable() {
  std::lock_guard<std::mutex> lock(mu);
  if (stopped || listening_paused) return;
  for (int accepted = 0; accepted < 64; ++accepted) {
    int fd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        if (!pending.empty()) {
          Drop(pending.front().get(), "out of file descriptors; the oldest pending handshake makes room", false);
          continue;
        }
        // Nothing of ours to free: stop listening for a tick instead of
        // waking on the same readable socket forever.
        const std::string why = std::string("cannot accept connections: ") + strerror(errno) +
                                "; raise the open-files limit (ulimit -n)";
        NoteRefusal("", why, why);
        listening_paused = true;
        loop->Modify(listen_fd, 0);
        return;
      }
      NoteRefusal("", std::string("accept failed: ") + strerror(errno),
                  std::string("accept failed: ") + strerror(errno));
      return;
    }
    if (static_cast<int>(pending.size()) >= options.max_pending) {
      Drop(pending.front().get(),
           "more than " + std::to_string(options.max_pending) + " handshakes pending; the oldest makes room", false);
    }
    auto s = std::make_shared<HandshakeSession>();
    s->core = shared_from_this();
    s->fd = fd;
    s->peer.address = PeerAddressOf(fd);
    s->started = Clock::now();
    s->deadline = s->started + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(options.deadline_seconds));
    MakeChallenge(&s->challenge);
    pending.push_back(s);
    s->where = std::prev(pending.end());
    pending_count = static_cast<int>(pending.size());
    loop->Register(fd, EPOLLOUT, s);  // the challenge goes first
  }
}

void HandshakeAcceptor::Core::OnTick() {
  std::lock_guard<std::mutex> lock(mu);
  if (stopped) return;
  refusals.Tick(options.owner);
  if (listening_paused) {
    listening_paused = false;
    loop->Modify(listen_fd, EPOLLIN);
  }
  auto now = Clock::now();
  // Oldest first, so the expired ones are at the front.
  while (!pending.empty() && pending.front()->deadline <= now) {
    HandshakeSession* s = pending.front().get();
    std::string where = s->phase == HandshakeSession::kSendChallenge ? "it did not read the challenge"
                        : s->phase == HandshakeSession::kReadHello
                            ? "it sent " + std::to_string(s->done_bytes) + " of the hello's " +
                                  std::to_string(sizeof(HandshakeFrame)) + " bytes"
                            : "it did not read the answer";
    Drop(s, "handshake not completed within " + FormatSeconds(options.deadline_seconds) + " s (" + where + ")",
         false);
  }
}

HandshakeAcceptor::HandshakeAcceptor(EventLoop* loop, int listen_fd, std::string token, Options options,
                                     OnAdmitted on_admitted)
    : core_(std::make_shared<Core>()) {
  core_->loop = loop;
  core_->listen_fd = listen_fd;
  core_->token = std::move(token);
  core_->options = std::move(options);
  core_->on_admitted = std::move(on_admitted);
}

HandshakeAcceptor::~HandshakeAcceptor() { Stop(); }

void HandshakeAcceptor::Start() {
  SetNonBlocking(core_->listen_fd, true);
  auto listen = std::make_shared<ListenWatcher>();
  listen->core = core_;
  auto tick = std::make_shared<TickWatcher>();
  tick->core = core_;
  tick->fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  itimerspec period{};
  period.it_interval.tv_nsec = kTickMs * 1000000L;
  period.it_value.tv_nsec = kTickMs * 1000000L;
  timerfd_settime(tick->fd, 0, &period, nullptr);
  core_->timer_fd = tick->fd;
  core_->loop->Register(tick->fd, EPOLLIN, tick);
  core_->loop->Register(core_->listen_fd, EPOLLIN, listen);
}

void HandshakeAcceptor::Stop() {
  std::list<std::shared_ptr<HandshakeSession>> pending;
  {
    // Taken while no loop callback runs (they hold mu), so none starts after.
    std::lock_guard<std::mutex> lock(core_->mu);
    if (core_->stopped) return;
    core_->stopped = true;
    core_->refusals.Flush(core_->options.owner);
    pending.swap(core_->pending);
    core_->pending_count = 0;
  }
  core_->loop->Unregister(core_->listen_fd);
  if (core_->timer_fd >= 0) core_->loop->Unregister(core_->timer_fd);
  for (auto& s : pending) core_->loop->Unregister(s->fd);  // sockets close as the sessions go
}

int HandshakeAcceptor::pending() const { return core_->pending_count.load(); }

}  // namespace bps
