// The NCCL communicator among one machine's local ranks (one GPU each). One
// communicator and one stream carry every collective of the machine: the
// ordering rule (csrc/local/local_reducer.h) makes every rank issue them in
// one sequence, so a second communicator would only add a second order.
#pragma once
#include <nccl.h>

#include "common/config.h"
#include "common/status.h"
#include "store/store.h"

namespace bps {
namespace gpu {

// Collective over the machine's local ranks; local rank 0 makes the unique
// id and shares it through the engine's rendezvous store. The rank's device
// must be current on the calling thread.
Status CreateLocalCommunicator(Store& store, const Config& config, ncclComm_t* out);

}  // namespace gpu
}  // namespace bps
