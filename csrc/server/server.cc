#include "server/server.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "common/logging.h"
#include "common/net_util.h"
#include "common/reduce_kernels.h"
#include "compression/compressor.h"
#include "server/round_mismatch.h"

namespace bps {

// The handlers of one worker connection. They run on the connection's I/O
// thread, so the payload parked between header and arrival needs no lock.
class Server::WorkerLink final {
 public:
  WorkerLink(Server* server, const std::shared_ptr<Connection>& conn)
      : server_(server), conn_(conn) {}

  transport::Handlers Handlers(const std::shared_ptr<WorkerLink>& self) {
    transport::Handlers h;
    h.frames = &PsFrameRules();
    h.destination = [self](Connection* conn, const transport::FrameHeader& f, Status* reject) {
      return self->Destination(conn, f, reject);
    };
    h.arrived = [self](Connection*, const transport::FrameHeader& f, void*) {
      auto shared = self->conn_.lock();
      if (shared) self->server_->HandlePush(shared, FromFrame(f), std::move(self->parked_));
    };
    h.unexpected = [self](Connection* conn, const transport::FrameHeader& f, const std::string& text) {
      self->server_->OnControl(conn, FromFrame(f), text);
    };
    h.closed = [self](Connection* conn, const Status& reason) {
      self->parked_.reset();
      self->server_->OnLinkClosed(conn, reason);
    };
    return h;
  }

 private:
  void* Destination(Connection* conn, const transport::FrameHeader& f, Status* reject) {
    if (f.type != static_cast<uint16_t>(MessageType::kPush)) {
      // A response (data, but never sent to a server): small ones are
      // ignored, larger ones close the connection.
      if (f.payload_bytes > kMaxErrorPayloadBytes) {
        *reject = Status::PeerFailure("unexpected " + std::string(MessageTypeName(f.type)) + " frame from " +
                                      conn->peer_name());
      }
      return nullptr;
    }
    // A push is one slice of one partition: never larger than a partition
    // (a device tensor's, the larger by default).
    const int64_t largest = server_->config_.LargestPartitionBytes();
    const uint64_t limit = static_cast<uint64_t>(largest) + 4096;
    if (f.payload_bytes > limit) {
      *reject = Status::PeerFailure(conn->peer_name() + " pushed " + std::to_string(f.payload_bytes) +
                                    " bytes, more than this server's BYTEPS_PARTITION_BYTES=" +
                                    std::to_string(largest) + ": set the same value on every process");
      return nullptr;
    }
    parked_ = server_->buffers_->Take(f.payload_bytes);
    if (!parked_->data) {
      *reject = Status::Internal("out of memory for a push of " + std::to_string(f.payload_bytes) + " bytes");
      return nullptr;
    }
    return parked_->data;
  }

