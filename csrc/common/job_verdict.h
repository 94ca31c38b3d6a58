// The scheduler's verdict that a job failed, shared by everything in this
// process that waits during start-up. The store client notes it as soon as
// any of its requests learns it (the abort watcher's, a rendezvous wait's);
// waits that do not go through the store -- connect retries to a server
// that left on the abort -- end on it within one retry instead of running
// out BYTEPS_RENDEZVOUS_TIMEOUT (issue 30: survivors of a kill during
// start-up named it after 20 s while the scheduler knew at once).
//
// Keyed by the job's secret, so a process that starts another job (a test,
// an elastic restart with a new token) is not failed by an old verdict; an
// aborted job stays aborted (the scheduler never clears "abort").
#pragma once
#include <string>

namespace bps {

void NoteJobAborted(const std::string& job_token, const std::string& why);
// True, with the verdict, once the job of `job_token` was aborted.
bool JobAborted(const std::string& job_token, std::string* why);

}  // namespace bps
