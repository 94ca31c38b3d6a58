#include "server/server.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>

#include "common/logging.h"
#include "common/net_util.h"
#include "common/reduce_kernels.h"
#include "server/round_agreement.h"

namespace bps {

AlignedBuffer::AlignedBuffer(size_t n) : size(n) {
  if (posix_memalign(reinterpret_cast<void**>(&data), 64, n ? n : 64) != 0) data = nullptr;
}
AlignedBuffer::~AlignedBuffer() { free(data); }

Server::Server(Config config, std::shared_ptr<Store> store, int server_id, std::string listen_host)
    : config_(std::move(config)), store_(std::move(store)), server_id_(server_id),
      listen_host_(std::move(listen_host)) {}

Server::~Server() { Stop(); }

Status Server::Start() {
  BPS_RETURN_IF_ERROR(ListenOn(listen_host_, 0, 1024, &listen_fd_, &port_));
  timeline_.Configure("server " + std::to_string(server_id_), "server" + std::to_string(server_id_));
  loop_.reset(new EventLoop("server"));
  loop_->Start();
  for (int i = 0; i < config_.server_engine_threads; ++i) {
    engines_.emplace_back(new EngineThread());
    EngineThread* t = engines_.back().get();
    t->thread = std::thread([this, t] { EngineMain(t); });
  }
  HandshakeAcceptor::Options options;
  options.owner = "server " + std::to_string(server_id_);
  acceptor_.reset(new HandshakeAcceptor(loop_.get(), listen_fd_, config_.job_token, options,
                                        [this](int fd, const PeerIdentity& peer) { AdmitConnection(fd, peer); }));
  acceptor_->Start();
  BPS_LOG(Info) << "server " << server_id_ << " listening on " << address() << " with "
                << config_.server_engine_threads << " engine threads, "
                << (config_.enable_async ? "async" : "sync") << " mode";
  return store_->Set("server/" + std::to_string(server_id_), address());
}

void Server::Stop() {
  if (stopping_.exchange(true)) return;
  if (acceptor_) acceptor_->Stop();  // no handshake calls into this server after this
  for (auto& t : engines_) {
    {
      std::lock_guard<std::mutex> lock(t->mu);
    }
    t->cv.notify_all();
    if (t->thread.joinable()) t->thread.join();
  }
  timeline_.Finish();
  if (loop_) loop_->Stop();
  if (listen_fd_ >= 0) close(listen_fd_);
}

void Server::Abort(const Status& why) {
  std::vector<std::shared_ptr<Connection>> conns;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failure_.ok()) failure_ = why;
    for (auto& kv : conns_) conns.push_back(kv.second);
  }
  for (auto& c : conns) SendError(c, 0, 0, why.message());
  {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_ = true;
  }
  cv_.notify_all();
}

Status Server::Wait(double timeout_seconds) {
  // The job is over for this server once every worker connection of the job
  // came and left (or one died). Workers publish the job size at rendezvous.
  std::string size_text;
  double get_timeout = timeout_seconds < 0 ? config_.rendezvous_timeout_seconds : timeout_seconds;
  Status st = store_->Get("size", get_timeout, &size_text);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_.ok()) return failure_;
  }
  if (!st.ok()) return st.WithContext("server " + std::to_string(server_id_) + " waiting for the job size");
  const int expected = atoi(size_text.c_str()) * config_.connections_per_server;
  std::unique_lock<std::mutex> lock(mu_);
  // A worker that said goodbye is done even if its socket is still open
  // (a colocated server's own process closes its sockets after this wait).
  auto all_left = [&] {
    for (auto& kv : conns_) {
      if (!said_bye_.count(kv.first) && !reported_.count(kv.first)) return false;
    }
    return true;
  };
  auto done = [&] {
    return (ever_connected_ >= expected && all_left()) || (!failure_.ok() && all_left()) || aborted_;
  };
  if (timeout_seconds < 0) {
    cv_.wait(lock, done);
  } else if (!cv_.wait_for(lock, std::chrono::duration<double>(timeout_seconds), done)) {
    return Status::Timeout("server " + std::to_string(server_id_) + ": " + std::to_string(conns_.size()) +
                           " worker connections still open after " + std::to_string(static_cast<int>(timeout_seconds)) +
                           " s");
  }
  return failure_;
}

