#include "torch/push_pull.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/util/Exception.h>

#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "torch/completion_queue.h"
#include "torch/tensor_wire.h"

namespace byteps_torch {
namespace {

// Everything that must live until the engine calls back.
struct InFlight {
  InFlight(at::Tensor wire, const char* operation, std::string name, PushPullDone done)
      : wire(std::move(wire)), operation(operation), name(std::move(name)), done(std::move(done)) {}
  at::Tensor wire;
  at::Tensor also_read;  // a gather's input, when apart from `wire`
  at::Tensor also_written;  // a reduce-scatter's output
  const char* operation;  // "push_pull", "gather" or "reduce_scatter": for messages
  std::string name;
  std::vector<int64_t> shape;
  PushPullDone done;
};

// How one submission reaches the engine: `tensor` describes the wire; `name`
// lives until done; `stream` is null for host tensors (the input is read
// after its work); `result_stream`, when not null, asks for a stream-ordered
// result there (bps_push_pull_async_stream_ordered): the caller completes
// its future at once.
using CallEngine = std::function<int(const bps_tensor& tensor, const char* name, void* stream, void* result_stream,
                                     bps_done_fn done, void* user_data)>;

// The operations whose result the engine can order on a stream across
// machines: push_pull alone (gather and reduce_scatter complete on the host
// there, and are stream-ordered on one machine only).
enum class Ordering { kOneMachineOnly, kAcrossMachines };

// One side stream per device for stream-ordered push_pulls, from torch's
// pool (so torch knows it), taken once: the caching allocator and the
// Future's events then see one stable stream. With it, one reusable event
// that orders the side stream after a caller's stream: a stream waits on an
// event's state at the time of the wait, so re-recording it for the next
// bucket is safe, and no CUDA event is created or destroyed per bucket.
struct SideStreamState {
  c10::Stream stream;
  c10::Event caller_ready{c10::DeviceType::CUDA};
};

SideStreamState& SideStateLocked(c10::Device device) {
  static std::unordered_map<c10::DeviceIndex, std::unique_ptr<SideStreamState>> states;
  auto& state = states[device.index()];
  if (!state) {
    const auto* cuda = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
    state.reset(new SideStreamState{cuda->getStreamFromGlobalPool(device, /*isHighPriority=*/false)});
  }
  return *state;
}

std::mutex side_mu;

c10::Stream SideStream(c10::Device device) {
  std::lock_guard<std::mutex> lock(side_mu);
  return SideStateLocked(device).stream;
}

// The side stream of `caller`'s device, ordered after the work queued on `caller` so far.
c10::Stream SideStreamAfter(c10::Stream caller) {
  std::lock_guard<std::mutex> lock(side_mu);
  SideStreamState& state = SideStateLocked(caller.device());
  state.caller_ready.record(caller);
  state.caller_ready.block(state.stream);
  return state.stream;
}

void OnEngineDone(void* user_data, int status, const char* message) {
  auto* op = static_cast<InFlight*>(user_data);
  // Copy the message now: it is valid only for the duration of this call.
  CompletionQueue::Instance().Push(
      [op](int status, const std::string& message) {
        std::unique_ptr<InFlight> owned(op);
        std::exception_ptr error;
        if (status != BPS_OK) {
          error = std::make_exception_ptr(c10::Error(
              std::string("byteps ") + owned->operation + " of tensor '" + owned->name + "' failed (" + StatusName(status) +
                  "): " + (message.empty() ? std::string("no detail from the engine") : message)));
        }
        if (owned->wire.is_cuda()) {
          // Copy-backs and the Future's events go on the device's side
          // stream: queued without a host wait, and not on the legacy default
          // stream, which would order them after the compute stream's work.
          c10::StreamGuard guard(SideStream(owned->wire.device()));
          owned->done(error);
        } else {
          owned->done(error);
        }
      },
      status, message ? std::string(message) : std::string());
}

}  // namespace

const char* StatusName(int status) {
  switch (status) {
    case BPS_OK: return "BPS_OK";
    case BPS_INVALID_ARGUMENT: return "BPS_INVALID_ARGUMENT";
    case BPS_MISMATCH: return "BPS_MISMATCH";
    case BPS_PEER_FAILURE: return "BPS_PEER_FAILURE";
    case BPS_TIMEOUT: return "BPS_TIMEOUT";
    case BPS_SHUTDOWN: return "BPS_SHUTDOWN";
    case BPS_INTERNAL: return "BPS_INTERNAL";
    case BPS_NOT_INITIALIZED: return "BPS_NOT_INITIALIZED";
    default: return "unknown status";
  }
}

namespace {

// The one submission path: `op` says what the engine holds until done.
void Submit(std::unique_ptr<InFlight> op, Ordering ordering, const CallEngine& call) {
  const at::Tensor wire = op->wire;  // a copy: op may complete and go before this returns
  const std::string name = op->name;
  const char* operation = op->operation;
  TORCH_CHECK(bps_initialized(), "byteps is not initialized: call "
              "torch.distributed.init_process_group('byteps') or byteps_native.torch.init() "
              "before ", operation, " of '", name, "'");
  TORCH_INTERNAL_ASSERT(wire.is_contiguous() && (wire.is_cpu() || wire.is_cuda()));
  bps_tensor tensor{};
  tensor.data = wire.data_ptr();
  tensor.num_elements = wire.numel();
  tensor.dtype = EngineDtype(wire.scalar_type(), operation);
  tensor.device = wire.is_cuda() ? wire.device().index() : -1;
  tensor.ndim = static_cast<int32_t>(op->shape.size());
  tensor.shape = op->shape.empty() ? nullptr : op->shape.data();

  // Stream-ordered results (one machine: bps_device_stream_ordered; across
  // machines, push_pull: bps_device_push_pull_stream_ordered): the engine
  // orders the result on a stream we pass, before the submit returns. That
  // must not be the caller's stream: during DDP's backward it is the compute
  // stream, and waiting there for every bucket would stop backward from
  // overlapping the reduction. So, as ProcessGroupNCCL does, the result goes
  // to a side stream that first waits for the caller's, and the Future
  // completes at once with its events recorded on the side stream: whoever
  // wait()s on it (DDP at the end of backward) is ordered after the result,
  // nobody earlier, and no host thread blocks for it. The input is read after
  // the caller's stream: across machines the side stream waits for each
  // result in turn, and a later bucket's input must not queue behind it.
  PushPullDone complete_now;
  std::optional<c10::Stream> side;
  const bool ordered = wire.is_cuda() && (bps_device_stream_ordered() ||
                                          (ordering == Ordering::kAcrossMachines &&
                                           bps_device_push_pull_stream_ordered()));
  if (ordered) {
    complete_now = std::move(op->done);
    op->done = [name, operation](std::exception_ptr error) {
      if (!error) return;
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        // The engine latched it too: this rank's next call raises it.
        TORCH_WARN("byteps: stream-ordered ", operation, " of '", name, "' failed after completion: ", e.what());
      }
    };
  }
  InFlight* raw = op.release();
  int rc;
  if (wire.is_cuda()) {
    const auto* cuda = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
    c10::Stream caller = cuda->getStream(wire.device());
    if (complete_now) {
      side = SideStreamAfter(caller);
      // The side stream reads the wire after the result (a copy back into
      // the user's tensor): its block is not handed out again before that.
      raw->wire.record_stream(*side);
    }
    // One machine's gather and reduce_scatter take the side stream as their
    // only stream: their work and result are both ordered there.
    void* input_stream = complete_now && ordering == Ordering::kOneMachineOnly ? side->native_handle()
                                                                               : caller.native_handle();
    rc = call(tensor, raw->name.c_str(), input_stream, complete_now ? side->native_handle() : nullptr, &OnEngineDone,
              raw);
  } else {
    rc = call(tensor, raw->name.c_str(), nullptr, nullptr, &OnEngineDone, raw);
  }
  if (rc != BPS_OK) {
    std::unique_ptr<InFlight> reclaimed(raw);  // done will not be called
    const char* why = bps_last_error();
    TORCH_CHECK(false, "byteps refused ", operation, " of tensor '", name, "' (", StatusName(rc),
                "): ", (why && *why) ? why : "no detail from the engine");
  }
  if (complete_now) {
    // Copies back and Future events land on the side stream, after the result.
    c10::StreamGuard guard(*side);
    complete_now(nullptr);
  }
}

}  // namespace

