#include "core/rendezvous.h"

#include <cstdio>

#include <unistd.h>

#include <algorithm>
#include <functional>
#include <chrono>
#include <vector>

#include "common/logging.h"
#include "common/net_util.h"
#include "common/sha256.h"

namespace bps {
namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

std::string RandomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  SecureRandom(&raw[0], bytes);
  return ToHex(raw.data(), raw.size());
}

// Where this process's servers should listen / be reached.
std::string ChooseListenHost(const Config& c, const std::string& fallback_route) {
  if (!c.node_host.empty()) return c.node_host;
  if (!c.interface.empty()) {
    std::string addr;
    if (InterfaceAddress(c.interface, &addr).ok()) return addr;
  }
  if (!fallback_route.empty()) return fallback_route;
  const char* master = getenv("MASTER_ADDR");
  if (master) {
    std::string route = RouteAddressTo(master);
    if (!route.empty()) return route;
  }
  return "127.0.0.1";
}

// Keys of an adapter-supplied store (torch's) live under bps/<attempt>/: each
// torchrun restart rendezvouses afresh. Dedicated servers use the same prefix.
std::shared_ptr<Store> AdapterStore(std::shared_ptr<Store> adapter_store) {
  const char* restart = getenv("TORCHELASTIC_RESTART_COUNT");
  std::string prefix = "bps/" + std::string(restart && *restart ? restart : "0") + "/";
  return std::make_shared<PrefixStore>(prefix, std::move(adapter_store));
}

// The first member to arrive publishes `proposal` under `key`; everyone
// (the first included) reads back the one published value.
Status PublishOnce(Store* store, const std::string& key, const std::string& proposal, double timeout_seconds,
                   std::string* value) {
  int64_t claim = 0;
  BPS_RETURN_IF_ERROR(store->Add(key + "_claim", 1, &claim));
  if (claim == 1) BPS_RETURN_IF_ERROR(store->Set(key, proposal));
  return store->Get(key, timeout_seconds, value);
}

// Servers take ids in registration order; more than DMLC_NUM_SERVER is an error.
Status ClaimServerId(Store* store, const Config& config, int* id) {
  int64_t count = 0;
  BPS_RETURN_IF_ERROR(store->Add("server_count", 1, &count));
  if (count > config.num_server) {
    return Status::Invalid("more servers started than DMLC_NUM_SERVER=" + std::to_string(config.num_server));
  }
  *id = static_cast<int>(count - 1);
  return Status::OK();
}

// Waits for one rendezvous key (another member's entry) until the
// rendezvous deadline, in slices of a second so that a job aborted meanwhile
// (a duplicate rank, the scheduler's verdict) ends the wait with its reason;
// local rank 0 says every kWaitNoteSeconds what it still waits for. A
// timeout returns StatusCode::kTimeout: the caller names what was missing.
class RendezvousWait {
 public:
  RendezvousWait(Store* store, const Config& config)
      : store_(store), config_(config), started_(Clock::now()),
        deadline_(started_ + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(config.rendezvous_timeout_seconds))),
        next_note_(started_ + std::chrono::seconds(kWaitNoteSeconds)) {}

  Status Get(const std::string& key, std::string* value, const std::function<std::string()>& waiting_for) {
    for (;;) {
      const double left = std::max(0.0, std::chrono::duration<double>(deadline_ - Clock::now()).count());
      Status st = store_->Get(key, std::min(left, 1.0), value);
      if (st.code() != StatusCode::kTimeout || Clock::now() >= deadline_) return st;
      std::string why;
      if (store_->Get("abort", 0, &why).ok()) return Status::PeerFailure("job aborted: " + why);
      if (Clock::now() >= next_note_) {
        next_note_ += std::chrono::seconds(kWaitNoteSeconds);
        // One line per machine: its ranks all wait for the same ones.
        if (config_.local_rank == 0) {
          BPS_LOG(Warning) << "waiting for the other workers: " << waiting_for() << "; still waiting "
                           << WaitProgress(started_, config_.rendezvous_timeout_seconds);
        }
      }
    }
  }

 private:
  Store* store_;
  const Config& config_;
  const Clock::time_point started_, deadline_;
  Clock::time_point next_note_;
};

