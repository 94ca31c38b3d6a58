// The TCP implementation of transport.h (created through CreateTransport).
#pragma once
#include <memory>

#include "transport/transport.h"

namespace bps {
namespace transport {

std::unique_ptr<Transport> CreateTcpTransport(const TransportOptions& options);

}  // namespace transport
}  // namespace bps
