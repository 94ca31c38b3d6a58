// The C ABI: translates plain C calls into the engine and Status into codes
// plus a thread-local message. Nothing here may throw across the boundary.
#include <algorithm>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <vector>

#include "c_api/abi_types.h"
#include "c_api/byteps_c.h"
#include "c_api/process_engine.h"
#include "core/fused_group.h"
#include "core/join_mark.h"
#include "core/placed_sum.h"
#include "core/rank_agreement.h"
#include "c_api/roles.h"
#include "common/alarm_clock.h"
#include "transport/framing.h"
#ifdef BPS_WITH_CUDA
#include "gpu/nccl_collectives.h"
#endif

namespace {

thread_local std::string g_last_error;

std::shared_ptr<bps::Engine> RunningEngine() {
  auto engine = bps::ProcessEngine::Get().engine();
  return engine && engine->initialized() ? engine : nullptr;
}

bps::Status NotInitialised() {
  return bps::Status(bps::StatusCode::kNotInitialized, "byteps is not initialised: call init() first");
}

// Host and device tensors alike (a device tensor after what the caller queued on `stream`).
bps::Status SubmitToEngine(const bps_tensor& input, void* output, const char* name, int32_t priority,
                           int32_t reduce_op, bps_done_fn done, void* user_data, void* stream = nullptr) {
  auto engine = bps::ProcessEngine::Get().engine();
  if (!engine) return NotInitialised();
  return engine->Submit(bps::ViewOf(input), output, name, priority, bps::ReduceOpOf(reduce_op), done, user_data,
                        stream);
}

int Report(const bps::Status& st) {
  if (!st.ok()) g_last_error = st.message();
  return bps::AbiCode(st);
}

template <typename F>
int Guarded(F&& f) {
  try {
    return Report(f());
  } catch (const std::exception& e) {
    return Report(bps::Status::Internal(std::string("internal error: ") + e.what()));
  } catch (...) {
    return Report(bps::Status::Internal("internal error"));
  }
}

}  // namespace