// Every rank publishes its machine's local size under machine/<DMLC_WORKER_ID>
// and reads every machine's, filling config->machine_local_sizes.
static Status MeetMachineSizes(Store* store, Config* config) {
  const Config& c = *config;
  // The scheduler checks the machine count at once (a worker waiting for a
  // machine that never comes then ends with its verdict, not a timeout).
  BPS_RETURN_IF_ERROR(store->Set("machine_count", std::to_string(c.num_worker)));
  BPS_RETURN_IF_ERROR(store->Set("machine/" + std::to_string(c.worker_id), std::to_string(c.local_size)));
  std::vector<int> sizes(static_cast<size_t>(c.num_worker), 0);
  RendezvousWait wait(store, c);
  for (int m = 0; m < c.num_worker; ++m) {
    std::string value;
    Status st = wait.Get("machine/" + std::to_string(m), &value, [&] {
      return MachinesArrived(store) + " (machine " + std::to_string(m) + " not yet)";
    });
    if (st.code() == StatusCode::kTimeout) {
      int arrived = 0;
      for (int q = 0; q < c.num_worker; ++q) arrived += q < m || store->Get("machine/" + std::to_string(q), 0, &value).ok();
      return Status::Timeout("rendezvous timed out after " +
                             std::to_string(static_cast<int>(c.rendezvous_timeout_seconds)) + " s: " +
                             std::to_string(arrived) + " of " + std::to_string(c.num_worker) +
                             " workers arrived (machine " + std::to_string(m) + ", DMLC_WORKER_ID=" +
                             std::to_string(m) + ", is missing; check DMLC_NUM_WORKER on every machine)");
    }
    BPS_RETURN_IF_ERROR(st);
    sizes[m] = atoi(value.c_str());
    if (m == c.worker_id && sizes[m] != c.local_size) {
      return Status::Invalid("machine " + std::to_string(m) + " has local ranks that disagree on BYTEPS_LOCAL_SIZE (" +
                             value + " and " + std::to_string(c.local_size) +
                             ", or two machines share DMLC_WORKER_ID=" + std::to_string(m) +
                             "): set it alike on the machine's ranks");
    }
  }
  config->machine_local_sizes = sizes;
  return Status::OK();
}

