// The TCP implementation of transport.h (created through CreateTransport).
#pragma once
#include <memory>

#include "transport/transport.h"

namespace bps {
namespace transport {

std::unique_ptr<Transport> CreateTcpTransport(const TransportOptions& options);
// A Stream over a socket that already passed the handshake (takes the fd);
// for harnesses that drive the handshake themselves (csrc/fuzz).
std::unique_ptr<Stream> AdoptTcpStream(int fd);

}  // namespace transport
}  // namespace bps
