// Config: every environment variable the engine reads, parsed and validated
// once (BytePS-compatible names where they exist). docs/env.md documents them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace bps {

enum class Role { kWorker, kServer, kScheduler };
const char* RoleName(Role r);

struct Config {
  Role role = Role::kWorker;
  std::string root_uri;          // DMLC_PS_ROOT_URI
  int root_port = 0;             // DMLC_PS_ROOT_PORT
  int num_worker = 1;            // DMLC_NUM_WORKER: machines running workers
  int num_server = 0;            // DMLC_NUM_SERVER: dedicated servers
  int worker_id = 0;             // DMLC_WORKER_ID: this machine's index
  std::string interface;         // DMLC_INTERFACE: NIC whose address we listen on
  std::string node_host;         // DMLC_NODE_HOST: explicit address to listen on
  int local_rank = 0;            // BYTEPS_LOCAL_RANK
  int local_size = 1;            // BYTEPS_LOCAL_SIZE
  // BYTEPS_PARTITION_BYTES: the size tensors are cut into. Unset, it
  // depends on where a partition goes and where its bytes live (issue 38):
  //  - Through servers, every partition is stored and forwarded whole at its
  //    server, and a worker's pushes to its servers share its link, so the
  //    first answer comes about (servers x partition) of link time after a
  //    step's first push and the last one as long after its last push. A
  //    host tensor's partition costs little else: 256000 B (CPU, 1 Gbit/s:
  //    n = 2 at 0.96x gloo with 1 MB, 0.99x with 256 KB; n = 4 1.38x and
  //    1.47x; at 5 Gbit/s 256 KB is as fast or faster).
  //  - A device tensor's partition also costs its copies to and from pinned
  //    staging, their events and the engine's checks on them, which cap the
  //    bytes a machine moves per second: 1024000 B (2 emulated machines of
  //    an H200, VGG-16 at 10 Gbit/s: 543 ms a step with 1 MB, 570 with
  //    512 KB, 652 with 256 KB, and 657 with 256 KB and a window of the same
  //    bytes; 260 against 347 ms at 25 Gbit/s; 4 MB: ResNet-50 0.82x NCCL
  //    where 1 MB gave 0.91x).
  //  - On one machine partitions only cut shared-memory and NVLink work,
  //    where 4 MB measured best for both.
  // Set, it is the size of both kinds.
  static constexpr int64_t kNetworkPartitionBytes = 256000;
  static constexpr int64_t kNetworkDevicePartitionBytes = 1024000;
  static constexpr int64_t kLocalPartitionBytes = 4096000;
  int64_t partition_bytes = kLocalPartitionBytes;  // host tensors
  int64_t device_partition_bytes = 0;              // device tensors; 0: partition_bytes
  int64_t PartitionBytesFor(bool device) const {
    return device && device_partition_bytes > 0 ? device_partition_bytes : partition_bytes;
  }
  // What a push of `bytes` of a host or device tensor takes of the scheduling
  // credit, which counts host partitions: a device tensor's larger ones are
  // charged in proportion, so either kind keeps BYTEPS_SCHEDULING_CREDIT of
  // its partitions on the link.
  uint64_t CreditCharge(uint64_t bytes, bool device) const {
    return bytes * static_cast<uint64_t>(partition_bytes) / static_cast<uint64_t>(PartitionBytesFor(device));
  }
  // The largest partition a worker of this configuration pushes (a server's bound).
  int64_t LargestPartitionBytes() const {
    return PartitionBytesFor(true) > partition_bytes ? PartitionBytesFor(true) : partition_bytes;
  }
  int64_t min_compress_bytes = 65536;  // BYTEPS_MIN_COMPRESS_BYTES: smaller tensors travel uncompressed
  // BYTEPS_FUSION_BYTES (alias: BYTEPS_TF_FUSION_BYTES, its name before the
  // engine fused): a group submission (core/fused_group.h) packs tensors of
  // one dtype and reduce op into buckets of at most this many bytes; 0: none.
  static constexpr int64_t kDefaultFusionBytes = int64_t{32} << 20;
  int64_t fusion_bytes = kDefaultFusionBytes;
  int local_key_table_size = 8192;  // BYTEPS_LOCAL_KEY_TABLE_SIZE: partition keys in a machine's shared memory
  // BYTEPS_LOCAL_STAGING_RESERVE: shared-memory staging per local rank kept
  // backed and mapped ahead of need, so a new name's first call finds warm
  // slots (staging_warmer.h); at most a quarter of /dev/shm's free space.
  int64_t local_staging_reserve_bytes = int64_t{128} << 20;
  int scheduling_credit = 4;     // BYTEPS_SCHEDULING_CREDIT: partitions queued to the network; 0 = unlimited
  // BYTEPS_SCHEDULING_CREDIT_PER_SERVER (1): that many for each server
  // (core/credit_window.h says why); 0: for all servers together, as before.
  bool scheduling_credit_per_server = true;
  // BYTEPS_DEVICE_COPY_AHEAD_BYTES: partition bytes whose device work (the
  // reduce-scatter and the copy into pinned staging) the engine thread issues
  // ahead of what it saw finish; 0 = unbounded. Issuing a whole 256 MiB
  // tensor's copies held the engine thread 14-16 ms in CUDA calls, pushing
  // nothing meanwhile: the GPU path's 16-18 ms per 256 MiB (issue 38).
  static constexpr int64_t kDefaultDeviceCopyAheadBytes = int64_t{16} << 20;
  int64_t device_copy_ahead_bytes = kDefaultDeviceCopyAheadBytes;
  int server_engine_threads = 4; // BYTEPS_SERVER_ENGINE_THREAD: a server's event loops (default cores/2, 1..16)
  // BYTEPS_SERVER_BUFFER_POOL: bytes of warm buffers a server keeps free for
  // the next pushes of any key (server/buffer_pool.h); past it, let-go
  // buffers are freed.
  int64_t server_buffer_pool_bytes = int64_t{256} << 20;
  bool enable_async = false;     // BYTEPS_ENABLE_ASYNC
  bool force_distributed = false;// BYTEPS_FORCE_DISTRIBUTED
  // BYTEPS_GPU_STREAM_ORDERED (experimental, off): across machines, a
  // device push_pull's result is stream-ordered (the caller's stream waits
  // on the device for a word the engine thread writes, gpu/stream_hold.h)
  // instead of completing on the host. Off by default: on 2 x H200 the
  // first runs hung (docs/performance.md, issue 38): the release needs the
  // engine's later copies on the same GPU, and a call that serialises the
  // device behind the waiting kernel (a pinned allocation, cudaMalloc) then
  // never returns. Kept for the design that copies inside the wait.
  bool gpu_stream_ordered = false;
  // BYTEPS_GPU_COMPRESS_ON_DEVICE=0: a GPU tensor's compressed pushes are
  // encoded by the host codecs from its staged copy, as before issue 39 (the
  // A/B of benchmarks/gpu_compression_cost.py, and a way back); 1: on the GPU.
  bool gpu_compress_on_device = true;
  double timeout_seconds = 300;  // BYTEPS_TIMEOUT: an op without progress fails after this
  double rendezvous_timeout_seconds = 300;  // BYTEPS_RENDEZVOUS_TIMEOUT
  std::string job_token;         // BYTEPS_JOB_TOKEN, else the contents of BYTEPS_JOB_TOKEN_FILE
  std::string job_id;            // BYTEPS_JOB_ID: names shared memory; from the store if unset
  int connections_per_server = 1;// BYTEPS_TCP_CONNECTIONS (default cores/4, 1..4)
  int64_t tcp_receive_low_water = 512 << 10;  // BYTEPS_TCP_RCVLOWAT: bytes per receive wakeup; 0 = every segment
  // BYTEPS_TCP_SOCKET_BUFFER: SO_SNDBUF/SO_RCVBUF of data connections; 0
  // leaves them to the kernel's autotuning (net.ipv4.tcp_rmem/tcp_wmem),
  // which a fixed size turns off. The kernel caps a fixed size at
  // net.core.rmem_max/wmem_max.
  int64_t tcp_socket_buffer = 4 << 20;
  // BYTEPS_TCP_CONGESTION: the data connections' algorithm; "system" keeps
  // the host's default. Not BBR by default: a PS job runs n x k paced flows,
  // and BBR's per-flow pacing timers cost CPU that a busy host lacks
  // (docs/performance.md, multi-host).
  std::string tcp_congestion = "cubic";

