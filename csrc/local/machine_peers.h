// The machine's other local ranks, as one rank sees them: a doorbell that
// wakes this rank's engine thread when a step may have become possible,
// whether a peer failed or died, telling them this rank failed, and the
// channel through which local rank 0 orders the machine's collectives. The
// data path of a push_pull is the LocalReducer's (local_reducer.h); this is
// what the engine's loop, watchdog and failure latch use.
//
// Implementations: ShmMachinePeers (the host reducer's shared control
// segment: shm_machine_peers.h). A device reducer has no group of its own
// (it rings and orders through the host's) but its collectives can fail or
// be ended: it is a PeerLiveness.
#pragma once
#include <cstdint>
#include <string>

#include "common/status.h"

namespace bps {

// The machine's order of collectives in shared memory (collective_order.h).
struct CollectiveOrderShm;

class PeerLiveness {
 public:
  virtual ~PeerLiveness() = default;
  // Whether another local rank failed (its reason) or, with `check_alive`,
  // died (checked only while this rank waits on them).
  virtual Status CheckPeers(bool check_alive) = 0;
  // This rank failed: the other local ranks learn `why` from CheckPeers, and
  // nothing of this rank waits on them any more.
  virtual void FailMachine(const std::string& why) = 0;
};

class MachinePeers : public PeerLiveness {
 public:
  // The machine's doorbell: rung whenever a step may have become possible.
  virtual uint32_t Doorbell() = 0;
  virtual void Ring() = 0;
  // Wakes only this rank's engine: for what concerns no other local rank
  // (its own network events and submissions). Ringing the whole machine for
  // those woke every local rank's engine thread per partition event: on two
  // cores, 4 local ranks x 2 machines switched context 2.3x as often with
  // 256 KB partitions as with 1 MB (issue 38).
  virtual void RingSelf() = 0;
  virtual void WaitDoorbell(uint32_t seen, int timeout_ms) = 0;
  // Leaves the machine's group (this rank no longer watched as alive).
  virtual void Leave() = 0;
  // The machine's order channel, for a device reducer of the same rank
  // (MachineLink); null if none.
  virtual CollectiveOrderShm* order_channel() = 0;
};

}  // namespace bps