  Server* server_;
  std::weak_ptr<Connection> conn_;
  std::shared_ptr<AlignedBuffer> parked_;  // the push being received
};

Server::Server(Config config, std::shared_ptr<Store> store, int server_id, std::string listen_host,
               std::unique_ptr<transport::Transport> transport)
    : config_(std::move(config)), store_(std::move(store)), server_id_(server_id),
      listen_host_(std::move(listen_host)), transport_(std::move(transport)),
      buffers_(BufferPool::Create(static_cast<uint64_t>(config_.server_buffer_pool_bytes))) {}

transport::TransportOptions Server::TransportOptionsFor(const Config& config, int server_id) {
  transport::TransportOptions options;
  options.auth = transport::PeerAuth{config.job_token, Role::kServer, server_id};
  options.liveness_seconds = config.timeout_seconds;
  options.receive_low_water = static_cast<size_t>(config.tcp_receive_low_water);
  options.congestion = config.tcp_congestion;
  options.socket_buffer_bytes = static_cast<size_t>(config.tcp_socket_buffer);
  options.io_threads = std::max(1, config.server_engine_threads);
  return options;
}

Server::~Server() { Stop(); }

Status Server::Start() {
  if (!transport_) {
    BPS_RETURN_IF_ERROR(transport::CreateTransport("tcp", TransportOptionsFor(config_, server_id_), &transport_));
  }
  // A job's first keys find warm memory too: a few partitions' worth,
  // touched in the background while the workers connect.
  // Host tensors' partitions first (a CPU job's), then device tensors' if larger.
  std::vector<size_t> warm{static_cast<size_t>(config_.partition_bytes)};
  if (config_.LargestPartitionBytes() != config_.partition_bytes) {
    warm.push_back(static_cast<size_t>(config_.LargestPartitionBytes()));
  }
  buffers_->WarmInBackground(warm, kWarmPartitions);
  BPS_RETURN_IF_ERROR(transport_->Listen(listen_host_, 0, &listener_));
  timeline_.Configure("server " + std::to_string(server_id_), "server" + std::to_string(server_id_));
  transport::AcceptOptions options;
  options.owner = "server " + std::to_string(server_id_);
  BPS_RETURN_IF_ERROR(listener_->AcceptConnections(
      options, [this](const std::shared_ptr<Connection>& conn, const PeerIdentity& peer, transport::Handlers* h) {
        return AdmitConnection(conn, peer, h);
      }));
  BPS_LOG(Info) << "server " << server_id_ << " listening on " << address() << " (" << transport_->name()
                << ") with up to " << transport_->io_threads() << " event loops, "
                << (config_.enable_async ? "async" : "sync") << " mode";
  return store_->Set("server/" + std::to_string(server_id_), address());
}

void Server::Stop() {
  if (stopping_.exchange(true)) return;
  if (listener_) listener_->StopAccepting();  // no admission calls into this server after this
  listener_.reset();
  {
    // The abort's reason goes out before the connections close: the
    // transport writes from its I/O threads, and closing first would leave
    // the workers with "server N closed the connection" and no cause (a
    // killed scheduler, issue 30's campaign). Bounded: a peer that reads
    // nothing cannot hold the server.
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(1), [this] { return abort_frames_pending_ == 0; });
  }
  // Closes every connection and joins the I/O threads: no push is being
  // handled after this.
  transport_.reset();
  {
    std::lock_guard<std::mutex> lock(mu_);
    conns_.clear();
  }
  timeline_.Finish();
}

void Server::Abort(const Status& why) {
  std::vector<std::shared_ptr<Connection>> conns;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failure_.ok()) failure_ = why;
    for (auto& kv : conns_) conns.push_back(kv.second.conn);
    // Counted with the snapshot, before Wait can see aborted_ and Stop can
    // look at the count; a connection admitted after it counts its own.
    abort_frames_pending_ += static_cast<int>(conns.size());
    aborted_ = true;
  }
  for (auto& c : conns) SendAbortFrame(c, why.message());
  cv_.notify_all();
}

void Server::SendAbortFrame(const std::shared_ptr<Connection>& conn, const std::string& why) {
  auto payload = std::make_shared<std::string>(why.substr(0, kMaxErrorPayloadBytes));
  MessageHeader h;
  h.type = static_cast<uint16_t>(MessageType::kError);
  h.payload_bytes = payload->size();
  // Counted (by the caller) until written or the connection failed: Stop
  // waits for them.
  conn->Send(ToFrame(h), payload->data(), [this, payload](const Status&) {
    std::lock_guard<std::mutex> lock(mu_);
    abort_frames_pending_--;
    cv_.notify_all();
  });
}