void Server::AdmitConnection(int fd, const PeerIdentity& peer) {
  if (stopping_) {
    close(fd);
    return;
  }
  SetLivenessProbes(fd, config_.timeout_seconds);
  auto conn = std::make_shared<Connection>(fd, loop_.get(), this, peer.Describe(), SocketTuningOf(config_));
  conn->tag = peer.rank;
  {
    std::lock_guard<std::mutex> lock(mu_);
    conns_[conn.get()] = conn;
    peers_[conn.get()] = peer;
    ++ever_connected_;
  }
  conn->Start();
  BPS_LOG(Debug) << "server " << server_id_ << " admitted " << peer.Describe();
}

std::shared_ptr<Connection> Server::Find(Connection* raw) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = conns_.find(raw);
  return it == conns_.end() ? nullptr : it->second;
}

std::shared_ptr<AlignedBuffer> Server::TakeBuffer(size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    auto it = pool_.find(bytes);
    if (it != pool_.end()) {
      auto b = it->second;
      pool_.erase(it);
      return b;
    }
  }
  return std::make_shared<AlignedBuffer>(bytes);
}

void Server::ReturnBuffer(std::shared_ptr<AlignedBuffer> b) {
  std::lock_guard<std::mutex> lock(pool_mu_);
  if (pool_.size() < 256) pool_.emplace(b->size, std::move(b));
}

void* Server::OnHeader(Connection* conn, const MessageHeader& h, Status* reject) {
  if (h.type != static_cast<uint16_t>(MessageType::kPush)) return nullptr;  // small control frames
  // A push is one slice of one partition: never larger than a partition.
  const uint64_t limit = static_cast<uint64_t>(config_.partition_bytes) + 4096;
  if (h.payload_bytes > limit) {
    *reject = Status::PeerFailure(conn->peer_name() + " pushed " + std::to_string(h.payload_bytes) +
                                  " bytes, more than this server's BYTEPS_PARTITION_BYTES=" +
                                  std::to_string(config_.partition_bytes) + ": set the same value on every process");
    return nullptr;
  }
  auto buf = TakeBuffer(h.payload_bytes);
  if (!buf->data) {
    *reject = Status::Internal("out of memory for a push of " + std::to_string(h.payload_bytes) + " bytes");
    return nullptr;
  }
  // Parked on the connection's tag-less side table until OnMessage.
  std::lock_guard<std::mutex> lock(mu_);
  inflight_[conn] = buf;
  return buf->data;
}

void Server::OnMessage(Connection* conn, const MessageHeader& h, void* payload) {
  auto shared = Find(conn);
  if (!shared) return;
  switch (static_cast<MessageType>(h.type)) {
    case MessageType::kPush: {
      std::shared_ptr<AlignedBuffer> buf;
      {
        std::lock_guard<std::mutex> lock(mu_);
        buf = std::move(inflight_[conn]);
        inflight_.erase(conn);
      }
      bytes_in_ += h.payload_bytes;
      ++pushes_;
      int thread_index;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = key_thread_.find(h.key);
        if (it == key_thread_.end()) {
          // Pin the key to the least-loaded engine thread (by bytes).
          size_t best = 0;
          for (size_t i = 1; i < engines_.size(); ++i) {
            if (engines_[i]->assigned_bytes < engines_[best]->assigned_bytes) best = i;
          }
          engines_[best]->assigned_bytes += h.payload_bytes;
          it = key_thread_.emplace(h.key, static_cast<int>(best)).first;
        }
        thread_index = it->second;
      }
      EngineThread* t = engines_[thread_index].get();
      {
        std::lock_guard<std::mutex> lock(t->mu);
        t->queue.push_back(PushWork{shared, h, std::move(buf)});
      }
      t->cv.notify_one();
      return;
    }
    case MessageType::kBye: {
      {
        std::lock_guard<std::mutex> lock(mu_);
        said_bye_.insert(conn);
      }
      cv_.notify_all();
      return;
    }
    case MessageType::kError: {
      if (h.flags & kFlagTensorError) {
        // A worker saw this tensor's ranks disagree inside its machine: fail
        // the tensor on the other machines too, now, naming that cause.
        std::string why(static_cast<char*>(payload), h.payload_bytes);
        {
          std::lock_guard<std::mutex> lock(mu_);
          poisoned_.emplace(h.name_hash, why);
        }
        TellEveryone(h.key, h.name_hash, why, conn);
        return;
      }
      // A worker failed (e.g. it lost another server): relay its root cause.
      std::string why = conn->peer_name() + " failed: " + std::string(static_cast<char*>(payload), h.payload_bytes);
      BPS_LOG(Error) << "server " << server_id_ << ": " << why;
      std::vector<std::shared_ptr<Connection>> others;
      {
        std::lock_guard<std::mutex> lock(mu_);
        reported_.insert(conn);
        if (failure_.ok()) failure_ = Status::PeerFailure(why);
        for (auto& kv : conns_) {
          if (kv.first != conn) others.push_back(kv.second);
        }
      }
      for (auto& c : others) SendError(c, 0, 0, why);
      cv_.notify_all();
      return;
    }
    default:
      return;
  }
}

