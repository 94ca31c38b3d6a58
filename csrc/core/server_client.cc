#include "core/server_client.h"

#include <chrono>

#include "common/logging.h"
#include "common/net_util.h"
#include "ps/protocol.h"

namespace bps {
namespace {

// The key of a tensor error that a worker relays through the servers: this
// tag in the high half, the failed op's TensorOp::name_op in the low half.
constexpr uint64_t kRelayedOpTag = 0x42505352ull << 32;  // "BPSR"

// A relayed failure's code rides at the head of its text, which the servers
// pass on (and keep, to answer later pushes of the poisoned name) as is: no
// header field of the protocol changes. A text without it is a server's own
// finding: a mismatch.
constexpr char kCodeTag[] = "[bps code ";

std::string WithCode(const Status& failure) {
  return kCodeTag + std::to_string(static_cast<int>(failure.code())) + "] " + failure.message();
}

// The text without its code tag, and the code it carried (kMismatch if none).
std::string TakeCode(const std::string& text, StatusCode* code) {
  *code = StatusCode::kMismatch;
  const size_t tag = sizeof(kCodeTag) - 1;
  if (text.compare(0, tag, kCodeTag) != 0) return text;
  const size_t close = text.find("] ", tag);
  if (close == std::string::npos || close == tag || close > tag + 3) return text;
  int value = 0;
  for (size_t i = tag; i < close; ++i) {
    if (text[i] < '0' || text[i] > '9') return text;
    value = value * 10 + (text[i] - '0');
  }
  switch (static_cast<StatusCode>(value)) {
    case StatusCode::kMismatch:
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kCancelled: *code = static_cast<StatusCode>(value); break;
    default: return text;  // not a code a tensor's round is abandoned with
  }
  return text.substr(close + 2);
}

}  // namespace

ServerClient::ServerClient(const Config& config, std::shared_ptr<Store> store,
                           std::unique_ptr<transport::Transport> transport, Callbacks callbacks)
    : config_(config), store_(std::move(store)), transport_(std::move(transport)),
      callbacks_(std::move(callbacks)) {}

ServerClient::~ServerClient() { Close(); }

Status ServerClient::WaitForServer(int server, int num_servers, std::string* addr) {
  // Saying every few seconds (once per machine) what it waits for.
  const auto started = std::chrono::steady_clock::now();
  return GetInSlices(store_.get(), "server/" + std::to_string(server), config_.rendezvous_timeout_seconds,
                     kWaitNoteSeconds,
                     [&] {
                       if (config_.local_rank == 0) {
                         BPS_LOG(Warning) << "waiting for server " << server << " of " << num_servers
                                          << " to register (" << server << " registered so far); still waiting "
                                          << WaitProgress(started, config_.rendezvous_timeout_seconds)
                                          << "; check DMLC_NUM_SERVER and that the servers started";
                       }
                       return true;
                     },
                     addr);
}

Status ServerClient::Connect(int num_servers) {
  conns_.assign(num_servers, {});
  addresses_.assign(num_servers, "");
  for (int i = 0; i < num_servers; ++i) {
    std::string addr;
    Status st = WaitForServer(i, num_servers, &addr);
    if (st.code() == StatusCode::kTimeout) {
      return Status::Timeout("server " + std::to_string(i) + " of " + std::to_string(num_servers) +
                             " never registered within " +
                             std::to_string(static_cast<int>(config_.rendezvous_timeout_seconds)) +
                             " s (check DMLC_NUM_SERVER and that the servers started)");
    }
    BPS_RETURN_IF_ERROR(st);
    addresses_[i] = addr;
    transport::Handlers handlers;
    handlers.frames = &PsFrameRules();
    handlers.unexpected = [this](transport::Connection* c, const transport::FrameHeader& h,
                                 const std::string& payload) { OnUnexpected(c, FromFrame(h), payload); };
    handlers.closed = [this](transport::Connection* c, const Status& reason) { OnClosed(c, reason); };
    for (int k = 0; k < config_.connections_per_server; ++k) {
      std::shared_ptr<transport::Connection> conn;
      BPS_RETURN_IF_ERROR(transport_->Connect(addr, "server " + std::to_string(i) + " (" + addr + ")",
                                              config_.rendezvous_timeout_seconds, handlers, &conn));
      conns_[i].push_back(conn);
    }
  }
  return Status::OK();
}

std::shared_ptr<PendingPull> ServerClient::Push(const PushRequest& r, std::function<bool()> on_received) {
  auto& conns = conns_[r.server];
  transport::Connection* conn = conns[r.key % conns.size()].get();
  auto pull = std::make_shared<PendingPull>();
  pull->dst = r.dst;
  const uint64_t answer_bytes = r.answer_bytes ? r.answer_bytes : r.bytes;
  pull->bytes = answer_bytes;
  pull->round = r.round;
  pull->io = r.io;
  pull->conn = conn;
  pull->on_received = std::move(on_received);
  r.io->in_flight.fetch_add(2, std::memory_order_acq_rel);  // the receive and the push below
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_[r.key] = pull;
  }
  // Posted before the push leaves: the answer may come at once.
  const uint64_t key = r.key;
  conn->PostReceive(key, r.round, r.dst, answer_bytes, [this, pull, key](const Status& st) {
    // Not OK: cancelled (the op failed), an error frame (state already 2),
    // or the connection was lost (the engine fails as a whole).
    if (st.ok()) pull->state.store(1, std::memory_order_release);
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = pending_.find(key);
      if (it != pending_.end() && it->second == pull) pending_.erase(it);
    }
    const bool credit = pull->Received();  // the receive ended before any receipt
    // The engine waits for a partition's answers and sends together
    // (AwaitAnswer, RetireFailed): only the last of them wakes it, not each
    // (issue 38: a wakeup per event is a context switch on a busy host).
    if (pull->Release() || credit) callbacks_.ring();
  });
  MessageHeader h;
  h.type = static_cast<uint16_t>(MessageType::kPush);
  h.key = r.key;
  h.name_hash = r.name_hash;
  h.round = r.round;
  h.partition = r.partition;
  h.payload_bytes = r.bytes;
  h.sender_rank = static_cast<uint32_t>(config_.rank());
  h.dtype = static_cast<uint8_t>(r.dtype);
  h.num_contributors = static_cast<uint16_t>(config_.num_worker);
  h.flags = (r.average ? kFlagAverage : 0) | (config_.enable_async ? kFlagAsync : 0) |
            (r.compressed ? kFlagCompressed : 0);
  h.signature = static_cast<uint32_t>(r.signature);
  h.partition_bytes = static_cast<uint32_t>(r.partition_bytes);
  h.tensor_bytes = r.tensor_bytes;
  conn->Send(ToFrame(h), r.data, [this, io = r.io](const Status&) {
    if (io->in_flight.fetch_sub(1, std::memory_order_acq_rel) == 1) callbacks_.ring();
  });
  return pull;
}

