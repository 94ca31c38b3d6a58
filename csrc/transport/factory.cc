// Chooses a transport implementation by name; a new sibling folder
// (e.g. ibverbs/) adds one line here.
#include "transport/tcp/tcp_transport.h"
#include "transport/transport.h"

namespace bps {
namespace transport {

Status CreateTransport(const std::string& name, const TransportOptions& options, std::unique_ptr<Transport>* out) {
  if (name.empty() || name == "tcp") {
    *out = CreateTcpTransport(options);
    return Status::OK();
  }
  return Status::Invalid("unknown transport '" + name + "' (known: tcp)");
}

}  // namespace transport
}  // namespace bps
