// Accepts connections on a listening socket and runs their handshakes inside
// an event loop, so that no stranger can hold a thread, outlive the owner, or
// stop rendezvous:
// - no thread per connection: each handshake is a small non-blocking state
//   machine (send challenge, read hello, send answer) driven by the loop;
// - a deadline per connection (not per read), so a slow drip is dropped;
// - at most `max_pending` handshakes at once: a new connection evicts the
//   oldest pending one (peers of the job finish in milliseconds, a drip does
//   not), which also keeps file descriptors for the job's own peers;
// - accept() failing for lack of file descriptors frees the oldest pending
//   handshake, or pauses listening briefly, instead of spinning.
// Stop() is synchronous: once it returns no callback runs, so the owner may
// be destroyed.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "transport/tcp/handshake.h"
#include "transport/tcp/event_loop.h"

namespace bps {

class HandshakeAcceptor {
 public:
  // Called on the loop thread for each peer that proved the token; takes
  // ownership of fd (non-blocking).
  using OnAdmitted = std::function<void(int fd, const PeerIdentity& peer)>;
  struct Options {
    double deadline_seconds = 10;
    int max_pending = 128;
    std::string owner = "server";  // for log lines: "scheduler", "server 0"
  };
  HandshakeAcceptor(EventLoop* loop, int listen_fd, std::string token, Options options, OnAdmitted on_admitted);
  ~HandshakeAcceptor();
  void Start();
  void Stop();
  // Handshakes accepted and not yet over (thread-safe).
  int pending() const;

  struct Core;  // shared with the loop's pollables, which may outlive this object

 private:
  std::shared_ptr<Core> core_;
};

}  // namespace bps