void SubmitPushPull(const at::Tensor& wire, const std::string& name, int32_t priority,
                    bps_reduce_op reduce_op, c10::IntArrayRef shape_for_errors,
                    PushPullDone done) {
  auto op = std::make_unique<InFlight>(wire, "push_pull", name, std::move(done));
  op->shape = shape_for_errors.vec();
  Submit(std::move(op), Ordering::kAcrossMachines,
         [priority, reduce_op](const bps_tensor& tensor, const char* name, void* stream, void* result_stream,
                               bps_done_fn done, void* user_data) {
           if (tensor.device < 0) {
             return bps_push_pull_async(&tensor, tensor.data, name, priority, reduce_op, done, user_data);
           }
           if (result_stream) {
             return bps_push_pull_async_stream_ordered(&tensor, tensor.data, name, priority, reduce_op, stream,
                                                       result_stream, done, user_data);
           }
           return bps_push_pull_async_on_stream(&tensor, tensor.data, name, priority, reduce_op, stream, done,
                                                user_data);
         });
}

void SubmitPushPullGroup(std::vector<GroupedPushPull> members, bps_reduce_op reduce_op, int64_t fusion_bytes) {
  TORCH_CHECK(bps_initialized(), "byteps is not initialized: call byteps_native.torch.init() before a grouped "
              "push_pull");
  // Raw from here: once the engine accepted the group, each member's done
  // owns its InFlight and may run before this call returns.
  std::vector<InFlight*> ops;
  std::vector<bps_group_member> group(members.size());
  for (size_t i = 0; i < members.size(); ++i) {
    GroupedPushPull& m = members[i];
    TORCH_INTERNAL_ASSERT(m.wire.is_contiguous() && m.wire.is_cpu());
    auto* op = new InFlight(m.wire, "push_pull", m.name, std::move(m.done));
    op->shape = std::move(m.shape);
    ops.push_back(op);
    bps_group_member& c = group[i];
    c.input.data = op->wire.data_ptr();
    c.input.num_elements = op->wire.numel();
    c.input.device = -1;
    c.input.ndim = static_cast<int32_t>(op->shape.size());
    c.input.shape = op->shape.empty() ? nullptr : op->shape.data();
    c.output = c.input.data;
    c.name = op->name.c_str();
    c.priority = m.priority;
    c.reduce_op = reduce_op;
    c.done = &OnEngineDone;
    c.user_data = op;
  }
  try {
    for (size_t i = 0; i < members.size(); ++i) group[i].input.dtype = EngineDtype(ops[i]->wire.scalar_type(), "push_pull");
  } catch (...) {
    for (InFlight* op : ops) delete op;
    throw;
  }
  const int rc = bps_push_pull_group_async(group.data(), static_cast<int32_t>(group.size()), fusion_bytes, 0, nullptr);
  if (rc != BPS_OK) {
    for (InFlight* op : ops) delete op;  // no done will run
    const char* why = bps_last_error();
    TORCH_CHECK(false, "byteps refused a grouped push_pull of ", members.size(), " tensors (", StatusName(rc), "): ",
                (why && *why) ? why : "no detail from the engine");
  }
}

