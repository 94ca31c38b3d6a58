// Role entry points of dedicated processes (DMLC_ROLE=server / scheduler):
// each parses the environment once and runs until the job ends. Here, beside
// ProcessEngine, because a process's bootstrap is what puts core (the
// rendezvous) and server together; neither of those includes the other.
#pragma once
#include "c_api/byteps_c.h"
#include "common/status.h"

namespace bps {

// A server that rendezvouses at the scheduler (DMLC_PS_ROOT_URI/PORT).
Status RunServerRole();
// A server of a job that rendezvouses through an adapter's store (torchrun's
// TCPStore at MASTER_ADDR:MASTER_PORT).
Status RunServerRoleWithStore(const bps_store& store);
Status RunSchedulerRole();

}  // namespace bps
