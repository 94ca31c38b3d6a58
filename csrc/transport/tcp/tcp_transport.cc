// The TCP implementation of transport.h over the FramedSocket and a pool of
// epoll EventLoops (IoThreadPool): every connection lives on one loop, and
// connections are spread over the loops, so several connections to a server
// are carried by several cores. Posted receives are matched by (key, round)
// in OnHeader, which hands the socket the posted buffer, so payloads land in
// place with no copy; cancellation rides on FramedSocket::CancelReceive.
// Listeners admit peers in the background through the HandshakeAcceptor, on
// the pool's first loop.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <thread>
#include <mutex>
#include <vector>

#include "common/job_verdict.h"
#include "common/logging.h"
#include "common/net_util.h"
#include "transport/tcp/framed_socket.h"
#include "transport/tcp/handshake.h"
#include "transport/tcp/handshake_acceptor.h"
#include "transport/tcp/tcp_transport.h"

namespace bps {
namespace transport {
namespace {

constexpr const char* kNoFrames = "Handlers::frames is not set: say which protocol the connection speaks";

struct PostedReceive {
  uint32_t round = 0;
  void* dst = nullptr;
  uint64_t bytes = 0;
  Callback done;
  bool receiving = false;  // its header arrived: the payload is landing in dst
  bool cancelled = false;  // CancelReceive asked the connection to drop the rest
};

// What every data connection of the transport sets on its socket.
SocketTuning TuningOf(const TransportOptions& o) {
  return SocketTuning{o.receive_low_water, o.congestion, o.socket_buffer_bytes};
}

// One peer. Keeps itself alive until its connection reported closed, since
// the connection calls back into it until then.
class TcpPeer final : public transport::Connection, public FramedSocketHandler,
                      public std::enable_shared_from_this<TcpPeer> {
 public:
  // `loop`: the I/O thread (and its index) that will carry the connection,
  // known before anyone is told of the connection (io_thread()).
  TcpPeer(std::string peer_name, std::pair<EventLoop*, int> loop)
      : peer_name_(std::move(peer_name)), loop_(loop.first), io_thread_(loop.second) {}

  // Before Start only.
  void SetHandlers(Handlers handlers) {
    handlers_ = std::move(handlers);
    rules_ = handlers_.frames;
  }
  ~TcpPeer() override {
    // Frames of an admission that was refused: never written.
    for (auto& m : early_) {
      if (m.on_sent) m.on_sent(Status::PeerFailure("connection to " + peer_name_ + " refused before it started"));
    }
  }

  void Start(int fd, const SocketTuning& tuning) {
    self_ = shared_from_this();
    conn_ = std::make_shared<FramedSocket>(fd, loop_, this, peer_name_, rules_, tuning);
    conn_->Start();
    // What the owner sent while admitting it (a server's abort cause) goes
    // first; from here on Send goes straight to the socket.
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& m : early_) conn_->Send(std::move(m));
    early_.clear();
    started_.store(true, std::memory_order_release);
  }

  void Send(const FrameHeader& header, const void* payload, Callback done) override {
    OutFrame m;
    m.header = header;
    m.payload = payload;
    m.on_sent = std::move(done);
    SendFrame(std::move(m));
  }

  void SendOwned(const FrameHeader& header, std::shared_ptr<void> owner, const void* payload) override {
    OutFrame m;
    m.header = header;
    m.payload = payload;
    m.keepalive = std::move(owner);
    SendFrame(std::move(m));
  }

  void PostReceive(uint64_t key, uint32_t round, void* dst, uint64_t bytes, Callback done) override {
    Status closed;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!closed_.ok()) {
        closed = closed_;
      } else {
        auto posted = std::make_shared<PostedReceive>();
        posted->round = round;
        posted->dst = dst;
        posted->bytes = bytes;
        posted->done = std::move(done);
        posted_[key] = posted;
        return;
      }
    }
    done(closed);
  }