void SubmitGatherBytes(const at::Tensor& input, int64_t offset, const at::Tensor& output, const std::string& name,
                       int32_t priority, PushPullDone done) {
  TORCH_INTERNAL_ASSERT(input.is_contiguous() && input.scalar_type() == at::kByte &&
                        output.scalar_type() == at::kByte && input.device() == output.device());
  auto op = std::make_unique<InFlight>(output, "gather", name, std::move(done));
  op->also_read = input;
  const void* data = input.data_ptr();
  const int64_t bytes = input.numel();
  Submit(std::move(op), Ordering::kOneMachineOnly,
         [data, bytes, offset, priority](const bps_tensor& tensor, const char* name, void* stream, void*,
                                         bps_done_fn done, void* user_data) {
    return bps_gather_bytes_async_on_stream(data, bytes, offset, tensor.data, tensor.num_elements, tensor.device,
                                            name, priority, stream, done, user_data);
  });
}

void SubmitReduceScatter(const at::Tensor& buffer, int64_t offset, const at::Tensor& output, const std::string& name,
                         int32_t priority, bps_reduce_op reduce_op, PushPullDone done) {
  TORCH_INTERNAL_ASSERT(output.is_contiguous() && output.scalar_type() == buffer.scalar_type() &&
                        output.device() == buffer.device());
  auto op = std::make_unique<InFlight>(buffer, "reduce_scatter", name, std::move(done));
  op->also_written = output;
  void* kept = output.data_ptr();
  const int64_t count = output.numel();
  Submit(std::move(op), Ordering::kOneMachineOnly,
         [offset, count, kept, priority, reduce_op](const bps_tensor& tensor, const char* name, void* stream, void*,
                                                    bps_done_fn done, void* user_data) {
    return bps_reduce_scatter_async_on_stream(&tensor, offset, count, kept, name, priority, reduce_op, stream, done,
                                              user_data);
  });
}

}  // namespace byteps_torch
