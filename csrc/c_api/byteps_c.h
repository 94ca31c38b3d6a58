/*
 * byteps-native: the one narrow boundary between the engine and every
 * framework adapter (pybind core module, torch c10d backend, TF custom op).
 *
 * Why plain C: torch and TensorFlow ship their own C++ ABIs and their own
 * pybind11; only C types cross this line. No std::string, no std::function,
 * no exceptions. The engine lives once per process in libbyteps_engine.so,
 * which every adapter links against, so all adapters share one engine.
 */
#ifndef BYTEPS_NATIVE_C_API_BYTEPS_C_H_
#define BYTEPS_NATIVE_C_API_BYTEPS_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BPS_C_API_VERSION 1
#define BPS_EXPORT __attribute__((visibility("default")))

typedef enum {
  BPS_FLOAT32 = 0,
  BPS_FLOAT64 = 1,
  BPS_FLOAT16 = 2,
  BPS_BFLOAT16 = 3,
  BPS_INT32 = 4,
  BPS_INT64 = 5,
  BPS_UINT8 = 6,
} bps_dtype;

typedef enum {
  BPS_OK = 0,
  BPS_INVALID_ARGUMENT = 1, /* bad call or bad environment */
  BPS_MISMATCH = 2,         /* ranks disagree on a tensor's shape/dtype */
  BPS_PEER_FAILURE = 3,     /* a worker/server/scheduler died or broke */
  BPS_TIMEOUT = 4,          /* nothing moved within BYTEPS_TIMEOUT */
  BPS_SHUTDOWN = 5,         /* engine shut down while the op was pending */
  BPS_INTERNAL = 6,
  BPS_NOT_INITIALIZED = 7,
  BPS_DEADLINE_EXCEEDED = 8, /* the op's own deadline passed */
  BPS_CANCELLED = 9,         /* the op was cancelled (bps_cancel) */
} bps_status_code;

typedef enum {
  BPS_REDUCE_SUM = 0,
  /* Sum divided by bps_size(). Integer dtypes divide with C++ truncation
   * toward zero (documented in docs/env.md). */
  BPS_REDUCE_AVERAGE = 1,
} bps_reduce_op;

/* Called exactly once per accepted operation, from an engine thread, never
 * from inside the submitting call. `message` is empty on success and only
 * valid for the duration of the call. Must not block for long. */
typedef void (*bps_done_fn)(void* user_data, int status_code,
                            const char* message);

typedef struct {
  void* data;           /* host memory when device < 0 */
  int64_t num_elements; /* elements, not bytes */
  int32_t dtype;        /* bps_dtype */
  int32_t device;       /* -1: CPU. >= 0: CUDA ordinal (GPU build only) */
  int32_t ndim;         /* 0 with shape == NULL means 1-D [num_elements] */
  const int64_t* shape; /* used for mismatch errors; may be NULL */
} bps_tensor;

/* A rendezvous key-value store supplied by the adapter (e.g. torch's c10d
 * TCPStore). Every function returns 0 on success, else a bps_status_code and
 * a message in err. The engine calls these from its own threads, only
 * during init and (rarely) on control events, never per partition. */
typedef struct {
  void* ctx;
  int (*set)(void* ctx, const char* key, const void* value, size_t len,
             char* err, size_t err_cap);
  /* Waits until key exists or timeout_ms passes (then BPS_TIMEOUT). On
   * success *len is the full value length (copied up to cap). */
  int (*get)(void* ctx, const char* key, int64_t timeout_ms, void* buf,
             size_t cap, size_t* len, char* err, size_t err_cap);
  int (*add)(void* ctx, const char* key, int64_t delta, int64_t* result,
             char* err, size_t err_cap);
} bps_store;

typedef struct {
  int32_t struct_size; /* sizeof(bps_init_options): forward compatibility */
  /* Topology; -1 means: read the environment (DMLC_* / BYTEPS_* or
   * torchrun's RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE). */
  int32_t rank;
  int32_t size;
  int32_t local_rank;
  int32_t local_size;
  /* NULL: rendezvous at the scheduler DMLC_PS_ROOT_URI:DMLC_PS_ROOT_PORT.
   * Non-NULL: rendezvous through this store; servers are then colocated
   * (local rank 0 of each machine runs one in-process) unless dedicated
   * servers are announced (DMLC_NUM_SERVER > 0). The store must outlive
   * bps_init(). */
  const bps_store* store;
} bps_init_options;

/* Returns 0 or a bps_status_code; bps_last_error() then says why.
 * Idempotent: a second init with the same topology is a no-op. */