Status Server::Wait(double timeout_seconds, int job_ranks) {
  // The job is over for this server once every worker rank of the job came
  // and all its connections left (or one died). Workers publish the job size
  // at rendezvous. Ranks, not connections, are counted: BYTEPS_TCP_CONNECTIONS
  // defaults by core count and may differ between processes. (A rank's later
  // connection still in its handshake when the rank said goodbye on another
  // is simply closed with the server.)
  {
    // A failed job needs no job size, and asking the store for it may never
    // return: torch's TCPStore client waits without bound for a stopped store
    // host (issue 30: a colocated server kept its process alive for good).
    // (A colocated server whose rank failed was aborted with the cause by
    // its engine's shutdown before this wait.)
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_.ok()) return failure_;
  }
  std::string size_text = job_ranks > 0 ? std::to_string(job_ranks) : "";
  double get_timeout = timeout_seconds < 0 ? config_.rendezvous_timeout_seconds : timeout_seconds;
  // Saying every few seconds what it waits for.
  const auto started = std::chrono::steady_clock::now();
  Status st = job_ranks > 0 ? Status::OK() : GetInSlices(store_.get(), "size", get_timeout, kWaitNoteSeconds,
                          [&] {
                            {
                              std::lock_guard<std::mutex> lock(mu_);
                              if (!failure_.ok() || aborted_) return false;
                            }
                            const std::string machines = MachinesArrived(store_.get());
                            BPS_LOG(Warning) << "server " << server_id_ << " is waiting for the workers: "
                                             << (machines.empty() ? std::string("none has joined the rendezvous yet")
                                                                  : machines)
                                             << "; still waiting " << WaitProgress(started, get_timeout);
                            return true;
                          },
                          &size_text);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_.ok()) return failure_;
  }
  if (!st.ok()) return st.WithContext("server " + std::to_string(server_id_) + " waiting for the job size");
  const size_t expected = static_cast<size_t>(std::max(0, atoi(size_text.c_str())));
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
    return (ranks_seen_.size() >= expected && all_left()) || (!failure_.ok() && all_left()) || aborted_;
  };
  if (timeout_seconds < 0) {
    // Until every rank has come, say every few seconds how many have.
    while (!cv_.wait_for(lock, std::chrono::seconds(kWaitNoteSeconds), done)) {
      if (ranks_seen_.size() >= expected) continue;  // all came: training, not waiting
      BPS_LOG(Warning) << "server " << server_id_ << " is waiting for the workers: " << ranks_seen_.size() << " of "
                       << expected << " ranks connected; still waiting " << WaitProgress(started, -1);
    }
  } else if (!cv_.wait_for(lock, std::chrono::duration<double>(timeout_seconds),
                           [&] { return done() || !failure_.ok(); })) {
    return Status::Timeout("server " + std::to_string(server_id_) + ": " + std::to_string(conns_.size()) +
                           " worker connections still open after " + std::to_string(static_cast<int>(timeout_seconds)) +
                           " s");
  } else if (!done()) {
    // Failed: everyone was told when it failed. The workers' connections get
    // a moment to leave; a stopped worker's never does, and must not hold
    // this process for the rest of the timeout.
    cv_.wait_for(lock, std::chrono::seconds(kFailureGraceSeconds), done);
  }
  return failure_;
}

bool Server::AdmitConnection(const std::shared_ptr<Connection>& conn, const PeerIdentity& peer,
                             transport::Handlers* handlers) {
  if (stopping_) return false;
  auto link = std::make_shared<WorkerLink>(this, conn);
  *handlers = link->Handlers(link);
  bool aborted = false;
  std::string aborted_why;
  {
    std::lock_guard<std::mutex> lock(mu_);
    conns_[conn.get()] = Peer{conn, peer};
    ranks_seen_.insert(peer.rank);
    if (aborted_) {
      aborted = true;
      aborted_why = failure_.message();
      abort_frames_pending_++;
    }
  }
  BPS_LOG(Debug) << "server " << server_id_ << " admitted " << peer.Describe();
  // A worker that connects after the abort (still in its start-up when the
  // scheduler died) hears the cause too, not only the close that follows:
  // else it names this server (issue 30's campaign, scheduler start-up kills).
  if (aborted) SendAbortFrame(conn, aborted_why);
  return true;
}

