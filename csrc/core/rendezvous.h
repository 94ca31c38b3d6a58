// Rendezvous of a job over a Store (gloo-style set/get/add): who publishes
// the job's secret and id, server id claims, the workers' meeting with its
// topology check, and which address a server listens on.
#pragma once
#include <memory>
#include <string>

#include "common/config.h"
#include "common/status.h"
#include "store/store.h"

namespace bps {

std::string RandomHex(size_t bytes);

// Where this process's servers should listen / be reached.
std::string ChooseListenHost(const Config& c, const std::string& fallback_route);

// An adapter-supplied store (torch's, through the C ABI), with this attempt's
// key prefix.
std::shared_ptr<Store> AdapterStore(std::shared_ptr<Store> adapter_store);

// The first member to arrive publishes `proposal` under `key`; everyone
// reads back the one published value.
Status PublishOnce(Store* store, const std::string& key, const std::string& proposal, double timeout_seconds,
                   std::string* value);

// Servers take ids in registration order; more than DMLC_NUM_SERVER is an error.
Status ClaimServerId(Store* store, const Config& config, int* id);

// Every worker registers and waits for all others; machines may run
// different local sizes (config->machine_local_sizes is filled, and with it
// rank() and size()); fills config->job_id if unset.
Status RendezvousWorkers(Store* store, Config* config);

}  // namespace bps