BPS_EXPORT int bps_init(const bps_init_options* options /* NULL: env */);
BPS_EXPORT int bps_shutdown(void);
BPS_EXPORT int bps_initialized(void);
BPS_EXPORT int bps_rank(void);
BPS_EXPORT int bps_size(void);
BPS_EXPORT int bps_local_rank(void);
BPS_EXPORT int bps_local_size(void);
/* Horovod's cross communicator: the processes with this local rank, one per
 * machine that has it (machines may run different numbers of ranks). */
BPS_EXPORT int bps_cross_rank(void);
BPS_EXPORT int bps_cross_size(void);
/* 1 when every machine runs the same number of local ranks. */
BPS_EXPORT int bps_is_homogeneous(void);

/* Thread-local text of the last failed bps_* call on this thread. */
BPS_EXPORT const char* bps_last_error(void);

/* Asynchronous sum (or average) of `input` across all ranks into `output`
 * (output may equal input.data: in place). `name` identifies the tensor
 * across ranks; ranks may submit names in any order. Two submissions of the
 * same name on one rank are served in submission order. Higher priority
 * goes first on the network. Returns 0 when accepted (done will be called)
 * or an error code (done will NOT be called). Buffers must stay valid until
 * done runs. */
BPS_EXPORT int bps_push_pull_async(const bps_tensor* input, void* output,
                                   const char* name, int32_t priority,
                                   int32_t reduce_op, bps_done_fn done,
                                   void* user_data);

/* bps_push_pull_async (host tensors; device tensors ordered on `cuda_stream`
 * as bps_push_pull_async_on_stream) with a deadline and a handle.
 * `timeout_seconds` > 0: if the op has not completed that many seconds after
 * it was accepted, it fails with BPS_DEADLINE_EXCEEDED naming what it waited
 * for. `*op_id` (when not NULL) receives the op's handle for bps_cancel.
 * A deadline that passes or a cancel fails the op like a mismatch does: on
 * every rank whose op of that round is still pending (the servers and the
 * machine's shared memory tell them, each naming the cause and the rank it
 * came from), and the name stays usable: its next op starts a fresh round
 * on every rank. An op whose device collective already runs on one machine
 * cannot be taken back: its deadline or cancel fails the job instead. */
BPS_EXPORT int bps_push_pull_async_with_deadline(const bps_tensor* input, void* output, const char* name,
                                                 int32_t priority, int32_t reduce_op, double timeout_seconds,
                                                 void* cuda_stream, bps_done_fn done, void* user_data,
                                                 uint64_t* op_id);

/* One tensor of a group submission: what bps_push_pull_async takes. */
typedef struct {
  bps_tensor input;
  void* output; /* may equal input.data: in place */
  const char* name;
  int32_t priority;
  int32_t reduce_op; /* bps_reduce_op */
  bps_done_fn done;
  void* user_data;
} bps_group_member;

/* Tensor fusion (csrc/core/fused_group.h): `count` push_pulls in one call,
 * each with its own name, priority, output and done, sent as few engine
 * operations. Host tensors of one dtype and reduce op are packed, highest
 * priority first, into buckets of at most `fusion_bytes` (< 0: the
 * engine's BYTEPS_FUSION_BYTES; 0: no fusion); a bucket runs at its highest
 * member's priority. A tensor with a declared compression, or in device
 * memory (ordered after `cuda_stream`), travels alone. Every rank must
 * submit the same names in the same groups (the buckets' names derive from
 * their members'); a mismatch still fails the member that differs, under its
 * own name. `timeout_seconds` > 0: each engine operation's deadline
 * (bps_push_pull_async_with_deadline). Returns 0 when the group was accepted
 * (every member's done will be called once) or an error code (no done will
 * be called). */
BPS_EXPORT int bps_push_pull_group_async(const bps_group_member* members, int32_t count, int64_t fusion_bytes,
                                         double timeout_seconds, void* cuda_stream);

/* Fails the accepted op `op_id` with BPS_CANCELLED and `why` (as a passed
 * deadline does, above). 0 when the request was taken: the op's done then
 * reports the cancel, or its result if it completed first. Asynchronous:
 * done runs on the engine's thread once no byte can land in its buffers. */
BPS_EXPORT int bps_cancel(uint64_t op_id, const char* why);

/* The engine's clock for a face's own waits (e.g. TF's local replicas
 * meeting before one submission): `fn(user_data)` runs once, on the clock's
 * thread, `seconds` from now, unless bps_alarm_cancel took it back first. It
 * must not block. Returns the alarm's id (never 0). */
typedef void (*bps_alarm_fn)(void* user_data);
BPS_EXPORT uint64_t bps_alarm_after(double seconds, bps_alarm_fn fn, void* user_data);
/* 1 when the alarm was taken back before it ran (fn will never run); 0 when
 * it has run or is running (fn owns user_data then). */