  void CancelReceive(uint64_t key) override {
    std::shared_ptr<PostedReceive> posted;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = posted_.find(key);
      if (it == posted_.end() || it->second->cancelled) return;
      posted = it->second;
      if (!posted->receiving) {
        posted_.erase(it);
      } else {
        posted->cancelled = true;  // stays until the connection confirms
      }
    }
    const Status cancelled = Status::Shutdown("receive cancelled");
    if (!posted->receiving) {
      posted->done(cancelled);
      return;
    }
    auto self = shared_from_this();
    conn_->CancelReceive(posted->dst, [self, key, posted, cancelled] {
      bool mine = false;
      {
        std::lock_guard<std::mutex> lock(self->mu_);
        auto it = self->posted_.find(key);
        if (it != self->posted_.end() && it->second == posted) {
          self->posted_.erase(it);
          mine = true;
        }
      }
      if (mine) posted->done(cancelled);  // else OnClosed completed it
    });
  }

  void Close(const Status& reason) override {
    if (conn_) conn_->Close(reason);
  }
  bool closed() {
    std::lock_guard<std::mutex> lock(mu_);
    return !closed_.ok();
  }
  const std::string& peer_name() const override { return peer_name_; }
  int io_thread() const override { return io_thread_; }

  void* OnHeader(FramedSocket*, const FrameHeader& h, Status* reject) override {
    std::shared_ptr<PostedReceive> mismatched;
    // Only data frames fill posted receives; text and signal frames (errors,
    // bye) always reach the unexpected handler, whatever key they carry.
    const bool data = KindOf(h, *rules_) == FrameKind::kData;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = data ? posted_.find(h.key) : posted_.end();
      if (it != posted_.end() && !it->second->cancelled && !it->second->receiving && it->second->round == h.round) {
        if (it->second->bytes == h.payload_bytes) {
          it->second->receiving = true;
          return it->second->dst;
        }
        mismatched = it->second;
        posted_.erase(it);
      }
    }
    if (mismatched) {
      mismatched->done(Status::PeerFailure(peer_name_ + " sent " + std::to_string(h.payload_bytes) +
                                           " bytes for a receive of " + std::to_string(mismatched->bytes)));
      return FramedSocket::DiscardPayload();
    }
    if (data && handlers_.destination) {
      // The receiver's own buffer (on this loop thread, so rx_chosen_ needs no lock).
      void* dst = handlers_.destination(this, h, reject);
      if (!reject->ok()) return nullptr;
      if (dst != nullptr) {
        rx_chosen_ = dst;
        return dst;
      }
    }
    // Unexpected: small payloads are buffered for the handler, large dropped.
    return h.payload_bytes <= kMaxErrorPayloadBytes ? nullptr : FramedSocket::DiscardPayload();
  }

  void OnMessage(FramedSocket*, const FrameHeader& h, void* payload) override {
    if (rx_chosen_ != nullptr && payload == rx_chosen_) {
      rx_chosen_ = nullptr;
      handlers_.arrived(this, h, payload);
      return;
    }
    std::shared_ptr<PostedReceive> done;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = posted_.find(h.key);
      if (it != posted_.end() && it->second->receiving && it->second->dst == payload && payload != nullptr) {
        if (it->second->cancelled) return;  // the cancel confirmation completes it
        done = it->second;
        posted_.erase(it);
      }
    }
    if (done) {
      done->done(Status::OK());
      return;
    }
    if (handlers_.unexpected) {
      std::string text(static_cast<const char*>(payload), payload ? h.payload_bytes : 0);
      // An error frame's text goes into statuses and logs: escaped here, once
      // for every consumer.
      if (KindOf(h, *rules_) == FrameKind::kText) text = Printable(text);
      handlers_.unexpected(this, h, text);
    }
  }

  void OnClosed(FramedSocket*, const Status& reason) override {
    std::map<uint64_t, std::shared_ptr<PostedReceive>> pending;
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = reason.ok() ? Status::Shutdown("connection closed") : reason;
      pending.swap(posted_);
    }
    for (auto& kv : pending) kv.second->done(closed_);
    if (handlers_.closed) handlers_.closed(this, closed_);
    self_.reset();  // may destroy this peer: last statement
  }

 private:
  Handlers handlers_;
  std::string peer_name_;
  const FrameRules* rules_ = nullptr;
  EventLoop* loop_;
  int io_thread_;
  void* rx_chosen_ = nullptr;  // the payload being received went where handlers_.destination chose
  // Admission (AdmitConnection) may send before Start: held until then.
  void SendFrame(OutFrame m) {
    if (!started_.load(std::memory_order_acquire)) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!started_.load(std::memory_order_relaxed)) {
        early_.push_back(std::move(m));
        return;
      }
    }
    conn_->Send(std::move(m));
  }

  std::shared_ptr<FramedSocket> conn_;
  std::shared_ptr<TcpPeer> self_;
  std::mutex mu_;
  std::atomic<bool> started_{false};
  std::vector<OutFrame> early_;  // under mu_, until started_
  Status closed_;
  std::map<uint64_t, std::shared_ptr<PostedReceive>> posted_;
};

