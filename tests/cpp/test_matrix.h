// What every parameterised C++ suite runs over: each transport
// (csrc/transport/<name>/) and each machine-local reducer (csrc/local/).
// A sibling implementation (an RDMA transport, another host reducer) is one
// entry here, and every suite that takes the matrix runs on it.
#pragma once
#include <string>
#include <vector>

#include "local/local_reducer.h"

namespace bps {
namespace testing_support {

inline std::vector<std::string> Transports() { return {"tcp"}; }

// Host reducers, by name and factory (EngineOptions::host_reducer).
struct NamedHostReducer {
  std::string name;
  HostReducerFactory create;
};
inline std::vector<NamedHostReducer> Reducers() { return {{"shm", &CreateShmLocalReducer}}; }

// Every case once per transport and reducer (a case has `transport`,
// `reducer` and `host_reducer` members, e.g. JobShape).
template <typename Case>
std::vector<Case> OverEveryTransportAndReducer(const std::vector<Case>& cases) {
  std::vector<Case> out;
  for (const std::string& t : Transports()) {
    for (const NamedHostReducer& r : Reducers()) {
      for (Case c : cases) {
        c.transport = t;
        c.reducer = r.name;
        c.host_reducer = r.create;
        out.push_back(c);
      }
    }
  }
  return out;
}

}  // namespace testing_support
}  // namespace bps