extern "C" {

int bps_init(const bps_init_options* options) {
  return Guarded([&] { return bps::ProcessEngine::Get().Init(options); });
}

int bps_shutdown(void) {
  return Guarded([] { return bps::ProcessEngine::Get().Shutdown(); });
}

int bps_initialized(void) { return RunningEngine() ? 1 : 0; }
int bps_rank(void) {
  auto engine = RunningEngine();
  return engine ? engine->rank() : -1;
}
int bps_size(void) {
  auto engine = RunningEngine();
  return engine ? engine->size() : -1;
}
int bps_local_rank(void) {
  auto engine = RunningEngine();
  return engine ? engine->config().local_rank : -1;
}
int bps_local_size(void) {
  auto engine = RunningEngine();
  return engine ? engine->config().local_size : -1;
}

// Horovod's cross ranks: the machines that have this local rank, in machine order.
int bps_cross_rank(void) {
  auto engine = RunningEngine();
  if (!engine) return -1;
  const bps::Config& c = engine->config();
  if (c.machine_local_sizes.empty()) return c.worker_id;
  int rank = 0;
  for (int m = 0; m < c.worker_id; ++m) rank += c.machine_local_sizes[m] > c.local_rank;
  return rank;
}
int bps_cross_size(void) {
  auto engine = RunningEngine();
  if (!engine) return -1;
  const bps::Config& c = engine->config();
  if (c.machine_local_sizes.empty()) return c.num_worker;
  int size = 0;
  for (int l : c.machine_local_sizes) size += l > c.local_rank;
  return size;
}
int bps_is_homogeneous(void) {
  auto engine = RunningEngine();
  if (!engine) return -1;
  return engine->config().distinct_local_sizes().size() == 1 ? 1 : 0;
}

const char* bps_last_error(void) { return g_last_error.c_str(); }

int bps_push_pull_async(const bps_tensor* input, void* output, const char* name, int32_t priority,
                        int32_t reduce_op, bps_done_fn done, void* user_data) {
  return Guarded([&] {
    if (!input || !name) return bps::Status::Invalid("push_pull: null tensor or name");
    return SubmitToEngine(*input, output, name, priority, reduce_op, done, user_data);
  });
}

int bps_push_pull_async_with_deadline(const bps_tensor* input, void* output, const char* name, int32_t priority,
                                      int32_t reduce_op, double timeout_seconds, void* cuda_stream, bps_done_fn done,
                                      void* user_data, uint64_t* op_id) {
  return Guarded([&] {
    if (!input || !name) return bps::Status::Invalid("push_pull: null tensor or name");
    auto engine = bps::ProcessEngine::Get().engine();
    if (!engine) return NotInitialised();
    bps::SubmitOptions options;
    options.stream = cuda_stream;
    options.timeout_seconds = timeout_seconds;
    return engine->Submit(bps::ViewOf(*input), output, name, priority, bps::ReduceOpOf(reduce_op), done, user_data,
                          options, op_id);
  });
}

int bps_push_pull_group_async(const bps_group_member* members, int32_t count, int64_t fusion_bytes,
                              double timeout_seconds, void* cuda_stream) {
  return Guarded([&] {
    if (count < 0 || (count > 0 && !members)) return bps::Status::Invalid("push_pull group: null or negative members");
    auto engine = bps::ProcessEngine::Get().engine();
    if (!engine) return NotInitialised();
    std::vector<bps::GroupMember> group(static_cast<size_t>(count));
    for (int32_t i = 0; i < count; ++i) {
      const bps_group_member& m = members[i];
      if (!m.name) return bps::Status::Invalid("push_pull group: member " + std::to_string(i) + " has no name");
      group[i].input = bps::ViewOf(m.input);
      group[i].output = m.output;
      group[i].name = m.name;
      group[i].priority = m.priority;
      group[i].reduce_op = bps::ReduceOpOf(m.reduce_op);
      group[i].done = m.done;
      group[i].user_data = m.user_data;
    }
    bps::GroupOptions options;
    options.fusion_bytes = fusion_bytes < 0 ? engine->config().fusion_bytes : fusion_bytes;
    options.stream = cuda_stream;
    options.timeout_seconds = timeout_seconds;
    return bps::SubmitGroup(*engine, group, options);
  });
}

int bps_cancel(uint64_t op_id, const char* why) {
  return Guarded([&] {
    auto engine = RunningEngine();
    if (!engine) return NotInitialised();
    return engine->Cancel(op_id, why ? why : "");
  });
}

// The faces' alarms: one clock for the process, never destroyed (an alarm
// may still be due while statics are torn down at exit).
static bps::AlarmClock& FaceAlarms() {
  static bps::AlarmClock* clock = new bps::AlarmClock();
  return *clock;
}

uint64_t bps_alarm_after(double seconds, bps_alarm_fn fn, void* user_data) {
  return FaceAlarms().After(seconds, [fn, user_data] { fn(user_data); });
}

int bps_alarm_cancel(uint64_t alarm) { return FaceAlarms().Cancel(alarm) ? 1 : 0; }

namespace {
constexpr bool SameText(const char* a, const char* b) { return *a == *b && (*a == 0 || SameText(a + 1, b + 1)); }
static_assert(SameText(BPS_JOIN_MARK, bps::kJoinMark), "BPS_JOIN_MARK must be core/join_mark.h's kJoinMark");
}  // namespace

int64_t bps_submission_count(void) { return bps::ProcessEngine::Get().submissions().count(); }

int64_t bps_submission(int64_t index, char* buf, int64_t cap) {
  std::string line;
  if (!bps::ProcessEngine::Get().submissions().Line(index, &line)) return -1;
  const int64_t length = static_cast<int64_t>(line.size());
  if (buf != nullptr && cap > length) std::memcpy(buf, line.c_str(), line.size() + 1);
  return length;
}

size_t bps_joined_ranks_check(const char* name, const void* summed, int32_t dtype, int64_t rows, int64_t elements,
                              char* buf, size_t cap) {
  bps::Status st = bps::CheckNoRankJoined(name ? name : "", summed, static_cast<bps::DataType>(dtype), rows, elements);
  if (st.ok()) return 0;
  const std::string& text = st.message();
  if (buf != nullptr && cap > 0) {
    const size_t n = std::min(cap - 1, text.size());
    std::memcpy(buf, text.data(), n);
    buf[n] = '\0';
  }
  return text.size() + 1;
}

int bps_declare_compression(const char* name, const char* spec) {
  return Guarded([&] {
    if (!name || !spec) return bps::Status::Invalid("declare_compression: null name or spec");
    auto engine = RunningEngine();
    if (!engine) return NotInitialised();
    return engine->DeclareCompression(name, spec);
  });
}

int bps_declare_compression_segments(const char* name, const char* spec, const uint64_t* segment_sizes,
                                     size_t num_segments) {
  return Guarded([&] {
    if (!name || !spec) return bps::Status::Invalid("declare_compression: null name or spec");
    if (num_segments > 0 && !segment_sizes) return bps::Status::Invalid("declare_compression: null segment sizes");
    auto engine = RunningEngine();
    if (!engine) return NotInitialised();
    return engine->DeclareCompression(name, spec, std::vector<uint64_t>(segment_sizes, segment_sizes + num_segments));
  });
}

namespace {
int SubmitOnStream(const bps_tensor* input, void* output, const char* name, int32_t priority, int32_t reduce_op,
                   void* cuda_stream, bps_done_fn done, void* user_data) {
  return Guarded([&] {
    if (!input || !name) return bps::Status::Invalid("push_pull: null tensor or name");
    return SubmitToEngine(*input, output, name, priority, reduce_op, done, user_data, cuda_stream);
  });
}
}  // namespace

int bps_push_pull_async_on_stream(const bps_tensor* input, void* output, const char* name, int32_t priority,
                                  int32_t reduce_op, void* cuda_stream, bps_done_fn done, void* user_data) {
  return SubmitOnStream(input, output, name, priority, reduce_op, cuda_stream, done, user_data);
}

int bps_push_pull_async_stream_ordered(const bps_tensor* input, void* output, const char* name, int32_t priority,
                                       int32_t reduce_op, void* input_stream, void* result_stream,
                                       bps_done_fn done, void* user_data) {
  return Guarded([&] {
    if (!input || !name) return bps::Status::Invalid("push_pull: null tensor or name");
    if (input->device < 0 || !result_stream) {
      return bps::Status::Invalid("push_pull of '" + std::string(name) +
                                  "': a stream-ordered push_pull takes a device tensor and a result stream");
    }
    auto engine = bps::ProcessEngine::Get().engine();
    if (!engine) return NotInitialised();
    return engine->Submit(bps::ViewOf(*input), output, name, priority, bps::ReduceOpOf(reduce_op), done, user_data,
                          input_stream, result_stream);
  });
}

int bps_device_push_pull_stream_ordered(void) {
  auto engine = RunningEngine();
  return engine && engine->DevicePushPullStreamOrdered() ? 1 : 0;
}

int bps_device_stream_ordered(void) {
  auto engine = RunningEngine();
  return engine && engine->DeviceStreamOrdered() ? 1 : 0;
}

int bps_gather_bytes_async_on_stream(const void* input, int64_t input_bytes, int64_t offset, void* output,
                                     int64_t total_bytes, int32_t device, const char* name, int32_t priority,
                                     void* cuda_stream, bps_done_fn done, void* user_data) {
  return Guarded([&] {
    if (!name) return bps::Status::Invalid("gather: null name");
    auto engine = bps::ProcessEngine::Get().engine();
    if (!engine) return NotInitialised();
    bps::GatherBytes gather;
    gather.input = input;
    gather.input_bytes = input_bytes;
    gather.offset = offset;
    gather.output = output;
    gather.total_bytes = total_bytes;
    gather.device = device;
    return bps::SubmitGatherBytes(*engine, gather, name, priority, cuda_stream, done, user_data);
  });
}

int bps_reduce_scatter_async_on_stream(const bps_tensor* buffer, int64_t keep_offset, int64_t keep_count,
                                       void* output, const char* name, int32_t priority, int32_t reduce_op,
                                       void* cuda_stream, bps_done_fn done, void* user_data) {
  return Guarded([&] {
    if (!buffer || !name) return bps::Status::Invalid("reduce_scatter: null buffer or name");
    auto engine = bps::ProcessEngine::Get().engine();
    if (!engine) return NotInitialised();
    return bps::SubmitReduceScatter(*engine, bps::ViewOf(*buffer), keep_offset, keep_count, output, name, priority,
                                    bps::ReduceOpOf(reduce_op), cuda_stream, done, user_data);
  });
}

int bps_run_server(void) {
  return Guarded([] { return bps::RunServerRole(); });
}

int bps_run_server_with_store(const bps_store* store) {
  return Guarded([&] {
    if (!store) return bps::Status::Invalid("bps_run_server_with_store: null store");
    return bps::RunServerRoleWithStore(*store);
  });
}

int bps_run_scheduler(void) {
  return Guarded([] { return bps::RunSchedulerRole(); });
}

size_t bps_stats_json(char* buf, size_t cap) {
  std::string s = bps::ProcessEngine::Get().StatsJson();
  if (buf && cap > 0) {
    size_t n = std::min(cap - 1, s.size());
    memcpy(buf, s.data(), n);
    buf[n] = '\0';
  }
  return s.size() + 1;
}

uint32_t bps_capabilities(void) {
#ifdef BPS_WITH_CUDA
  // setup.py compiles csrc/gpu only when it finds both the CUDA toolkit and
  // NCCL, so one build flag answers both bits; they stay two bits because a
  // face asks two questions (device tensors at all, NCCL for them).
  return BPS_CAP_CUDA | BPS_CAP_NCCL;
#else
  return 0;
#endif
}

static_assert(BPS_AGREEMENT_SLOTS == bps::kAgreementSlots, "the C ABI's agreement row is the engine's");

void bps_agreement_row(const char* kind, const char* dtype, int32_t on_device, const int64_t* shape, int32_t ndim,
                       int32_t any_first_dim, int64_t extra, int64_t* row) {
  const std::string kind_text = kind ? kind : "";
  std::vector<int64_t> out;
  if (dtype == nullptr) {
    out = bps::AgreementGroupRow(kind_text, ndim, ndim > 0 && shape ? shape[0] : 0, extra);
  } else {
    std::vector<int64_t> dims(shape, shape + (shape ? std::max(ndim, 0) : 0));
    out = bps::AgreementRow(kind_text, dtype, on_device != 0, dims, any_first_dim != 0, extra);
  }
  std::copy(out.begin(), out.end(), row);
}

size_t bps_ranks_disagreement(const char* kind, const int64_t* rows, int32_t ranks, int32_t rank, char* buf,
                              size_t cap) {
  if (rows == nullptr || rank < 0 || rank >= ranks) return 0;
  const std::string s = bps::RanksDisagreement(kind ? kind : "", rows, ranks, rank);
  if (s.empty()) return 0;
  if (buf && cap > 0) {
    size_t n = std::min(cap - 1, s.size());
    memcpy(buf, s.data(), n);
    buf[n] = '\0';
  }
  return s.size() + 1;
}

const char* bps_build_info(void) {
  static const std::string info = "byteps-native engine 0.1.0; C API " + std::to_string(BPS_C_API_VERSION) +
                                  "; wire " + std::to_string(bps::kWireVersion) +
                                  "; transports: tcp; local reduce: posix-shm; " +
#ifdef BPS_WITH_CUDA
                                  bps::gpu::BuildInfo();
#else
                                  "cuda: no";
#endif
  return info.c_str();
}

}  // extern "C"