// Every peer of one transport, so that destroying the transport closes them
// (each keeps itself alive until its connection reported closed).
class PeerRegistry {
 public:
  void Add(const std::shared_ptr<TcpPeer>& peer) {
    std::lock_guard<std::mutex> lock(mu_);
    peers_.push_back(peer);
  }
  // Closes every peer and waits (bounded) until each reported closed; the
  // event loop must still run.
  void CloseAll() {
    std::vector<std::shared_ptr<TcpPeer>> live;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& w : peers_) {
        if (auto p = w.lock()) live.push_back(p);
      }
      peers_.clear();
    }
    for (auto& p : live) p->Close(Status::Shutdown("transport shut down"));
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (auto& p : live) {
      while (!p->closed() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
  }

 private:
  std::mutex mu_;
  std::vector<std::weak_ptr<TcpPeer>> peers_;
};

// The I/O threads of one transport. A new connection gets a loop of its own
// while there are fewer than `limit`, then the loops are shared round-robin.
// Loops start lazily: a process with one connection keeps one thread.
class IoThreadPool {
 public:
  explicit IoThreadPool(int limit) : limit_(limit > 0 ? limit : DefaultIoThreads()) {}
  ~IoThreadPool() { StopAll(); }

  static int DefaultIoThreads() {
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    return std::max(1, std::min(16, cores / 2));
  }

  // Round-robin: the n-th connection gets loop n % limit (and its index).
  std::pair<EventLoop*, int> Next() {
    std::lock_guard<std::mutex> lock(mu_);
    const size_t index = next_++ % static_cast<size_t>(limit_);
    return {At(index), static_cast<int>(index)};
  }
  int limit() const { return limit_; }
  // The loop that runs a listener's handshakes (shared with the first connection).
  EventLoop* First() {
    std::lock_guard<std::mutex> lock(mu_);
    return At(0);
  }
  void StopAll() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& loop : loops_) loop->Stop();
  }
  int started() {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(loops_.size());
  }

 private:
  EventLoop* At(size_t index) {  // mu_ held
    while (loops_.size() <= index) {
      loops_.emplace_back(new EventLoop("transport-tcp-" + std::to_string(loops_.size())));
      loops_.back()->Start();
    }
    return loops_[index].get();
  }
  const int limit_;
  std::mutex mu_;
  std::vector<std::unique_ptr<EventLoop>> loops_;
  size_t next_ = 0;
};

// A blocking, authenticated socket for request/reply protocols (the store).
class TcpStream final : public Stream {
 public:
  explicit TcpStream(int fd) : fd_(fd) {}
  ~TcpStream() override { close(fd_); }
  Status Read(void* dst, size_t bytes, int timeout_ms) override { return ReadFully(fd_, dst, bytes, timeout_ms); }
  Status Write(const void* src, size_t bytes, int timeout_ms) override {
    return WriteFully(fd_, src, bytes, timeout_ms);
  }
  bool PeerHungUp() override {
    pollfd p{fd_, POLLIN | POLLRDHUP, 0};
    char probe;
    return poll(&p, 1, 0) > 0 && recv(fd_, &probe, 1, MSG_PEEK | MSG_DONTWAIT) <= 0;
  }
  void Shutdown() override { shutdown(fd_, SHUT_RDWR); }
  std::string local_address() const override { return LocalAddressOf(fd_); }