BPS_EXPORT int bps_alarm_cancel(uint64_t alarm);

/* From its next push_pull on, tensor `name` (float32, at least
 * BYTEPS_MIN_COMPRESS_BYTES) travels compressed through the servers:
 * `spec` is "onebit", "topk:ratio=0.01", "randomk:ratio=0.01,seed=0", each
 * with ",ef=0" to drop error feedback (on by default); "" or "none" stops.
 * Every rank must declare the same (the servers check it). docs/compression.md. */
BPS_EXPORT int bps_declare_compression(const char* name, const char* spec);

/* As bps_declare_compression, for a fused tensor (a DDP bucket) made of
 * `num_segments` parts of these sizes in elements, in order, adding up to the
 * tensor: onebit then keeps one scale per part within each partition slice
 * (the parts' boundaries travel in the payload). Every rank must declare the
 * same parts. */
BPS_EXPORT int bps_declare_compression_segments(const char* name, const char* spec,
                                                const uint64_t* segment_sizes,
                                                size_t num_segments);

/* As bps_push_pull_async, for a tensor in CUDA memory (input->device >= 0;
 * output on the same device): the engine's work is ordered after everything
 * already queued on `cuda_stream` (a cudaStream_t; NULL: the legacy default
 * stream) and `done` runs, on a host thread, once the result is in `output`
 * in device memory -- any stream may use it then. Every local rank must
 * submit its GPU tensors in the same order (as with NCCL). Host tensors
 * ignore the stream. A build without CUDA refuses device tensors with
 * BPS_INVALID_ARGUMENT. */
BPS_EXPORT int bps_push_pull_async_on_stream(const bps_tensor* input, void* output,
                                             const char* name, int32_t priority,
                                             int32_t reduce_op, void* cuda_stream,
                                             bps_done_fn done, void* user_data);

/* 1 when bps_push_pull_async_on_stream of a device tensor makes the caller's
 * stream wait for the result before it returns (one machine: NCCL only); an
 * adapter may then complete its future at once, stream-ordered, and `done`
 * later only confirms (or reports a failure). 0 otherwise (CPU build, or
 * several machines: results cross the host). */
BPS_EXPORT int bps_device_stream_ordered(void);

/* 1 when bps_push_pull_async_stream_ordered takes device tensors: one
 * machine (the fused path) and, across machines, unless
 * BYTEPS_GPU_STREAM_ORDERED=0 (then results complete on the host only). */
BPS_EXPORT int bps_device_push_pull_stream_ordered(void);

/* As bps_push_pull_async_on_stream (the input is read after the work queued
 * on `input_stream` so far), for a caller that completes its own future at
 * once: work queued on `result_stream` after this returns sees the result
 * (one machine: an event wait; across machines: a wait on the device that
 * the engine's thread releases once the result is in `output`). The host
 * never blocks for the result. `done` only confirms; a failure after this
 * returned also latches the engine, so the caller's next call fails naming
 * it. Refused (BPS_INVALID_ARGUMENT) while
 * bps_device_push_pull_stream_ordered() is 0. */
BPS_EXPORT int bps_push_pull_async_stream_ordered(const bps_tensor* input, void* output,
                                                  const char* name, int32_t priority,
                                                  int32_t reduce_op, void* input_stream,
                                                  void* result_stream, bps_done_fn done,
                                                  void* user_data);

/* Allgather as one sum (csrc/core/placed_sum.h): `output` (total_bytes, on
 * `device`: -1 host, >= 0 CUDA) becomes zeros with this rank's `input_bytes`
 * bytes of `input` at `offset`, then is summed over ranks as uint8, which is
 * exact (x + 0 = x bytewise): every rank ends with every rank's bytes at its
 * offset. The ranks' ranges must not overlap; every rank passes the same
 * total_bytes and name. `input` may be a region of `output` (its own slot:
 * torch's all_gather_into_tensor). A device gather is queued on
 * `cuda_stream` as bps_push_pull_async_on_stream is; a host gather places
 * the bytes before returning and ignores the stream. A placement that does
 * not fit total_bytes is refused (BPS_INVALID_ARGUMENT, naming it); ranks
 * whose placements overlap get a wrong sum, which no rank can see alone.
 * Returns 0 when accepted
 * (done will be called) or an error code (done will NOT be called). */
BPS_EXPORT int bps_gather_bytes_async_on_stream(const void* input, int64_t input_bytes, int64_t offset,
                                                void* output, int64_t total_bytes, int32_t device,
                                                const char* name, int32_t priority, void* cuda_stream,
                                                bps_done_fn done, void* user_data);

