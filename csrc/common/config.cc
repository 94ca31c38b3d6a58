#include "common/config.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <vector>
#include <fstream>
#include <sstream>
#include <algorithm>
#include <thread>

#include "common/logging.h"
#include "common/net_util.h"

namespace bps {

const char* RoleName(Role r) {
  switch (r) {
    case Role::kWorker: return "worker";
    case Role::kServer: return "server";
    default: return "scheduler";
  }
}

Status ParseIntEnv(const char* name, int64_t lo, int64_t hi, int64_t* value, bool* present) {
  const char* text = getenv(name);
  *present = text != nullptr && *text != '\0';
  if (!*present) return Status::OK();
  errno = 0;
  char* end = nullptr;
  long long v = strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0') {
    return Status::Invalid(std::string(name) + "='" + text + "' is not an integer");
  }
  if (v < lo || v > hi) {
    return Status::Invalid(std::string(name) + "=" + text + " is out of range [" + std::to_string(lo) + ", " +
                           std::to_string(hi) + "]");
  }
  *value = v;
  return Status::OK();
}

namespace {

template <typename T>
Status ReadInt(const char* name, int64_t lo, int64_t hi, T* field) {
  int64_t v = 0;
  bool present = false;
  BPS_RETURN_IF_ERROR(ParseIntEnv(name, lo, hi, &v, &present));
  if (present) *field = static_cast<T>(v);
  return Status::OK();
}

Status ReadBool(const char* name, bool* field) {
  const char* text = getenv(name);
  if (text == nullptr || *text == '\0') return Status::OK();
  std::string v(text);
  if (v == "1" || v == "true" || v == "True" || v == "TRUE") {
    *field = true;
  } else if (v == "0" || v == "false" || v == "False" || v == "FALSE") {
    *field = false;
  } else {
    return Status::Invalid(std::string(name) + "='" + v + "' is not a boolean (use 0 or 1)");
  }
  return Status::OK();
}

Status ReadDouble(const char* name, double lo, double hi, double* field) {
  const char* text = getenv(name);
  if (text == nullptr || *text == '\0') return Status::OK();
  char* end = nullptr;
  double v = strtod(text, &end);
  if (end == text || *end != '\0' || !(v >= lo) || !(v <= hi)) {
    return Status::Invalid(std::string(name) + "='" + text + "' must be a number of seconds in [" +
                           FormatSeconds(lo) + ", " + FormatSeconds(hi) + "]");
  }
  *field = v;
  return Status::OK();
}

std::string ReadString(const char* name) {
  const char* text = getenv(name);
  return text ? std::string(text) : std::string();
}

Status ReadTokenFile(const std::string& path, std::string* token) {
  std::ifstream in(path);
  if (!in) return Status::Invalid("BYTEPS_JOB_TOKEN_FILE='" + path + "' cannot be read: " + strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  std::string t = text.str();
  while (!t.empty() && isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
  while (!t.empty() && isspace(static_cast<unsigned char>(t.front()))) t.erase(t.begin());
  if (t.empty()) return Status::Invalid("BYTEPS_JOB_TOKEN_FILE='" + path + "' is empty: it must hold the job's secret");
  *token = t;
  return Status::OK();
}

}  // namespace

namespace {

// Every BYTEPS_*/DMLC_* name that byteps-native or its build and tests read
// (docs/env.md documents the runtime ones). Anything else is a typo or a
// setting of upstream BytePS that does nothing here: say so once.
const char* const kKnownVariables[] = {
    "BYTEPS_ENABLE_ASYNC", "BYTEPS_FORCE_DISTRIBUTED", "BYTEPS_INSECURE", "BYTEPS_JOB_ID", "BYTEPS_JOB_TOKEN",
    "BYTEPS_JOB_TOKEN_FILE", "BYTEPS_LOCAL_KEY_TABLE_SIZE", "BYTEPS_LOCAL_RANK", "BYTEPS_LOCAL_SIZE", "BYTEPS_LOCAL_STAGING_RESERVE", "BYTEPS_LOG_LEVEL", "BYTEPS_NUMA_ON",
    "BYTEPS_MIN_COMPRESS_BYTES", "BYTEPS_PARTITION_BYTES", "BYTEPS_RENDEZVOUS_TIMEOUT", "BYTEPS_SCHEDULING_CREDIT", "BYTEPS_SCHEDULING_CREDIT_PER_SERVER", "BYTEPS_SERVER_BUFFER_POOL", "BYTEPS_SERVER_ENGINE_THREAD",
    "BYTEPS_TCP_CONGESTION", "BYTEPS_TCP_CONNECTIONS", "BYTEPS_TCP_RCVLOWAT", "BYTEPS_TCP_SOCKET_BUFFER", "BYTEPS_TIMEOUT", "BYTEPS_TRACE_DIR",
    "BYTEPS_TRACE_END_STEP", "BYTEPS_TRACE_ON", "BYTEPS_TRACE_START_STEP", "BYTEPS_VISIBLE_CPU_CORES",
    "BYTEPS_GPU_HIGH_PRIORITY_STREAMS", "BYTEPS_DEVICE_COPY_AHEAD_BYTES", "BYTEPS_GPU_STREAM_ORDERED", "BYTEPS_GPU_COMPRESS_ON_DEVICE", "BYTEPS_TF_FUSION_BYTES", "BYTEPS_FUSION_BYTES", "BYTEPS_C10D_NAME_SLOTS", "BYTEPS_C10D_SLOT_BYTES", "BYTEPS_WITH_CUDA", "BYTEPS_WITH_TENSORFLOW",
    "BYTEPS_WITH_PYTORCH", "BYTEPS_FUZZ_SMOKE_RUNS", "BYTEPS_SOAK_STEPS",
    "DMLC_INTERFACE", "DMLC_NODE_HOST", "DMLC_NUM_SERVER", "DMLC_NUM_WORKER", "DMLC_PS_ROOT_PORT",
    "DMLC_PS_ROOT_URI", "DMLC_ROLE", "DMLC_WORKER_ID",
};

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

}  // namespace

void WarnAboutUnknownVariables() {
  static std::atomic<bool> done{false};
  if (done.exchange(true)) return;
  for (char** e = environ; *e; ++e) {
    std::string entry(*e);
    std::string name = entry.substr(0, entry.find('='));
    if (name.rfind("BYTEPS_", 0) != 0 && name.rfind("DMLC_", 0) != 0) continue;
    const char* closest = nullptr;
    size_t best = SIZE_MAX;
    for (const char* known : kKnownVariables) {
      size_t d = EditDistance(name, known);
      if (d < best) best = d, closest = known;
    }
    if (best == 0) continue;
    if (best <= 3) {
      BPS_LOG(Warning) << name << " is not a byteps-native setting and is ignored; did you mean " << closest
                       << "? (docs/env.md lists them)";
    } else {
      BPS_LOG(Warning) << name << " is not a byteps-native setting and is ignored (closest: " << closest
                       << "; docs/env.md lists them)";
    }
  }
}

int Config::size() const {
  if (machine_local_sizes.empty()) return num_worker * local_size;
  int total = 0;
  for (int l : machine_local_sizes) total += l;
  return total;
}

int Config::rank_offset() const {
  if (machine_local_sizes.empty()) return worker_id * local_size;
  int offset = 0;
  for (int m = 0; m < worker_id && m < static_cast<int>(machine_local_sizes.size()); ++m) offset += machine_local_sizes[m];
  return offset;
}

std::vector<int> Config::distinct_local_sizes() const {
  std::vector<int> sizes = machine_local_sizes.empty() ? std::vector<int>{local_size} : machine_local_sizes;
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

std::string FormatSeconds(double seconds) {
  char text[32];
  snprintf(text, sizeof(text), "%g", seconds);
  return text;
}

bool InsecureModeRequested() {
  bool insecure = false;
  return ReadBool("BYTEPS_INSECURE", &insecure).ok() && insecure;
}

Status ConfigFromEnvironment(bool require_rendezvous, Config* out) {
  WarnAboutUnknownVariables();
  Config c;
  std::string role = ReadString("DMLC_ROLE");
  if (role.empty() || role == "worker") {
    c.role = Role::kWorker;
  } else if (role == "server") {
    c.role = Role::kServer;
  } else if (role == "scheduler") {
    c.role = Role::kScheduler;
  } else {
    return Status::Invalid("DMLC_ROLE='" + role + "' is not one of worker, server, scheduler");
  }
  c.root_uri = ReadString("DMLC_PS_ROOT_URI");
  BPS_RETURN_IF_ERROR(ReadInt("DMLC_PS_ROOT_PORT", 1, 65535, &c.root_port));
  BPS_RETURN_IF_ERROR(ReadInt("DMLC_NUM_WORKER", 1, 1 << 20, &c.num_worker));
  BPS_RETURN_IF_ERROR(ReadInt("DMLC_NUM_SERVER", 0, 1 << 20, &c.num_server));
  BPS_RETURN_IF_ERROR(ReadInt("DMLC_WORKER_ID", 0, 1 << 20, &c.worker_id));
  c.interface = ReadString("DMLC_INTERFACE");
  if (!c.interface.empty()) {
    std::string address;
    BPS_RETURN_IF_ERROR(InterfaceAddress(c.interface, &address));  // names the interfaces that exist
  }
  c.node_host = ReadString("DMLC_NODE_HOST");
  BPS_RETURN_IF_ERROR(ReadInt("BYTEPS_LOCAL_SIZE", 1, 256, &c.local_size));
  BPS_RETURN_IF_ERROR(ReadInt("BYTEPS_LOCAL_RANK", 0, 255, &c.local_rank));
  c.partition_bytes = 0;  // unset: chosen below, once the role and the job's machines are known
  BPS_RETURN_IF_ERROR(ReadInt("BYTEPS_PARTITION_BYTES", 1024, int64_t(1) << 31, &c.partition_bytes));
  BPS_RETURN_IF_ERROR(ReadInt("BYTEPS_MIN_COMPRESS_BYTES", 0, int64_t(1) << 62, &c.min_compress_bytes));
  // The TF face's name first, so the engine's own name wins when both are set.
  BPS_RETURN_IF_ERROR(ReadInt("BYTEPS_TF_FUSION_BYTES", 0, int64_t(1) << 40, &c.fusion_bytes));
  BPS_RETURN_IF_ERROR(ReadInt("BYTEPS_FUSION_BYTES", 0, int64_t(1) << 40, &c.fusion_bytes));
  BPS_RETURN_IF_ERROR(ReadInt("BYTEPS_LOCAL_KEY_TABLE_SIZE", 16, 1 << 22, &c.local_key_table_size));
  BPS_RETURN_IF_ERROR(ReadInt("BYTEPS_LOCAL_STAGING_RESERVE", 0, int64_t(1) << 40, &c.local_staging_reserve_bytes));
  BPS_RETURN_IF_ERROR(ReadInt("BYTEPS_SCHEDULING_CREDIT", 0, 1 << 20, &c.scheduling_credit));
  BPS_RETURN_IF_ERROR(ReadBool("BYTEPS_SCHEDULING_CREDIT_PER_SERVER", &c.scheduling_credit_per_server));
  BPS_RETURN_IF_ERROR(ReadInt("BYTEPS_DEVICE_COPY_AHEAD_BYTES", 0, int64_t(1) << 40, &c.device_copy_ahead_bytes));
  // A server's event loops, each receiving and summing on its own core: one
  // per connection up to half the cores (on 2 cores: 1, which measured
  // fastest there; loops only start as connections arrive).
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  c.server_engine_threads = std::max(1, std::min(16, cores / 2));
  BPS_RETURN_IF_ERROR(ReadInt("BYTEPS_SERVER_ENGINE_THREAD", 1, 256, &c.server_engine_threads));
  BPS_RETURN_IF_ERROR(ReadInt("BYTEPS_SERVER_BUFFER_POOL", 0, int64_t(1) << 40, &c.server_buffer_pool_bytes));
  // Connections (each with its own I/O thread) from a worker to each server:
  // one per 4 cores, at most 4. Servers do not count them, so processes may
  // differ.
  c.connections_per_server = std::max(1, std::min(4, cores / 4));
  BPS_RETURN_IF_ERROR(ReadInt("BYTEPS_TCP_CONNECTIONS", 1, 64, &c.connections_per_server));
  BPS_RETURN_IF_ERROR(ReadInt("BYTEPS_TCP_RCVLOWAT", 0, 64 << 20, &c.tcp_receive_low_water));
  BPS_RETURN_IF_ERROR(ReadInt("BYTEPS_TCP_SOCKET_BUFFER", 0, 1 << 30, &c.tcp_socket_buffer));
  const std::string congestion = ReadString("BYTEPS_TCP_CONGESTION");
  if (!congestion.empty()) c.tcp_congestion = congestion == "system" ? std::string() : congestion;
  BPS_RETURN_IF_ERROR(ReadBool("BYTEPS_ENABLE_ASYNC", &c.enable_async));
  BPS_RETURN_IF_ERROR(ReadBool("BYTEPS_FORCE_DISTRIBUTED", &c.force_distributed));
  BPS_RETURN_IF_ERROR(ReadBool("BYTEPS_GPU_STREAM_ORDERED", &c.gpu_stream_ordered));
  BPS_RETURN_IF_ERROR(ReadBool("BYTEPS_GPU_COMPRESS_ON_DEVICE", &c.gpu_compress_on_device));
  // Bounded so that every deadline fits its clock and its messages (30 days).
  constexpr double kLongestTimeout = 30 * 24 * 3600;
  BPS_RETURN_IF_ERROR(ReadDouble("BYTEPS_TIMEOUT", 0.1, kLongestTimeout, &c.timeout_seconds));
  c.rendezvous_timeout_seconds = c.timeout_seconds;
  BPS_RETURN_IF_ERROR(
      ReadDouble("BYTEPS_RENDEZVOUS_TIMEOUT", 0.1, kLongestTimeout, &c.rendezvous_timeout_seconds));
  c.job_token = ReadString("BYTEPS_JOB_TOKEN");
  const std::string token_file = ReadString("BYTEPS_JOB_TOKEN_FILE");
  if (c.job_token.empty() && !token_file.empty()) BPS_RETURN_IF_ERROR(ReadTokenFile(token_file, &c.job_token));
  c.job_id = ReadString("BYTEPS_JOB_ID");

  if (c.partition_bytes == 0) {
    // Servers and the workers that push to them agree: both see a job of
    // several machines (or BYTEPS_FORCE_DISTRIBUTED), and a server is one.
    const bool through_servers = c.role != Role::kWorker || c.distributed();
    c.partition_bytes = through_servers ? Config::kNetworkPartitionBytes : Config::kLocalPartitionBytes;
    c.device_partition_bytes = through_servers ? Config::kNetworkDevicePartitionBytes : Config::kLocalPartitionBytes;
  }  // set: device_partition_bytes stays 0, the size set for both kinds
  // Align partitions to 64 bytes so slices stay cache-line aligned.
  c.partition_bytes = (c.partition_bytes + 63) / 64 * 64;
  c.device_partition_bytes = (c.device_partition_bytes + 63) / 64 * 64;
  if (c.local_rank >= c.local_size) {
    return Status::Invalid("BYTEPS_LOCAL_RANK=" + std::to_string(c.local_rank) + " must be < BYTEPS_LOCAL_SIZE=" +
                           std::to_string(c.local_size));
  }
  if (c.worker_id >= c.num_worker && c.role == Role::kWorker) {
    return Status::Invalid("DMLC_WORKER_ID=" + std::to_string(c.worker_id) + " must be < DMLC_NUM_WORKER=" +
                           std::to_string(c.num_worker));
  }
  if (require_rendezvous) {
    if (c.root_uri.empty()) {
      return Status::Invalid("DMLC_PS_ROOT_URI is not set: it must name the scheduler's address");
    }
    if (c.root_port == 0) {
      return Status::Invalid("DMLC_PS_ROOT_PORT is not set: it must be the scheduler's port (1-65535)");
    }
  }
  if (c.role == Role::kServer && c.num_server == 0) {
    return Status::Invalid("DMLC_ROLE=server but DMLC_NUM_SERVER=0: set DMLC_NUM_SERVER to the number of servers");
  }
  *out = c;
  return Status::OK();
}

std::string ConfigSummary(const Config& c) {
  std::string partition = std::to_string(c.partition_bytes) + " B";
  if (c.PartitionBytesFor(true) != c.partition_bytes) {
    partition += " (device tensors " + std::to_string(c.PartitionBytesFor(true)) + " B)";
  }
  std::string s = "partition " + partition + ", timeout " + FormatSeconds(c.timeout_seconds) +
                  " s, rendezvous timeout " + FormatSeconds(c.rendezvous_timeout_seconds) + " s, interface " +
                  (c.interface.empty() ? std::string("(route to the scheduler)") : c.interface) + ", " +
                  std::to_string(c.num_worker) + " machines x " + std::to_string(c.local_size) + " local, " +
                  std::to_string(c.num_server) + " servers, " + (c.enable_async ? "async" : "sync") + ", token ";
  return s + (c.job_token.empty() ? (InsecureModeRequested() ? "off (BYTEPS_INSECURE=1)" : "from the rendezvous store") : "on");
}

}  // namespace bps
