#include "transport/tcp/framed_socket.h"

#include <sys/epoll.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "common/logging.h"
#include "common/net_util.h"

namespace bps {

FramedSocket::FramedSocket(int fd, EventLoop* loop, FramedSocketHandler* handler, std::string peer_name,
                           const transport::FrameRules* rules, const SocketTuning& tuning)
    : fd_(fd), loop_(loop), handler_(handler), rules_(rules), peer_name_(std::move(peer_name)),
      receive_low_water_(tuning.receive_low_water) {
  if (!tuning.congestion.empty() &&
      setsockopt(fd_, IPPROTO_TCP, TCP_CONGESTION, tuning.congestion.data(), tuning.congestion.size()) != 0) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true)) {
      BPS_LOG(Warning) << "TCP congestion control '" << tuning.congestion << "' (BYTEPS_TCP_CONGESTION) refused ("
                       << strerror(errno) << "); data connections keep the system's default";
    }
  }
  SetNonBlocking(fd_, true);
  SetNoDelay(fd_);
  // Large fixed buffers kept a 1-10 Gbit pipe full where the kernel's
  // defaults were small; a fixed size also turns the kernel's autotuning off
  // (and is capped at net.core.{r,w}mem_max), hence the choice (issue 26).
  if (tuning.buffer_bytes > 0) {
    int buf = static_cast<int>(tuning.buffer_bytes);
    setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
    setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
  }
}

FramedSocket::~FramedSocket() {
  if (fd_ >= 0) close(fd_);
}

void* FramedSocket::DiscardPayload() {
  static char sentinel;
  return &sentinel;
}

void FramedSocket::CancelReceive(const void* dst, std::function<void()> done) {
  auto self = shared_from_this();
  loop_->Post([self, dst, done = std::move(done)] {
    if (self->rx_in_payload_ && self->rx_dst_ == dst && !self->rx_discarding_) self->rx_discarding_ = true;
    done();
  });
}

void FramedSocket::Start() { loop_->Register(fd_, EPOLLIN | EPOLLRDHUP, shared_from_this()); }

void FramedSocket::Send(OutFrame msg) {
  std::vector<std::function<void()>> done;
  Status st;
  {
    std::lock_guard<std::mutex> lock(send_mu_);
    if (closed_) {
      st = Status::PeerFailure("connection to " + peer_name_ + " is closed");
    } else {
      const bool large = msg.header.payload_bytes > kInlineWriteBytes;
      send_queue_.push_back(std::move(msg));
      if (waiting_writable_) {
        // The loop writes the queue once the socket takes more.
      } else if (large && !loop_->InLoopThread()) {
        // Large payloads are copied into the socket by the connection's own
        // I/O thread, not by the caller (the engine thread, or the server
        // loop that completed a round): with several connections the copies
        // then run on several cores. The socket is writable, so the loop
        // wakes at once.
        waiting_writable_ = true;
        loop_->Modify(fd_, EPOLLIN | EPOLLOUT | EPOLLRDHUP);
      } else {
        st = FlushLocked(&done);
      }
      msg.on_sent = nullptr;
    }
  }
  for (auto& fn : done) fn();
  if (!st.ok()) {
    if (msg.on_sent) msg.on_sent(st);
    Close(st);
  }
}

Status FramedSocket::FlushLocked(std::vector<std::function<void()>>* done) {
  while (!send_queue_.empty()) {
    iovec iov[64];
    int count = 0;
    size_t skip = front_written_;
    for (auto it = send_queue_.begin(); it != send_queue_.end() && count < 62; ++it) {
      const size_t hdr = sizeof(transport::FrameHeader);
      if (skip < hdr) {
        iov[count++] = {reinterpret_cast<char*>(&it->header) + skip, hdr - skip};
        if (it->header.payload_bytes) iov[count++] = {const_cast<void*>(it->payload), it->header.payload_bytes};
      } else {
        size_t off = skip - hdr;
        iov[count++] = {static_cast<char*>(const_cast<void*>(it->payload)) + off, it->header.payload_bytes - off};
      }
      skip = 0;
    }
    msghdr mh{};
    mh.msg_iov = iov;
    mh.msg_iovlen = count;
    ssize_t n = sendmsg(fd_, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (!waiting_writable_) {
          waiting_writable_ = true;
          loop_->Modify(fd_, EPOLLIN | EPOLLOUT | EPOLLRDHUP);
        }
        return Status::OK();
      }
      if (errno == EINTR) continue;
      return Status::PeerFailure("connection to " + peer_name_ + " broke while sending: " + strerror(errno));
    }
    size_t written = static_cast<size_t>(n) + front_written_;
    front_written_ = 0;
    while (!send_queue_.empty()) {
      size_t total = sizeof(transport::FrameHeader) + send_queue_.front().header.payload_bytes;
      if (written < total) {
        front_written_ = written;
        break;
      }
      written -= total;
      OutFrame& m = send_queue_.front();
      if (m.on_sent) done->push_back([cb = std::move(m.on_sent)] { cb(Status::OK()); });
      send_queue_.pop_front();
    }
  }
  if (waiting_writable_) {
    waiting_writable_ = false;
    loop_->Modify(fd_, EPOLLIN | EPOLLRDHUP);
  }
  return Status::OK();
}

