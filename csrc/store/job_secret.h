// Where the job's handshake secret comes from, by launch mode
// (docs/reliability.md says which threats each covers):
// - BytePS role mode (a scheduler): BYTEPS_JOB_TOKEN or BYTEPS_JOB_TOKEN_FILE
//   on every process; without one a process refuses to start unless
//   BYTEPS_INSECURE=1 says the network is trusted.
// - An adapter's store (torchrun, TF): the same variables when set, and
//   nothing about the secret goes into the store; otherwise the first member
//   publishes a fresh secret in the store, which anyone who can read that
//   store can learn (torch's TCPStore is unauthenticated): a warning says so
//   where the job opens connections (several machines or servers); a job on
//   one machine opens none, so it has nothing to warn about.
#pragma once
#include <string>

#include "common/config.h"
#include "common/status.h"
#include "store/store.h"

namespace bps {

// For a process that meets its peers through the scheduler.
Status RequireRoleModeSecret(const std::string& token, const std::string& who);
// For a process that meets its peers through an adapter's store.
Status ShareJobSecret(Store* store, Config* config);

}  // namespace bps