void Server::OnControl(Connection* conn, const MessageHeader& h, const std::string& text) {
  switch (static_cast<MessageType>(h.type)) {
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
        const std::string& why = text;
        poisoned_.Poison(h.name_hash, why);
        TellEveryone(h.key, h.name_hash, why, conn);
        return;
      }
      // A worker failed (e.g. it lost another server): relay its root cause.
      std::string why = conn->peer_name() + " failed: " + text;
      BPS_LOG(Error) << "server " << server_id_ << ": " << why;
      std::vector<std::shared_ptr<Connection>> others;
      {
        std::lock_guard<std::mutex> lock(mu_);
        reported_.insert(conn);
        if (failure_.ok()) failure_ = Status::PeerFailure(why);
        for (auto& kv : conns_) {
          if (kv.first != conn) others.push_back(kv.second.conn);
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

void Server::OnLinkClosed(Connection* conn, const Status& reason) {
  std::vector<std::shared_ptr<Connection>> others;
  std::string why;
  Peer gone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Orderly, or its failure was already relayed: nothing new to tell.
    bool orderly = said_bye_.count(conn) > 0 || reported_.count(conn) > 0;
    said_bye_.erase(conn);
    reported_.erase(conn);
    auto it = conns_.find(conn);
    if (it != conns_.end()) {
      gone = std::move(it->second);
      conns_.erase(it);
    }
    if (!orderly && !stopping_) {
      why = gone.identity.Describe() + " disconnected from server " + std::to_string(server_id_) + " (" +
            reason.message() + ")";
      if (failure_.ok()) failure_ = Status::PeerFailure(why);
      for (auto& kv : conns_) others.push_back(kv.second.conn);
    }
  }
  if (!why.empty()) {
    BPS_LOG(Error) << why;
    // Tell every survivor now, so their pending pulls fail instead of hanging.
    for (auto& c : others) SendError(c, 0, 0, why);
  }
  cv_.notify_all();
  // `gone` holds the connection, whose handlers run this call: the
  // transport keeps it alive until this callback returned.
}

void Server::SendError(const std::shared_ptr<Connection>& conn, uint64_t key, uint64_t name_hash,
                       const std::string& msg) {
  auto text = std::make_shared<std::string>(msg.substr(0, kMaxErrorPayloadBytes));
  MessageHeader h;
  h.type = static_cast<uint16_t>(MessageType::kError);
  h.key = key;
  h.name_hash = name_hash;
  if (name_hash != 0) h.flags = kFlagTensorError;
  h.payload_bytes = text->size();
  conn->SendOwned(ToFrame(h), text, text->data());
}

void Server::TellEveryone(uint64_t key, uint64_t name_hash, const std::string& msg, Connection* except) {
  std::vector<std::shared_ptr<Connection>> everyone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& kv : conns_) {
      if (kv.first != except) everyone.push_back(kv.second.conn);
    }
  }
  for (auto& c : everyone) SendError(c, key, name_hash, msg);
}

bool Server::TakeBuffer(size_t bytes, const Push& push, std::shared_ptr<AlignedBuffer>* out) {
  *out = buffers_->Take(bytes);
  if ((*out)->data) return true;
  SendError(push.conn, push.h.key, push.h.name_hash,
            "server " + std::to_string(server_id_) + ": out of memory for a buffer of " + std::to_string(bytes) + " bytes");
  out->reset();
  return false;
}

void Server::Answer(const std::shared_ptr<Connection>& to, const MessageHeader& answer,
                    const std::shared_ptr<AlignedBuffer>& wire) {
  bytes_out_.fetch_add(answer.payload_bytes, std::memory_order_relaxed);
  to->SendOwned(ToFrame(answer), wire, wire->data);
}

void Server::FailTensor(const MessageHeader& h, const std::string& why) {
  poisoned_.Poison(h.name_hash, why);
  TellEveryone(h.key, h.name_hash, why, nullptr);
}

// Before anything that can answer on this connection (a response or an
// error), so the worker sees the receipt first: its scheduling credit comes
// back here, not with the answer, which waits for every machine's push. A
// credit held until the answer let two machines fill their windows with
// different partitions, each waiting for the other's push (a deadlock).
void Server::AcknowledgeReceipt(Connection& conn, const MessageHeader& push) {
  MessageHeader h;
  h.type = static_cast<uint16_t>(MessageType::kReceived);
  h.key = push.key;
  h.round = push.round;
  h.name_hash = push.name_hash;
  h.partition = push.partition;
  conn.SendOwned(ToFrame(h), nullptr, nullptr);
}

