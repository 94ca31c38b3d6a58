#include "gpu/local_communicators.h"

#include <cstring>
#include <string>

#include "common/sha256.h"
#include "gpu/cuda_status.h"

namespace bps {
namespace gpu {
namespace {

Status FromHex(const std::string& hex, void* out, size_t bytes) {
  if (hex.size() != 2 * bytes) return Status::Internal("malformed NCCL unique id in the rendezvous store");
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  auto* dst = static_cast<unsigned char*>(out);
  for (size_t i = 0; i < bytes; ++i) {
    int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return Status::Internal("malformed NCCL unique id in the rendezvous store");
    dst[i] = static_cast<unsigned char>(hi * 16 + lo);
  }
  return Status::OK();
}

}  // namespace

Status CreateLocalCommunicator(Store& store, const Config& config, ncclComm_t* out) {
  const int L = config.local_size;
  const std::string machine = std::to_string(config.worker_id);
  // Every local rank counts its communicator set-ups, so a process that
  // re-initialises the engine meets its peers under a fresh key.
  int64_t joined = 0;
  BPS_RETURN_IF_ERROR(store.Add("gpu/comm_joins/" + machine, 1, &joined));
  const std::string key = "gpu/nccl_id/" + machine + "/" + std::to_string((joined - 1) / L);
  ncclUniqueId id;
  if (config.local_rank == 0) {
    BPS_NCCL_RETURN(ncclGetUniqueId(&id));
    BPS_RETURN_IF_ERROR(store.Set(key, ToHex(&id, sizeof(id))));
  } else {
    std::string hex;
    Status st = store.Get(key, config.rendezvous_timeout_seconds, &hex);
    if (st.code() == StatusCode::kTimeout) {
      return Status::Timeout("local rank 0 of machine " + machine + " never published its NCCL id within " +
                             std::to_string(static_cast<int>(config.rendezvous_timeout_seconds)) +
                             " s: every local rank must submit its first GPU tensor");
    }
    BPS_RETURN_IF_ERROR(st);
    BPS_RETURN_IF_ERROR(FromHex(hex, &id, sizeof(id)));
  }
  BPS_NCCL_RETURN(ncclCommInitRank(out, L, id, config.local_rank));
  return Status::OK();
}

}  // namespace gpu
}  // namespace bps