void ServerClient::RelayTensorError(uint64_t name_hash, uint32_t name_op, const Status& failure) {
  auto payload = std::make_shared<std::string>(WithCode(failure).substr(0, kMaxErrorPayloadBytes));
  for (auto& conns : conns_) {
    if (conns.empty()) continue;
    MessageHeader h;
    h.type = static_cast<uint16_t>(MessageType::kError);
    h.flags = kFlagTensorError;
    h.key = kRelayedOpTag | name_op;  // servers pass the key on unchanged
    h.name_hash = name_hash;
    h.payload_bytes = payload->size();
    conns[0]->SendOwned(ToFrame(h), payload, payload->data());
  }
}

std::vector<TensorError> ServerClient::TakeTensorErrors() {
  std::vector<TensorError> errors;
  std::lock_guard<std::mutex> lock(mu_);
  errors.swap(tensor_errors_);
  return errors;
}

void ServerClient::OnUnexpected(transport::Connection* conn, const MessageHeader& h, const std::string& payload) {
  if (h.type == static_cast<uint16_t>(MessageType::kReceived)) {
    std::shared_ptr<PendingPull> pull;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = pending_.find(h.key);
      if (it != pending_.end() && it->second->round == h.round) pull = it->second;
    }
    if (pull && pull->Received()) callbacks_.ring();  // a partition waits for the credit
    return;
  }
  if (h.type != static_cast<uint16_t>(MessageType::kError)) return;  // e.g. the answer of a cancelled pull
  if (h.flags & kFlagTensorError) {
    // Fails every op of that tensor (this generation), on the engine thread.
    // A worker's relay names the op it failed (kRelayedOpTag); a server's own
    // finding concerns every pending op of the name.
    const bool relayed = (h.key & ~uint64_t{0xffffffff}) == kRelayedOpTag;
    std::lock_guard<std::mutex> lock(mu_);
    TensorError error{h.name_hash, relayed ? static_cast<uint32_t>(h.key) : 0, StatusCode::kMismatch, ""};
    error.why = TakeCode(payload, &error.code);
    tensor_errors_.push_back(std::move(error));
  }
  if (h.key == 0) {
    callbacks_.fail(Status::PeerFailure(payload + " (reported by " + conn->peer_name() + ")"));
    return;
  }
  std::shared_ptr<PendingPull> pull;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(h.key);
    if (it != pending_.end()) pull = it->second;
  }
  if (!pull) return;
  pull->error = TakeCode(payload, &pull->error_code);
  pull->state.store(2, std::memory_order_release);
  pull->conn->CancelReceive(h.key);  // its callback releases the pull
  callbacks_.ring();
}

void ServerClient::OnClosed(transport::Connection* conn, const Status& reason) {
  callbacks_.ring();
  if (quiescing_) return;
  callbacks_.fail(Status::PeerFailure("lost " + conn->peer_name() + ": " + reason.message()));
}

void ServerClient::SayGoodbye(const Status& failure) {
  auto text = std::make_shared<std::string>(failure.message().substr(0, kMaxErrorPayloadBytes));
  for (auto& conns : conns_) {
    for (auto& c : conns) {
      MessageHeader h;
      if (!failure.ok()) {
        h.type = static_cast<uint16_t>(MessageType::kError);
        h.payload_bytes = text->size();
      } else {
        h.type = static_cast<uint16_t>(MessageType::kBye);
      }
      c->SendOwned(ToFrame(h), text, text->data());
    }
  }
}

void ServerClient::Close() {
  quiescing_ = true;  // the closes below are not failures
  for (auto& conns : conns_) {
    for (auto& c : conns) c->Close(Status::Shutdown("shutdown"));
  }
  conns_.clear();
  transport_.reset();  // stops its I/O thread
  std::lock_guard<std::mutex> lock(mu_);
  pending_.clear();
}

}  // namespace bps