namespace {

// The key's state fits the push: true when the push opens it (its first, or
// the first since its tensor was resized).
bool OpenKey(KeyState& ks, const Push& push, bool async) {
  const MessageHeader& h = push.h;
  if (ks.initialized && ks.contributions == 0 && !async &&
      (h.payload_bytes != ks.payload_bytes || push.dtype != ks.dtype || push.compressed != ks.compressed)) {
    // The tensor behind this key was resized (on every rank, or the round's
    // signature check catches it): start over with fitting buffers.
    ks.acc.reset();
    ks.waiting.clear();
    ks.initialized = false;
  }
  if (ks.initialized) return false;
  ks.initialized = true;
  ks.dtype = push.dtype;
  ks.payload_bytes = h.payload_bytes;
  ks.round = h.round;
  return true;
}

// The round's first push sets the terms the others are checked against.
void BeginRound(KeyState& ks, const Push& push) {
  const MessageHeader& h = push.h;
  ks.signature = h.signature;
  ks.tensor_bytes = h.tensor_bytes;
  ks.first_rank = h.sender_rank;
  ks.round = h.round;
  ks.compressed = push.compressed;
  ks.codec = push.codec;
  const uint32_t* cuts = push.compressed ? PayloadCuts(push.payload->data) : nullptr;
  ks.cuts.assign(cuts, cuts + (push.compressed ? push.codec.cuts : 0));
}

}  // namespace

void Server::HandlePush(const std::shared_ptr<Connection>& conn, const MessageHeader& h,
                        std::shared_ptr<AlignedBuffer> payload) {
  bytes_in_.fetch_add(h.payload_bytes, std::memory_order_relaxed);
  pushes_.fetch_add(1, std::memory_order_relaxed);
  AcknowledgeReceipt(*conn, h);
  std::string poisoned;
  if (poisoned_.Find(h.name_hash, &poisoned)) {
    SendError(conn, h.key, h.name_hash, poisoned);
    return;
  }
  Push push(conn, h, std::move(payload));
  if (push.compressed) {
    std::string bad = CompressedRound::Read(&push);
    if (!bad.empty()) {
      SendError(conn, h.key, h.name_hash, "server " + std::to_string(server_id_) + ": " + bad);
      return;
    }
  }
  push.count = push.compressed ? push.codec.count : h.payload_bytes / DataTypeSize(push.dtype);
  push.acc_bytes = push.count * AccumulatorElementSize(push.dtype);
  KeyState& ks = *keys_.Get(h.key);
  std::lock_guard<std::mutex> key_lock(ks.mu);
  push.opens_key = OpenKey(ks, push, config_.enable_async);
  std::string mismatch = RoundMismatch(ks, push, ServerTerms{server_id_, config_.enable_async});
  if (!mismatch.empty()) {
    FailMismatchedRound(*this, ks, push, mismatch);
    return;
  }
  if (ks.contributions == 0) BeginRound(ks, push);
  HandlerOf(push).Add(ks, push);
}

RoundHandler& Server::HandlerOf(const Push& push) {
  if (push.compressed) return compressed_round_;
  if (config_.enable_async) return async_round_;
  if (IsHalfType(push.dtype)) return half_precision_round_;
  return sync_round_;
}

std::string Server::StatsJson() {
  const BufferPoolStats b = buffers_->Stats();
  return "{\"server_id\": " + std::to_string(server_id_) + ", \"bytes_in\": " + std::to_string(bytes_in_.load()) +
         ", \"bytes_out\": " + std::to_string(bytes_out_.load()) + ", \"pushes\": " + std::to_string(pushes_.load()) +
         ", \"buffer_pool\": {\"held_bytes\": " + std::to_string(b.held_bytes) +
         ", \"peak_held_bytes\": " + std::to_string(b.peak_held_bytes) + ", \"free_bytes\": " +
         std::to_string(b.free_bytes) + ", \"keep_bytes\": " + std::to_string(b.keep_bytes) +
         ", \"allocations\": " + std::to_string(b.allocations) + ", \"reuses\": " + std::to_string(b.reuses) + "}}";
}

}  // namespace bps