Status RendezvousWorkers(Store* store, Config* config) {
  const Config& c = *config;
  if (c.job_id.empty()) {
    BPS_RETURN_IF_ERROR(PublishOnce(store, "job_id", RandomHex(4), c.rendezvous_timeout_seconds, &config->job_id));
  }
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  // A rank claimed twice (two machines with one DMLC_WORKER_ID) would run
  // with a rank missing and silently wrong sums: refuse it, and tell everyone.
  // Claimed by machine and local rank, before the machines meet: the global
  // rank needs every machine's size, and a duplicate must not wait for them.
  const std::string member = std::to_string(c.worker_id) + "/" + std::to_string(c.local_rank);
  int64_t claims = 0;
  BPS_RETURN_IF_ERROR(store->Add("worker_claim/" + member, 1, &claims));
  std::string first;  // "local_size host pid" of the earlier claim
  if (claims > 1) store->Get("member/" + member, 5, &first);
  char first_host[256] = {0};
  long long first_pid = 0;
  if (sscanf(first.c_str(), "%*d %255s %lld", first_host, &first_pid) == 2) {
    first = Printable(first_host) + " pid " + std::to_string(first_pid);  // another process's text
  } else {
    first.clear();
  }
  // This very process retrying Init (after a timed-out rendezvous) is no duplicate.
  const bool retry_by_me = first == std::string(host) + " pid " + std::to_string(getpid());
  if (claims > 1 && !retry_by_me) {
    std::string why = "rank " + std::to_string(c.rank()) + " (DMLC_WORKER_ID=" + std::to_string(c.worker_id) +
                      ", BYTEPS_LOCAL_RANK=" + std::to_string(c.local_rank) + ") joined twice: by " + host +
                      " pid " + std::to_string(getpid()) + " and earlier by " +
                      (first.empty() ? std::string("another process") : first) +
                      "; give each machine its own DMLC_WORKER_ID (0 to DMLC_NUM_WORKER-1)";
    store->Set("abort", why);  // every member's watcher fails with this
    return Status::Invalid(why);
  }
  BPS_RETURN_IF_ERROR(
      store->Set("member/" + member, std::to_string(c.local_size) + " " + host + " " + std::to_string(getpid())));
  // Machines may differ in size (issue 29): each publishes its local size,
  // and a rank's global rank is its local rank plus the earlier machines' sizes.
  BPS_RETURN_IF_ERROR(MeetMachineSizes(store, config));
  // Settings every worker must share ride along, so a difference fails every
  // rank here, naming both values, instead of as a size mismatch per tensor.
  BPS_RETURN_IF_ERROR(store->Set("worker/" + std::to_string(c.rank()),
                                  std::to_string(c.local_size) + " " + host + " " + std::to_string(getpid()) + " " +
                                      std::to_string(c.partition_bytes) + " " + (c.enable_async ? "1" : "0") + " " +
                                      std::to_string(c.PartitionBytesFor(true))));
  BPS_RETURN_IF_ERROR(store->Set("size", std::to_string(c.size())));  // servers wait for this many
  int64_t joined = 0;
  BPS_RETURN_IF_ERROR(store->Add("workers_joined", 1, &joined));
  RendezvousWait wait(store, c);
  for (int q = 0; q < c.size(); ++q) {
    std::string value;
    Status st = wait.Get("worker/" + std::to_string(q), &value, [&] {
      store->Add("workers_joined", 0, &joined);
      return std::to_string(joined) + " of " + std::to_string(c.size()) + " ranks arrived (rank " + std::to_string(q) +
             " not yet)";
    });
    if (st.code() == StatusCode::kTimeout) {
      store->Add("workers_joined", 0, &joined);
      return Status::Timeout("rendezvous timed out after " + std::to_string(static_cast<int>(c.rendezvous_timeout_seconds)) +
                             " s: " + std::to_string(joined) + " of " + std::to_string(c.size()) +
                             " workers arrived (rank " + std::to_string(q) +
                             " is missing; check DMLC_NUM_WORKER / BYTEPS_LOCAL_SIZE on every machine)");
    }
    BPS_RETURN_IF_ERROR(st);
    long long their_partition = 0, their_device_partition = 0;
    int their_async = 0;
    if (sscanf(value.c_str(), "%*d %*s %*d %lld %d %lld", &their_partition, &their_async, &their_device_partition) ==
        3) {
      // Both sizes: one rank that set BYTEPS_PARTITION_BYTES to the host
      // default still cuts device tensors otherwise than one that did not.
      if (their_partition != c.partition_bytes || their_device_partition != c.PartitionBytesFor(true)) {
        auto sizes = [](long long host, long long device) {
          return std::to_string(host) + (device == host ? "" : " (device tensors " + std::to_string(device) + ")");
        };
        return Status::Invalid("rank " + std::to_string(q) + " runs with BYTEPS_PARTITION_BYTES=" +
                               sizes(their_partition, their_device_partition) + " but this rank with " +
                               sizes(c.partition_bytes, c.PartitionBytesFor(true)) +
                               " (rounded up to 64; unset, host and device tensors differ): set it alike on every "
                               "process");
      }
      if ((their_async != 0) != c.enable_async) {
        return Status::Invalid("rank " + std::to_string(q) + " runs with BYTEPS_ENABLE_ASYNC=" +
                               std::to_string(their_async) + " but this rank with " + (c.enable_async ? "1" : "0") +
                               ": set it alike on every worker and server");
      }
    }
  }
  // The scheduler checks what workers publish (against its own
  // DMLC_NUM_WORKER too) and posts its verdict before it answers: workers
  // that agree among themselves would otherwise go on to servers that left.
  std::string why;
  if (store->Get("abort", 0, &why).ok()) return Status::PeerFailure("job aborted: " + why);
  return Status::OK();
}

}  // namespace bps