void Server::OnClosed(Connection* conn, const Status& reason) {
  std::vector<std::shared_ptr<Connection>> others;
  std::string why;
  {
    std::lock_guard<std::mutex> lock(mu_);
    inflight_.erase(conn);
    // Orderly, or its failure was already relayed: nothing new to tell.
    bool orderly = said_bye_.count(conn) > 0 || reported_.count(conn) > 0;
    said_bye_.erase(conn);
    reported_.erase(conn);
    auto peer = peers_[conn];
    peers_.erase(conn);
    auto keep = conns_[conn];
    conns_.erase(conn);
    if (!orderly && !stopping_) {
      why = peer.Describe() + " disconnected from server " + std::to_string(server_id_) + " (" +
            reason.message() + ")";
      if (failure_.ok()) failure_ = Status::PeerFailure(why);
      for (auto& kv : conns_) others.push_back(kv.second);
    }
  }
  if (!why.empty()) {
    BPS_LOG(Error) << why;
    // Tell every survivor now, so their pending pulls fail instead of hanging.
    for (auto& c : others) SendError(c, 0, 0, why);
  }
  cv_.notify_all();
}

void Server::SendError(const std::shared_ptr<Connection>& conn, uint64_t key, uint64_t name_hash,
                       const std::string& msg) {
  auto text = std::make_shared<std::string>(msg.substr(0, kMaxErrorPayloadBytes));
  OutMessage m;
  m.header.type = static_cast<uint16_t>(MessageType::kError);
  m.header.key = key;
  m.header.name_hash = name_hash;
  if (name_hash != 0) m.header.flags = kFlagTensorError;
  m.header.payload_bytes = text->size();
  m.payload = text->data();
  m.keepalive = text;
  conn->Send(std::move(m));
}

void Server::TellEveryone(uint64_t key, uint64_t name_hash, const std::string& msg, Connection* except) {
  std::vector<std::shared_ptr<Connection>> everyone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& kv : conns_) {
      if (kv.first != except) everyone.push_back(kv.second);
    }
  }
  for (auto& c : everyone) SendError(c, key, name_hash, msg);
}

void Server::EngineMain(EngineThread* t) {
  while (true) {
    PushWork w;
    {
      std::unique_lock<std::mutex> lock(t->mu);
      t->cv.wait_for(lock, std::chrono::milliseconds(200), [&] { return !t->queue.empty() || stopping_; });
      if (t->queue.empty()) {
        if (stopping_) return;
        continue;
      }
      w = std::move(t->queue.front());
      t->queue.pop_front();
    }
    HandlePush(t, w);
    ReturnBuffer(std::move(w.payload));
  }
}

