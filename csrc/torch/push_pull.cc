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
  at::Tensor wire;
  std::string name;
  std::vector<int64_t> shape;
  PushPullDone done;
};

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
              "byteps push_pull of tensor '" + owned->name + "' failed (" + StatusName(status) +
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

void SubmitPushPull(const at::Tensor& wire, const std::string& name, int32_t priority,
                    bps_reduce_op reduce_op, c10::IntArrayRef shape_for_errors,
                    PushPullDone done) {
  TORCH_CHECK(bps_initialized(), "byteps is not initialized: call "
              "torch.distributed.init_process_group('byteps') or byteps_native.torch.init() "
              "before push_pull of '", name, "'");
  TORCH_INTERNAL_ASSERT(wire.is_contiguous() && (wire.is_cpu() || wire.is_cuda()));
  auto op = std::make_unique<InFlight>();
  op->wire = wire;
  op->name = name;
  op->shape = shape_for_errors.vec();
  op->done = std::move(done);

  bps_tensor tensor{};
  tensor.data = wire.data_ptr();
  tensor.num_elements = wire.numel();
  tensor.dtype = EngineDtype(wire.scalar_type(), "push_pull");
  tensor.device = wire.is_cuda() ? wire.device().index() : -1;
  tensor.ndim = static_cast<int32_t>(op->shape.size());
  tensor.shape = op->shape.empty() ? nullptr : op->shape.data();

  // One machine on GPUs (bps_device_stream_ordered): the engine orders the
  // result on the stream we pass, before the submit returns. That must not be
  // the caller's stream: during DDP's backward it is the compute stream, and
  // waiting there for every bucket would stop backward from overlapping the
  // reduction. So, as ProcessGroupNCCL does, the work goes on a side stream
  // that first waits for the caller's, and the Future completes at once with
  // its events recorded on the side stream: whoever wait()s on it (DDP at
  // the end of backward) is ordered after the result, nobody earlier.
  PushPullDone complete_now;
  std::optional<c10::Stream> side;
  if (wire.is_cuda() && bps_device_stream_ordered()) {
    complete_now = std::move(op->done);
    op->done = [name](std::exception_ptr error) {
      if (!error) return;
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        TORCH_WARN("byteps: stream-ordered push_pull of '", name, "' failed after completion: ", e.what());
      }
    };
  }
  InFlight* raw = op.release();
  int rc;
  if (wire.is_cuda()) {
    const auto* cuda = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
    c10::Stream caller = cuda->getStream(wire.device());
    c10::Stream engine_side = caller;
    if (complete_now) {
      side = SideStreamAfter(caller);
      engine_side = *side;
    }
    rc = bps_push_pull_async_on_stream(&tensor, tensor.data, raw->name.c_str(), priority,
                                       reduce_op, engine_side.native_handle(),
                                       &OnEngineDone, raw);
  } else {
    rc = bps_push_pull_async(&tensor, tensor.data, raw->name.c_str(), priority, reduce_op,
                             &OnEngineDone, raw);
  }
  if (rc != BPS_OK) {
    std::unique_ptr<InFlight> reclaimed(raw);  // done will not be called
    const char* why = bps_last_error();
    TORCH_CHECK(false, "byteps refused push_pull of tensor '", name, "' (", StatusName(rc),
                "): ", (why && *why) ? why : "no detail from the engine");
  }
  if (complete_now) {
    // Copies back and Future events land on the side stream, after the result.
    c10::StreamGuard guard(*side);
    complete_now(nullptr);
  }
}

}  // namespace byteps_torch
