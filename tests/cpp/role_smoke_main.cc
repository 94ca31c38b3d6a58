// One process of a small job, for the sanitizer smoke run
// (scripts/sanitize.sh): `bps_role_smoke` runs the role DMLC_ROLE names
// (scheduler, server or worker) through the C API. A worker pushes tensors of
// several dtypes and partition counts for some steps and checks every sum
// exactly; in between, rank 0 averages a tensor that the others sum, which
// must fail on every rank as a mismatch, after which the name works again.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "c_api/byteps_c.h"

namespace {

struct Done {
  std::atomic<int> finished{0};
  std::atomic<int> code{0};
  std::string message;
};

void OnDone(void* user, int code, const char* message) {
  auto* d = static_cast<Done*>(user);
  if (code != 0) d->message = message;
  d->code = code;
  d->finished = 1;
}

template <typename T>
int PushPull(std::vector<T>& data, int dtype, const char* name, int reduce_op, std::string* error) {
  bps_tensor t;
  memset(&t, 0, sizeof(t));
  t.data = data.data();
  t.num_elements = static_cast<int64_t>(data.size());
  t.dtype = dtype;
  t.device = -1;
  Done d;
  int rc = bps_push_pull_async(&t, data.data(), name, 0, reduce_op, OnDone, &d);
  if (rc != 0) {
    *error = bps_last_error();
    return rc;
  }
  while (!d.finished) std::this_thread::sleep_for(std::chrono::microseconds(200));
  *error = d.message;
  return d.code;
}

int Fail(const std::string& what) {
  fprintf(stderr, "SMOKE FAILED: %s\n", what.c_str());
  return 1;
}

int RunWorker(int steps) {
  if (bps_init(nullptr) != 0) return Fail(std::string("init: ") + bps_last_error());
  const int rank = bps_rank(), size = bps_size();
  std::string error;
  for (int step = 0; step < steps; ++step) {
    std::vector<float> small(1000, static_cast<float>(rank + 1));
    std::vector<int64_t> big(60000, rank + step);
    if (PushPull(small, BPS_FLOAT32, "smoke.small", BPS_REDUCE_SUM, &error) != 0) return Fail(error);
    if (PushPull(big, BPS_INT64, "smoke.big", BPS_REDUCE_SUM, &error) != 0) return Fail(error);
    const float want_small = size * (size + 1) / 2.0f;
    const int64_t want_big = static_cast<int64_t>(size) * (size - 1) / 2 + static_cast<int64_t>(size) * step;
    for (float v : small) {
      if (v != want_small) return Fail("wrong sum of smoke.small: " + std::to_string(v));
    }
    for (int64_t v : big) {
      if (v != want_big) return Fail("wrong sum of smoke.big: " + std::to_string(v));
    }
    if (step == steps / 2) {
      std::vector<float> x(5000, 1.0f);
      int rc = PushPull(x, BPS_FLOAT32, "smoke.disagree", rank == 0 ? BPS_REDUCE_AVERAGE : BPS_REDUCE_SUM, &error);
      if (rc != BPS_MISMATCH) return Fail("average on rank 0 only was not a mismatch: " + std::to_string(rc));
      std::vector<float> y(5000, 1.0f);
      if (PushPull(y, BPS_FLOAT32, "smoke.disagree", BPS_REDUCE_SUM, &error) != 0) return Fail("reuse: " + error);
      if (y[0] != size) return Fail("wrong sum after the mismatch");
    }
  }
  if (bps_shutdown() != 0) return Fail(std::string("shutdown: ") + bps_last_error());
  printf("SMOKE OK rank %d\n", rank);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const char* role = getenv("DMLC_ROLE");
  const std::string r = role ? role : "worker";
  if (r == "scheduler") return bps_run_scheduler() == 0 ? 0 : Fail(bps_last_error());
  if (r == "server") return bps_run_server() == 0 ? 0 : Fail(bps_last_error());
  return RunWorker(argc > 1 ? atoi(argv[1]) : 50);
}