 private:
  const int fd_;
};

class TcpListener final : public Listener {
 public:
  TcpListener(int fd, std::string address, int port, const TransportOptions& options, IoThreadPool* loops,
              std::shared_ptr<PeerRegistry> registry)
      : fd_(fd), address_(std::move(address)), port_(port), options_(options), loops_(loops),
        registry_(std::move(registry)) {}
  ~TcpListener() override {
    StopAccepting();
    close(fd_);
  }
  std::string address() const override { return address_; }
  int port() const override { return port_; }

  Status Accept(double timeout_seconds, Handlers handlers, std::shared_ptr<Connection>* out) override {
    if (!handlers.frames) return Status::Invalid(kNoFrames);
    pollfd p{fd_, POLLIN, 0};
    int ready = poll(&p, 1, static_cast<int>(timeout_seconds * 1000));
    if (ready <= 0) return Status::Timeout("no peer connected to " + address_ + " within the timeout");
    int fd = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return Status::PeerFailure("accept on " + address_ + " failed");
    PeerIdentity peer;
    Status st = AcceptHandshake(fd, options_.auth.token, 10000, &peer);
    if (!st.ok()) {
      close(fd);
      return st;
    }
    SetLivenessProbes(fd, options_.liveness_seconds);
    auto conn = std::make_shared<TcpPeer>(peer.Describe(), loops_->Next());
    conn->SetHandlers(std::move(handlers));
    conn->Start(fd, TuningOf(options_));
    registry_->Add(conn);
    *out = conn;
    return Status::OK();
  }

  Status AcceptConnections(AcceptOptions options, AdmitConnection admit) override {
    return StartAcceptor(std::move(options), [this, admit](int fd, const PeerIdentity& peer) {
      auto conn = std::make_shared<TcpPeer>(peer.Describe(), loops_->Next());
      Handlers handlers;
      if (!admit(conn, peer, &handlers) || !handlers.frames) {
        close(fd);
        return;
      }
      conn->SetHandlers(std::move(handlers));
      conn->Start(fd, TuningOf(options_));
      registry_->Add(conn);
    });
  }

  Status AcceptStreams(AcceptOptions options, AdmitStream admit) override {
    return StartAcceptor(std::move(options), [admit](int fd, const PeerIdentity& peer) {
      admit(std::unique_ptr<Stream>(new TcpStream(fd)), peer);
    });
  }

  void StopAccepting() override {
    if (acceptor_) acceptor_->Stop();
  }
  int pending_handshakes() const override { return acceptor_ ? acceptor_->pending() : 0; }

 private:
  Status StartAcceptor(AcceptOptions options, std::function<void(int fd, const PeerIdentity& peer)> admitted) {
    if (acceptor_) return Status::Invalid("the listener on " + address_ + " already accepts");
    HandshakeAcceptor::Options o;
    o.deadline_seconds = options.deadline_seconds;
    o.max_pending = options.max_pending;
    o.owner = options.owner;
    const double liveness = options_.liveness_seconds;
    acceptor_.reset(new HandshakeAcceptor(loops_->First(), fd_, options_.auth.token, o,
                                          [liveness, admitted](int fd, const PeerIdentity& peer) {
                                            // The connection stays open for the job: its death must show.
                                            SetLivenessProbes(fd, liveness);
                                            admitted(fd, peer);
                                          }));
    acceptor_->Start();
    return Status::OK();
  }

  int fd_;
  std::string address_;
  int port_;
  std::unique_ptr<HandshakeAcceptor> acceptor_;
  TransportOptions options_;
  IoThreadPool* loops_;
  std::shared_ptr<PeerRegistry> registry_;
};