void Server::HandlePush(EngineThread* t, PushWork& w) {
  const MessageHeader& h = w.header;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto poisoned = poisoned_.find(h.name_hash);
    if (poisoned != poisoned_.end()) {
      std::string msg = poisoned->second;
      SendError(w.conn, h.key, h.name_hash, msg);
      return;
    }
  }
  const DataType dtype = static_cast<DataType>(h.dtype);
  const size_t count = h.payload_bytes / DataTypeSize(dtype);
  KeyState& ks = t->keys[h.key];
  if (ks.acc && ks.contributions == 0 && !config_.enable_async &&
      (h.payload_bytes != ks.payload_bytes || dtype != ks.dtype)) {
    // The tensor behind this key was resized (on every rank, or the round's
    // signature check below catches it): start over with fitting buffers.
    ks = KeyState();
  }
  const bool fresh_key = !ks.acc;
  if (fresh_key) {
    ks.dtype = dtype;
    ks.payload_bytes = h.payload_bytes;
    ks.round = h.round;
    ks.acc = std::make_shared<AlignedBuffer>(count * AccumulatorElementSize(dtype));
  }
  // Every contribution to a key must describe the same tensor: otherwise the
  // sum would be silent garbage. Poison the tensor and tell every pusher.
  std::string mismatch = CheckPushTerms(h, ks.waiting.empty() ? nullptr : &ks.waiting.front().second,
                                        ServerTerms{server_id_, config_.enable_async});
  if (mismatch.empty() && config_.enable_async && !fresh_key &&
      (h.signature != ks.signature || h.payload_bytes != ks.payload_bytes || dtype != ks.dtype)) {
    // Async rounds never wait: compare with the key's last push instead.
    mismatch = "ranks disagree on this tensor: rank " + std::to_string(ks.first_rank) + " pushed " +
               DataTypeName(ks.dtype) + " data of " + std::to_string(ks.tensor_bytes) + " bytes in total, rank " +
               std::to_string(h.sender_rank) + " pushed " + DataTypeName(dtype) + " data of " +
               std::to_string(h.tensor_bytes) + " bytes (or another shape)";
  }
  if (!mismatch.empty()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      poisoned_.emplace(h.name_hash, mismatch);
    }
    // Every worker, not only this round's pushers: ranks waiting on other
    // partitions (or other keys of a different plan) of the tensor fail now.
    TellEveryone(h.key, h.name_hash, mismatch, nullptr);
    ks.waiting.clear();
    ks.contributions = 0;
    return;
  }
  if (ks.contributions == 0) {
    ks.signature = h.signature;
    ks.tensor_bytes = h.tensor_bytes;
    ks.first_rank = h.sender_rank;
    ks.round = h.round;
  }

  if (config_.enable_async) {
    // Async: the key holds a running sum; every push is applied and answered.
    Accumulate(ks.acc->data, w.payload->data, count, dtype, fresh_key);
    ks.contributions = 1;
    auto snapshot = std::make_shared<AlignedBuffer>(h.payload_bytes);
    AccumulatorToWire(snapshot->data, ks.acc->data, count, dtype);
    OutMessage m;
    m.header = h;
    m.header.type = static_cast<uint16_t>(MessageType::kResponse);
    m.payload = snapshot->data;
    m.keepalive = snapshot;
    bytes_out_ += h.payload_bytes;
    w.conn->Send(std::move(m));
    return;
  }

  const uint64_t w0 = timeline_.Tracing(h.round) ? Timeline::NowMicros() : 0;
  Accumulate(ks.acc->data, w.payload->data, count, dtype, ks.contributions == 0);
  if (w0) {
    timeline_.Record("key" + std::to_string(h.key % 100000) + ".from" + std::to_string(h.sender_rank), h.partition,
                     h.round, "server_sum", w0, Timeline::NowMicros());
  }
  ks.contributions++;
  ks.waiting.emplace_back(w.conn, h);
  if (ks.contributions < h.num_contributors) return;

  // Round complete: answer every contributor from one buffer. The buffer of
  // the previous round may still be on the wire, hence two by parity.
  std::shared_ptr<AlignedBuffer> wire;
  if (IsHalfType(dtype)) {
    auto& slot = ks.wire[ks.round & 1];
    if (!slot || slot.use_count() > 1) slot = std::make_shared<AlignedBuffer>(h.payload_bytes);
    AccumulatorToWire(slot->data, ks.acc->data, count, dtype);
    wire = slot;
  } else {
    wire = ks.acc;
    // Next round accumulates into the spare unless it is still being sent.
    auto& spare = ks.wire[0];
    if (spare && spare.use_count() == 1) {
      ks.acc = spare;
    } else {
      ks.acc = std::make_shared<AlignedBuffer>(wire->size);
    }
    spare = wire;
  }
  for (auto& waiter : ks.waiting) {
    OutMessage m;
    m.header = waiter.second;
    m.header.type = static_cast<uint16_t>(MessageType::kResponse);
    m.header.sender_rank = static_cast<uint32_t>(server_id_);
    m.payload = wire->data;
    m.keepalive = wire;
    bytes_out_ += h.payload_bytes;
    waiter.first->Send(std::move(m));
  }
  ks.waiting.clear();
  ks.contributions = 0;
  ks.round++;
}

std::string Server::StatsJson() {
  return "{\"server_id\": " + std::to_string(server_id_) + ", \"bytes_in\": " + std::to_string(bytes_in_.load()) +
         ", \"bytes_out\": " + std::to_string(bytes_out_.load()) + ", \"pushes\": " + std::to_string(pushes_.load()) +
         "}";
}

}  // namespace bps