/* Reduce-scatter as one sum: `buffer` (the whole tensor, the same shape on
 * every rank) is summed (or averaged) across ranks in place, and elements
 * [keep_offset, keep_offset + keep_count) of the result are copied into
 * `output` (on buffer's device, not overlapping it); `done` runs once they
 * are there. A device buffer is queued on `cuda_stream` as
 * bps_push_pull_async_on_stream is. Returns as bps_gather_bytes_async_on_stream. */
BPS_EXPORT int bps_reduce_scatter_async_on_stream(const bps_tensor* buffer, int64_t keep_offset,
                                                  int64_t keep_count, void* output, const char* name,
                                                  int32_t priority, int32_t reduce_op, void* cuda_stream,
                                                  bps_done_fn done, void* user_data);

/* Blocking role entry points for DMLC_ROLE=server / scheduler processes.
 * Return when the job ends (0) or on failure (code + bps_last_error). */
BPS_EXPORT int bps_run_server(void);
BPS_EXPORT int bps_run_scheduler(void);
/* A dedicated server (DMLC_ROLE=server, DMLC_NUM_SERVER) joining a job whose
 * workers rendezvous through an adapter store (e.g. torchrun's TCPStore). */
BPS_EXPORT int bps_run_server_with_store(const bps_store* store);

/* JSON snapshot of counters (bytes pushed/pulled, queue depth, ...).
 * Writes up to cap bytes incl. NUL; returns needed length. */
BPS_EXPORT size_t bps_stats_json(char* buf, size_t cap);

/* Human-readable build description (version, C API version, features). */
BPS_EXPORT const char* bps_build_info(void);

/* What this build can do, as BPS_CAP_* bits: faces test a bit here instead
 * of searching bps_build_info's prose. */
#define BPS_CAP_CUDA 1u /* device tensors: CUDA, pinned staging */
#define BPS_CAP_NCCL 2u /* NCCL among a machine's local ranks (device tensors' local reduce) */
BPS_EXPORT uint32_t bps_capabilities(void);

/* Rank agreement (csrc/core/rank_agreement.h): before an unnamed collective,
 * every face writes this rank's row into a [ranks, BPS_AGREEMENT_SLOTS] int64
 * table of zeros, sums it over ranks in a round of its own, and asks
 * bps_ranks_disagreement. One layout and one hash of `kind` for every face.
 *
 * bps_agreement_row: `dtype` is the Python name ("float32"); `shape` holds
 * `ndim` sizes; `extra` is 1 + root rank or reduce op, 0 for none. A NULL
 * `dtype` describes a group: `ndim` tensors whose digest is shape[0].
 * Writes BPS_AGREEMENT_SLOTS values to `row`. */
#define BPS_AGREEMENT_SLOTS 16
BPS_EXPORT void bps_agreement_row(const char* kind, const char* dtype, int32_t on_device, const int64_t* shape,
                                  int32_t ndim, int32_t any_first_dim, int64_t extra, int64_t* row);
/* 0 when every present rank's row equals rows[rank]; otherwise the length
 * (incl. NUL) of the error naming each rank's tensor, written up to cap bytes. */
BPS_EXPORT size_t bps_ranks_disagreement(const char* kind, const int64_t* rows, int32_t ranks, int32_t rank,
                                         char* buf, size_t cap);

/* join() (byteps_native/join_protocol.py): every operation this process's
 * engine accepted, numbered from 0 in submission order (across engine
 * restarts). bps_submission writes operation `index` as one line, "dtype
 * reduce_op priority device ndim dims... name" (dtype: a bps_dtype; device:
 * -1 host, else the CUDA ordinal), into `buf` (NUL-terminated when it fits)
 * and returns its length (call again with a larger buffer when >= cap), or -1
 * when `index` was never recorded or is no longer kept (the last 131072 are).
 * A group (bps_push_pull_group_async) is one operation: the line "group
 * fusion_bytes count", then one line per member, each after a '\n'. */
BPS_EXPORT int64_t bps_submission_count(void);
BPS_EXPORT int64_t bps_submission(int64_t index, char* buf, int64_t cap);

/* Horovod's rule after join(): gathers and broadcasts fail on the ranks still
 * training. A face names such a collective's first round (one row per rank)
 * with BPS_JOIN_MARK; a joined rank standing in for it fills its own row with
 * -1. After the round, bps_joined_ranks_check(name, summed, dtype, rows,
 * elements, ...) returns 0, or the length (incl. NUL) of the error naming the
 * joined ranks, written up to cap bytes, when a row of the summed int32/int64
 * table is all -1. */
#define BPS_JOIN_MARK "#fails-if-joined"
BPS_EXPORT size_t bps_joined_ranks_check(const char* name, const void* summed, int32_t dtype, int64_t rows,
                                         int64_t elements, char* buf, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* BYTEPS_NATIVE_C_API_BYTEPS_C_H_ */