class TcpTransport final : public Transport {
 public:
  explicit TcpTransport(const TransportOptions& options) : options_(options), loops_(options.io_threads) {}
  ~TcpTransport() override {
    registry_->CloseAll();  // every loop still runs: each connection reports closed on its own
    loops_.StopAll();
  }
  const char* name() const override { return "tcp"; }
  int io_threads() const override { return loops_.limit(); }

  Status Listen(const std::string& host, int port, std::unique_ptr<Listener>* out) override {
    int fd = -1, bound = 0;
    BPS_RETURN_IF_ERROR(ListenOn(host, port, 1024, &fd, &bound));
    out->reset(new TcpListener(fd, host + ":" + std::to_string(bound), bound, options_, &loops_, registry_));
    return Status::OK();
  }

  Status Connect(const std::string& address, const std::string& peer_name, double timeout_seconds,
                 Handlers handlers, std::shared_ptr<Connection>* out) override {
    if (!handlers.frames) return Status::Invalid(kNoFrames);
    HostPort hp;
    BPS_RETURN_IF_ERROR(ParseHostPort(address, &hp));
    int fd = -1;
    // A server that left because the job was aborted never comes back:
    // stop retrying as soon as this process learned the verdict.
    const std::string token = options_.auth.token;
    auto aborted = [token](std::string* why) {
      if (!JobAborted(token, why)) return false;
      *why = "job aborted: " + *why;
      return true;
    };
    BPS_RETURN_IF_ERROR(ConnectWithRetry(hp, timeout_seconds, &fd, nullptr, aborted).WithContext(peer_name));
    SetLivenessProbes(fd, options_.liveness_seconds);
    Status st = ConnectHandshake(fd, options_.auth.token, options_.auth.role, options_.auth.rank, 10000);
    if (!st.ok()) {
      close(fd);
      return st.WithContext(peer_name);
    }
    auto conn = std::make_shared<TcpPeer>(peer_name, loops_.Next());
    conn->SetHandlers(std::move(handlers));
    conn->Start(fd, TuningOf(options_));
    registry_->Add(conn);
    *out = conn;
    return Status::OK();
  }

  Status ConnectStream(const std::string& address, const std::string& peer_name, double timeout_seconds,
                       std::unique_ptr<Stream>* out) override {
    HostPort hp;
    BPS_RETURN_IF_ERROR(ParseHostPort(address, &hp));
    int fd = -1;
    const std::string waiting_for = "the " + peer_name;
    BPS_RETURN_IF_ERROR(ConnectWithRetry(hp, timeout_seconds, &fd, waiting_for.c_str()).WithContext(peer_name));
    // The connection stays open for the job: its death must show.
    SetLivenessProbes(fd, options_.liveness_seconds);
    Status st = ConnectHandshake(fd, options_.auth.token, options_.auth.role, options_.auth.rank, 10000);
    if (!st.ok()) {
      close(fd);
      return st.WithContext(peer_name + " " + address);
    }
    out->reset(new TcpStream(fd));
    return Status::OK();
  }

  void SetIdentityRank(int32_t rank) override { options_.auth.rank = rank; }

  Status RegisterMemory(void* data, size_t bytes, MemoryRegion* out) override {
    out->data = data;  // TCP reads and writes any memory
    out->bytes = bytes;
    out->registration.reset();
    return Status::OK();
  }

 private:
  TransportOptions options_;
  IoThreadPool loops_;
  std::shared_ptr<PeerRegistry> registry_ = std::make_shared<PeerRegistry>();
};

}  // namespace

std::unique_ptr<Transport> CreateTcpTransport(const TransportOptions& options) {
  return std::unique_ptr<Transport>(new TcpTransport(options));
}

std::unique_ptr<Stream> AdoptTcpStream(int fd) { return std::unique_ptr<Stream>(new TcpStream(fd)); }

}  // namespace transport
}  // namespace bps