void FramedSocket::OnEvents(uint32_t events) {
  if (closed_) return;
  if (events & EPOLLOUT) {
    std::vector<std::function<void()>> done;
    Status st;
    {
      std::lock_guard<std::mutex> lock(send_mu_);
      st = FlushLocked(&done);
    }
    for (auto& fn : done) fn();
    if (!st.ok()) return CloseOnLoop(st);
  }
  if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) ReadAvailable();
}

void FramedSocket::ReadAvailable() {
  // Bounded work per wakeup keeps one busy peer from starving the others.
  for (int iterations = 0; iterations < 64 && !closed_; ++iterations) {
    if (!rx_in_payload_) {
      ssize_t n = recv(fd_, reinterpret_cast<char*>(&rx_header_) + rx_header_got_,
                       sizeof(transport::FrameHeader) - rx_header_got_, MSG_DONTWAIT);
      if (n == 0) return CloseOnLoop(Status::PeerFailure(peer_name_ + " closed the connection"));
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return ArmReceiveLowWater();
        return CloseOnLoop(Status::PeerFailure("connection to " + peer_name_ + " broke: " + strerror(errno)));
      }
      rx_header_got_ += static_cast<size_t>(n);
      if (rx_header_got_ < sizeof(transport::FrameHeader)) continue;
      Status st = transport::ValidateFrame(rx_header_, *rules_);
      if (!st.ok()) return CloseOnLoop(st.WithContext("invalid frame from " + peer_name_));
      Status reject;
      void* dst = handler_->OnHeader(this, rx_header_, &reject);
      if (!reject.ok()) return CloseOnLoop(reject);
      if (dst == nullptr && rx_header_.payload_bytes > 0) {
        if (rx_header_.payload_bytes > kMaxErrorPayloadBytes) {
          return CloseOnLoop(Status::PeerFailure("unexpected " + std::string(rules_->type_name(rx_header_.type)) +
                                                 " frame from " + peer_name_));
        }
        rx_small_.resize(rx_header_.payload_bytes);
        dst = rx_small_.data();
      }
      rx_discarding_ = dst == DiscardPayload();
      rx_dst_ = static_cast<char*>(dst);
      rx_payload_got_ = 0;
      rx_in_payload_ = true;
    }
    if (rx_payload_got_ < rx_header_.payload_bytes) {
      const size_t want = rx_header_.payload_bytes - rx_payload_got_;
      ssize_t n;
      if (rx_discarding_) {
        if (rx_scratch_.empty()) rx_scratch_.resize(256 << 10);
        n = recv(fd_, rx_scratch_.data(), std::min(want, rx_scratch_.size()), MSG_DONTWAIT);
      } else {
        n = recv(fd_, rx_dst_ + rx_payload_got_, want, MSG_DONTWAIT);
      }
      if (n == 0) return CloseOnLoop(Status::PeerFailure(peer_name_ + " closed the connection mid-message"));
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return ArmReceiveLowWater();
        return CloseOnLoop(Status::PeerFailure("connection to " + peer_name_ + " broke: " + strerror(errno)));
      }
      rx_payload_got_ += static_cast<size_t>(n);
      if (rx_payload_got_ < rx_header_.payload_bytes) continue;
    }
    rx_in_payload_ = false;
    rx_header_got_ = 0;
    transport::FrameHeader header = rx_header_;
    if (rx_discarding_) {
      rx_discarding_ = false;
      continue;
    }
    handler_->OnMessage(this, header, rx_dst_);
  }
  // Out of iterations with data left: re-arm for what is now needed, so the
  // level-triggered loop comes back for it.
  if (!closed_) ArmReceiveLowWater();
}

void FramedSocket::ArmReceiveLowWater() {
  // Without a low-water mark every arriving segment (64 KB with GSO) wakes
  // the loop for one recv; on a host whose cores are busy with copies, those
  // wakeups and context switches cost as much as the copies. Never above
  // what the current message still needs: its tail would not wake us. (The
  // kernel also wakes early under memory pressure or a closing window.)
  if (receive_low_water_ == 0) return;
  size_t needed = rx_in_payload_ ? rx_header_.payload_bytes - rx_payload_got_ : sizeof(transport::FrameHeader) - rx_header_got_;
  int mark = static_cast<int>(std::max<size_t>(1, std::min(needed, receive_low_water_)));
  if (mark == armed_low_water_) return;
  if (setsockopt(fd_, SOL_SOCKET, SO_RCVLOWAT, &mark, sizeof(mark)) == 0) armed_low_water_ = mark;
}

void FramedSocket::Close(const Status& reason) {
  auto self = shared_from_this();
  loop_->Post([self, reason] { self->CloseOnLoop(reason); });
}

void FramedSocket::CloseOnLoop(const Status& reason) {
  std::deque<OutFrame> pending;
  {
    std::lock_guard<std::mutex> lock(send_mu_);
    if (closed_.exchange(true)) return;
    pending.swap(send_queue_);
  }
  shutdown(fd_, SHUT_RDWR);
  loop_->Unregister(fd_);
  for (auto& m : pending) {
    if (m.on_sent) m.on_sent(reason);
  }
  handler_->OnClosed(this, reason);
}

}  // namespace bps
