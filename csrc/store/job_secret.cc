#include "store/job_secret.h"

#include <atomic>

#include "common/logging.h"
#include "common/sha256.h"

namespace bps {
namespace {

const char kHowToSetOne[] =
    "set the same secret on every process of the job, e.g. "
    "export BYTEPS_JOB_TOKEN=$(python3 -c 'import secrets; print(secrets.token_hex(16))'), "
    "or BYTEPS_JOB_TOKEN_FILE=<a file only the job can read> (bpslaunch generates one for the jobs it starts)";

std::string FreshSecret() {
  unsigned char raw[32];
  SecureRandom(raw, sizeof(raw));
  static const char* digits = "0123456789abcdef";
  std::string hex;
  for (unsigned char b : raw) {
    hex += digits[b >> 4];
    hex += digits[b & 15];
  }
  return hex;
}

// Whether the job's processes connect to each other, the connections the
// secret authenticates: across machines, to dedicated servers, or when forced
// through servers on one machine. One machine alone reduces through shared
// memory and opens none: whoever reads its secret from the store can join
// nothing, so the warning would ask the user to act on nothing (issue 27).
bool OpensConnections(const Config& c) {
  return c.distributed() || c.num_server > 0 || c.role != Role::kWorker;
}

}  // namespace

Status RequireRoleModeSecret(const std::string& token, const std::string& who) {
  if (!token.empty()) return Status::OK();
  if (!InsecureModeRequested()) {
    return Status::Invalid(who + ": BYTEPS_JOB_TOKEN is not set, and every connection of a job is authenticated "
                                 "with it: " + kHowToSetOne +
                           ". To run without authentication on a network you trust, set BYTEPS_INSECURE=1");
  }
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true)) {
    BPS_LOG(Warning) << who << ": BYTEPS_INSECURE=1 and no BYTEPS_JOB_TOKEN: anyone who reaches this job's "
                     << "ports can join it, read its tensors and stop it";
  }
  return Status::OK();
}

Status ShareJobSecret(Store* store, Config* config) {
  if (!config->job_token.empty()) return Status::OK();  // from the environment or a file: never in the store
  std::string proposal = FreshSecret();
  int64_t claim = 0;
  BPS_RETURN_IF_ERROR(store->Add("job_token_claim", 1, &claim));
  if (claim == 1) {
    BPS_RETURN_IF_ERROR(store->Set("job_token", proposal));
    if (!InsecureModeRequested() && OpensConnections(*config)) {
      BPS_LOG(Warning) << "no BYTEPS_JOB_TOKEN: the job's secret is shared through the framework's store "
                       << "(torch's TCPStore is unauthenticated: whoever reaches MASTER_PORT can read it and join); "
                       << kHowToSetOne;
    }
  }
  return store->Get("job_token", config->rendezvous_timeout_seconds, &config->job_token);
}

}  // namespace bps