  // Machines may run different numbers of local ranks (issue 29): the
  // rendezvous fills every machine's local size, by DMLC_WORKER_ID. Empty
  // (before it, or a process that never rendezvoused): every machine runs
  // local_size ranks.
  std::vector<int> machine_local_sizes;

  int rank() const { return rank_offset() + local_rank; }
  int size() const;
  // Global rank of this machine's local rank 0: the earlier machines' ranks.
  int rank_offset() const;
  // The distinct local sizes of the job's machines, ascending ({local_size} when equal).
  std::vector<int> distinct_local_sizes() const;
  // Servers are needed only across machines (or when forced).
  bool distributed() const { return num_worker > 1 || force_distributed; }
};

// Parses the environment. `require_rendezvous` demands DMLC_PS_ROOT_URI/PORT
// (the scheduler's roles; false when an adapter supplies the store).
Status ConfigFromEnvironment(bool require_rendezvous, Config* out);

// "15", "0.5", "1e+06": seconds as people write them (not "15.000000").
std::string FormatSeconds(double seconds);
// One line for the log at start: partition size, timeouts, interface, layout, token on/off.
std::string ConfigSummary(const Config& c);
// Once per process: a warning for each BYTEPS_*/DMLC_* variable that nothing
// reads, naming the closest known one (ConfigFromEnvironment calls it).
void WarnAboutUnknownVariables();

// BYTEPS_INSECURE=1: the user accepts a job without a secret (role mode).
bool InsecureModeRequested();

// Helpers shared with adapters' option parsing.
Status ParseIntEnv(const char* name, int64_t lo, int64_t hi, int64_t* value, bool* present);

}  // namespace bps
