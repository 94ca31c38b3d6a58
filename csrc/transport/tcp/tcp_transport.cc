// The TCP implementation of transport.h over the framed Connection and a
// pool of epoll EventLoops (IoThreadPool): every connection lives on one loop,
// and connections are spread over the loops, so several connections to a
// server are carried by several cores. Posted receives are matched by (key, round)
// in OnHeader, which hands the connection the posted buffer, so payloads land
// in place with no copy; cancellation rides on Connection::CancelReceive.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>
#include <mutex>
#include <vector>

#include "common/job_verdict.h"
#include "common/logging.h"
#include "common/net_util.h"
#include "transport/handshake.h"
#include "transport/tcp/connection.h"
#include "transport/tcp/tcp_transport.h"

namespace bps {
namespace transport {
namespace {

struct PostedReceive {
  uint32_t round = 0;
  void* dst = nullptr;
  uint64_t bytes = 0;
  Callback done;
  bool receiving = false;  // its header arrived: the payload is landing in dst
  bool cancelled = false;  // CancelReceive asked the connection to drop the rest
};

// One peer. Keeps itself alive until its connection reported closed, since
// the connection calls back into it until then.
class TcpPeer final : public transport::Connection, public ::bps::ConnectionHandler,
                      public std::enable_shared_from_this<TcpPeer> {
 public:
  TcpPeer(Handlers handlers, std::string peer_name) : handlers_(std::move(handlers)), peer_name_(std::move(peer_name)) {}

  void Start(int fd, EventLoop* loop, const SocketTuning& tuning) {
    self_ = shared_from_this();
    conn_ = std::make_shared<::bps::Connection>(fd, loop, this, peer_name_, tuning);
    conn_->Start();
  }

  void Send(const MessageHeader& header, const void* payload, Callback done) override {
    OutMessage m;
    m.header = header;
    m.payload = payload;
    m.on_sent = std::move(done);
    conn_->Send(std::move(m));
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

  void Close(const Status& reason) override { conn_->Close(reason); }
  bool closed() {
    std::lock_guard<std::mutex> lock(mu_);
    return !closed_.ok();
  }
  const std::string& peer_name() const override { return peer_name_; }

  void* OnHeader(::bps::Connection*, const MessageHeader& h, Status*) override {
    std::shared_ptr<PostedReceive> mismatched;
    {
      std::lock_guard<std::mutex> lock(mu_);
      // Only data frames fill posted receives; control frames (errors, bye)
      // always reach the unexpected handler, whatever key they carry.
      const bool data = h.type == static_cast<uint16_t>(MessageType::kPush) ||
                        h.type == static_cast<uint16_t>(MessageType::kResponse);
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
      return ::bps::Connection::DiscardPayload();
    }
    // Unexpected: small payloads are buffered for the handler, large dropped.
    return h.payload_bytes <= kMaxErrorPayloadBytes ? nullptr : ::bps::Connection::DiscardPayload();
  }

  void OnMessage(::bps::Connection*, const MessageHeader& h, void* payload) override {
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
      if (h.type == static_cast<uint16_t>(MessageType::kError)) text = Printable(text);
      handlers_.unexpected(this, h, text);
    }
  }

  void OnClosed(::bps::Connection*, const Status& reason) override {
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
  std::shared_ptr<::bps::Connection> conn_;
  std::shared_ptr<TcpPeer> self_;
  std::mutex mu_;
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

  EventLoop* Next() {
    std::lock_guard<std::mutex> lock(mu_);
    if (static_cast<int>(loops_.size()) < limit_) {
      loops_.emplace_back(new EventLoop("transport-tcp-" + std::to_string(loops_.size())));
      loops_.back()->Start();
      return loops_.back().get();
    }
    return loops_[next_++ % loops_.size()].get();
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
  const int limit_;
  std::mutex mu_;
  std::vector<std::unique_ptr<EventLoop>> loops_;
  size_t next_ = 0;
};

class TcpListener final : public Listener {
 public:
  TcpListener(int fd, std::string address, const TransportOptions& options, IoThreadPool* loops,
              std::shared_ptr<PeerRegistry> registry)
      : fd_(fd), address_(std::move(address)), options_(options), loops_(loops), registry_(std::move(registry)) {}
  ~TcpListener() override { close(fd_); }
  std::string address() const override { return address_; }

  Status Accept(double timeout_seconds, Handlers handlers, std::shared_ptr<Connection>* out) override {
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
    auto conn = std::make_shared<TcpPeer>(std::move(handlers), peer.Describe());
    conn->Start(fd, loops_->Next(), SocketTuning{options_.receive_low_water, options_.congestion});
    registry_->Add(conn);
    *out = conn;
    return Status::OK();
  }

 private:
  int fd_;
  std::string address_;
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

  Status Listen(const std::string& host, std::unique_ptr<Listener>* out) override {
    int fd = -1, port = 0;
    BPS_RETURN_IF_ERROR(ListenOn(host, 0, 1024, &fd, &port));
    out->reset(new TcpListener(fd, host + ":" + std::to_string(port), options_, &loops_, registry_));
    return Status::OK();
  }

  Status Connect(const std::string& address, const std::string& peer_name, double timeout_seconds,
                 Handlers handlers, std::shared_ptr<Connection>* out) override {
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
    auto conn = std::make_shared<TcpPeer>(std::move(handlers), peer_name);
    conn->Start(fd, loops_.Next(), SocketTuning{options_.receive_low_water, options_.congestion});
    registry_->Add(conn);
    *out = conn;
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

}  // namespace transport
}  // namespace bps
