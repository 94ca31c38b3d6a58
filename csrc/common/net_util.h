// Socket helpers: address resolution, interface lookup, connect with timeout.
#pragma once
#include <netinet/in.h>

#include <chrono>
#include <functional>
#include <string>

#include "common/status.h"

namespace bps {

struct HostPort {
  std::string host;
  int port = 0;
  std::string ToString() const { return host + ":" + std::to_string(port); }
};

Status ParseHostPort(const std::string& text, HostPort* out);
Status ResolveIPv4(const std::string& host, sockaddr_in* out);
// IPv4 address of a network interface, e.g. "eth0" -> "10.0.0.2".
Status InterfaceAddress(const std::string& interface, std::string* address);
// How often a wait that is still going on says so (connects, rendezvous).
constexpr int kWaitNoteSeconds = 4;
// How far such a wait is, for its note: "(12 s of 300 s,
// BYTEPS_RENDEZVOUS_TIMEOUT)", or "(12 s)" when it has no limit (< 0).
std::string WaitProgress(std::chrono::steady_clock::time_point started, double limit_seconds);
// Connects (blocking) with retries until deadline; returns a blocking fd.
// `waiting_for` (e.g. "the scheduler"): say so every few seconds while the
// peer is not there yet, so a long wait is never silent. `give_up` (if set)
// is asked before each retry: true (with the reason) ends the wait at once,
// e.g. when the job was aborted while a peer it waits for is gone for good.
Status ConnectWithRetry(const HostPort& target, double timeout_seconds, int* fd_out,
                        const char* waiting_for = nullptr,
                        const std::function<bool(std::string* why)>& give_up = nullptr);
// Listens on host:port (port 0 = ephemeral); returns the bound port.
Status ListenOn(const std::string& host, int port, int backlog, int* fd_out, int* bound_port);
// Local address of a connected socket (the interface that routes to the peer).
std::string LocalAddressOf(int fd);
std::string PeerAddressOf(int fd);
void SetNoDelay(int fd);
// Transport-level heartbeats: TCP keepalive probes and a user timeout derived
// from BYTEPS_TIMEOUT, so a peer that vanishes without FIN/RST (power loss,
// partition) breaks the connection within about 2/3 of the timeout, even when
// no operation is pending.
void SetLivenessProbes(int fd, double timeout_seconds);
void SetNonBlocking(int fd, bool on);
// Blocking full read/write with a deadline; used by handshakes and the store.
Status WriteFully(int fd, const void* data, size_t len, int timeout_ms);
Status ReadFully(int fd, void* data, size_t len, int timeout_ms);

}  // namespace bps

namespace bps {
// The local IPv4 address the kernel would use to reach `host` (UDP connect
// trick; sends nothing). Empty when there is no route.
std::string RouteAddressTo(const std::string& host);
}  // namespace bps
