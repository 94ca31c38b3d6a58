// The NCCL communicators among one machine's local ranks (one GPU each).
//
// Two communicators, because NCCL requires every rank to issue the
// collectives of one communicator in the same order: reduce-scatters (and
// one-machine all-reduces) are issued in submission order, while all-gathers
// wait for the network, whose answers arrive in a different order on each
// rank; each kind keeps its own consistent sequence on its own communicator.
#pragma once
#include <nccl.h>

#include <memory>

#include "common/config.h"
#include "common/status.h"
#include "store/store.h"

namespace bps {
namespace gpu {

struct LocalCommunicators {
  ncclComm_t reduce = nullptr;  // all-reduce (one machine) / reduce-scatter
  ncclComm_t gather = nullptr;  // all-gather after the network (several machines)

  // Collective over the machine's local ranks; local rank 0 makes the unique
  // ids and shares them through the engine's rendezvous store. `device` must
  // be current on the calling thread.
  static Status Create(Store& store, const Config& config, LocalCommunicators* out);
  // Unblocks kernels stuck on a dead peer, then frees the communicators.
  void Abort();
  void Destroy();
};

}  // namespace gpu
}  // namespace bps
