// Role entry points: a dedicated server process (rendezvous at the
// scheduler, or through an adapter's store) and the scheduler process.
#include "c_api/roles.h"

#include <atomic>
#include <thread>

#include "c_api/c_store.h"
#include "common/logging.h"
#include "core/rendezvous.h"
#include "server/server.h"
#include "store/job_secret.h"
#include "store/tcp_store.h"

namespace bps {

Status RunServerRole() {
  Config c;
  BPS_RETURN_IF_ERROR(ConfigFromEnvironment(true, &c));
  if (c.role != Role::kServer) return Status::Invalid("bps_run_server needs DMLC_ROLE=server");
  HostPort at{c.root_uri, c.root_port};
  int id = 0;
  // Register anonymously for an id, then connect again as "server <id>", so
  // every failure report (scheduler, workers) names the server by its id.
  // The anonymous registration leaves only once the named connection is
  // open: the scheduler never sees this server with no connection at all.
  std::unique_ptr<TcpStoreClient> registration;
  BPS_RETURN_IF_ERROR(
      TcpStoreClient::Connect(at, c.job_token, Role::kServer, -1, c.rendezvous_timeout_seconds,
                                                c.timeout_seconds, &registration));
  Status claimed = ClaimServerId(registration.get(), c, &id);
  if (!claimed.ok()) {
    registration->Goodbye();
    return claimed;
  }
  std::unique_ptr<TcpStoreClient> client;
  BPS_RETURN_IF_ERROR(TcpStoreClient::Connect(at, c.job_token, Role::kServer, id,
                                              c.rendezvous_timeout_seconds, c.timeout_seconds, &client));
  registration->Goodbye();
  registration.reset();
  SetLogIdentity("server " + std::to_string(id));
  std::shared_ptr<Store> store(client.get(), [](Store*) {});
  Server server(c, store, id, ChooseListenHost(c, client->local_address()));
  // Like workers, a server follows the scheduler's verdict on the job.
  std::unique_ptr<TcpStoreClient> watch;
  std::atomic<bool> done{false};
  std::thread watcher;
  if (TcpStoreClient::Connect(at, c.job_token, Role::kServer, id, 30, c.timeout_seconds, &watch).ok()) {
    watcher = std::thread([&] {
      std::string why;
      while (!done) {
        Status s = watch->WatchAbort(AbortWatchIntervalSeconds(c.timeout_seconds), &why);
        if (done) return;
        if (s.ok()) return server.Abort(Status::PeerFailure("job aborted: " + why));
        if (s.code() != StatusCode::kTimeout) return server.Abort(Status::PeerFailure("lost the scheduler: " + s.message()));
      }
    });
  }
  Status st = server.Start();
  if (st.ok()) st = server.Wait(-1);
  done = true;
  server.Stop();
  if (st.ok()) {
    client->Goodbye();
  } else if (st.message().find("job aborted: ") == std::string::npos &&
             st.message().find("scheduler") == std::string::npos) {
    // The cause goes to the scheduler before we leave without goodbye, as a
    // failed worker's does: else the scheduler's verdict names this server's
    // disconnect, not the worker whose death ended the job (issue 30's
    // campaign: a worker killed during rendezvous, named by nobody).
    client->ReportFailure("server " + std::to_string(id) + ": " + st.message(), nullptr);
  }
  if (watch) watch->ShutdownSocket();
  if (watcher.joinable()) watcher.join();
  return st;
}

Status RunServerRoleWithStore(const bps_store& vtable) {
  Config c;
  BPS_RETURN_IF_ERROR(ConfigFromEnvironment(false, &c));
  if (c.role != Role::kServer) return Status::Invalid("bps_run_server_with_store needs DMLC_ROLE=server");
  std::shared_ptr<Store> store = AdapterStore(std::make_shared<CStore>(vtable));
  BPS_RETURN_IF_ERROR(ShareJobSecret(store.get(), &c));
  int id = 0;
  BPS_RETURN_IF_ERROR(ClaimServerId(store.get(), c, &id));
  SetLogIdentity("server " + std::to_string(id));
  Server server(c, store, id, ChooseListenHost(c, ""));
  Status st = server.Start();
  if (st.ok()) st = server.Wait(-1);
  server.Stop();
  return st;
}

Status RunSchedulerRole() {
  Config c;
  BPS_RETURN_IF_ERROR(ConfigFromEnvironment(true, &c));
  SetLogIdentity("scheduler");
  TcpStoreServer server(c.job_token, c.timeout_seconds);
  server.SetRendezvousTimeout(c.rendezvous_timeout_seconds);
  server.ExpectWorkerMachines(c.num_worker);
  Status st = server.Listen(c.root_uri, c.root_port);
  if (!st.ok() && st.message().find("Cannot assign requested address") == std::string::npos) return st;
  if (!st.ok()) {
    BPS_LOG(Warning) << st.message() << "; listening on every address instead";
    BPS_RETURN_IF_ERROR(server.Listen("0.0.0.0", c.root_port));
  }
  return server.ServeUntilDone(1);
}

}  // namespace bps
