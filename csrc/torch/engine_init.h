// Starting the one engine of this process, either through a c10d Store
// (torchrun / init_process_group) or from the DMLC_* environment (bpslaunch).
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

namespace byteps_torch {

struct Topology {
  int rank;
  int size;
  int local_rank;
  int local_size;
};

// The machine-local part of the topology: LOCAL_RANK / LOCAL_WORLD_SIZE as
// torchrun sets them; without them every rank is assumed to share one machine.
Topology TopologyFromTorchrunEnv(int rank, int size);

// Rendezvous through `store` (kept alive for the rest of the process: the
// engine may consult it on control events). A no-op when the engine already
// runs with the same rank and size; an error naming both when it differs.
void InitEngineWithStore(const c10::intrusive_ptr<c10d::Store>& store, const Topology& topology);

// bps_init(NULL): the engine reads DMLC_* / BYTEPS_* itself.
void InitEngineFromEnv();

}  // namespace byteps_torch
