#include "core/placed_sum.h"

#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>

#include "common/dtype.h"
#ifdef BPS_WITH_CUDA
#include "gpu/device_bytes.h"
#endif

namespace bps {
namespace {

bool Overlap(const char* a, int64_t a_bytes, const char* b, int64_t b_bytes) {
  return a_bytes > 0 && b_bytes > 0 && a < b + b_bytes && b < a + a_bytes;
}

#ifndef BPS_WITH_CUDA
Status NoDeviceBuild(const std::string& what) {
  return Status::Invalid(what + ": a CUDA buffer, but this engine was built without CUDA");
}
#endif

Status ValidateGather(const GatherBytes& g, const std::string& what) {
  if (g.input_bytes < 0 || g.offset < 0 || g.total_bytes < 0 || g.input_bytes > g.total_bytes ||
      g.offset > g.total_bytes - g.input_bytes) {
    return Status::Invalid(what + ": this rank's " + std::to_string(g.input_bytes) + " bytes at offset " +
                           std::to_string(g.offset) + " do not fit the " + std::to_string(g.total_bytes) +
                           " gathered bytes");
  }
  if ((g.input_bytes > 0 && !g.input) || (g.total_bytes > 0 && !g.output)) {
    return Status::Invalid(what + ": null input or output");
  }
  const char* in = static_cast<const char*>(g.input);
  char* slot = static_cast<char*>(g.output) + g.offset;
  if (g.device >= 0 && in != slot && Overlap(in, g.input_bytes, static_cast<char*>(g.output), g.total_bytes)) {
    return Status::Invalid(what + ": a device input must be this rank's slot of the output or apart from it");
  }
  return Status::OK();
}

// Host memory: this rank's bytes first (memmove: they may lie anywhere in
// the output), then zeros around them.
void PlaceOnHost(const GatherBytes& g) {
  char* out = static_cast<char*>(g.output);
  if (g.input_bytes > 0) memmove(out + g.offset, g.input, g.input_bytes);
  if (g.offset > 0) memset(out, 0, g.offset);
  const int64_t after = g.offset + g.input_bytes;
  if (g.total_bytes > after) memset(out + after, 0, g.total_bytes - after);
}

// A reduce-scatter in flight: the caller's completion and the range it keeps.
// The sum may complete before the submitting thread queued a device copy of
// the range: OnSummed waits for `armed`.
struct KeptRange {
  DoneCallback done = nullptr;
  void* user_data = nullptr;
  char* output = nullptr;
  const char* source = nullptr;  // the kept range in the summed buffer
  int64_t bytes = 0;
  int32_t device = -1;
  void* copied = nullptr;  // the device copy queued on the stream (one machine)
  Status copy_failure;
  std::mutex mu;
  std::condition_variable cv;
  bool armed = false;

  void Arm() {
    std::lock_guard<std::mutex> lock(mu);
    armed = true;
    cv.notify_all();
  }
};

Status CopyKeptRange(KeptRange& k) {
  if (k.bytes == 0) return Status::OK();
  if (k.device < 0) {
    memcpy(k.output, k.source, k.bytes);
    return Status::OK();
  }
#ifdef BPS_WITH_CUDA
  if (k.copied) return gpu::WaitForCopy(k.copied, k.device);
  return gpu::CopyBytesNow(k.output, k.source, k.bytes, k.device);
#else
  return NoDeviceBuild("reduce_scatter");
#endif
}

void OnSummed(void* user_data, int code, const char* message) {
  std::unique_ptr<KeptRange> k(static_cast<KeptRange*>(user_data));
  {
    std::unique_lock<std::mutex> lock(k->mu);
    k->cv.wait(lock, [&] { return k->armed; });
  }
  const StatusCode summed = static_cast<StatusCode>(code);
  Status st = summed == StatusCode::kOk ? k->copy_failure : Status(summed, message ? message : "");
  if (st.ok()) st = CopyKeptRange(*k).WithContext("reduce_scatter: copying out the kept range");
#ifdef BPS_WITH_CUDA
  else if (k->copied) gpu::WaitForCopy(k->copied, k->device);  // only to release its event
#endif
  k->done(k->user_data, static_cast<int>(st.code()), st.ok() ? "" : st.message().c_str());
}

}  // namespace

Status SubmitGatherBytes(Engine& engine, const GatherBytes& g, const std::string& name, int32_t priority,
                         void* stream, DoneCallback done, void* user_data) {
  const std::string what = "gather of '" + name + "' on rank " + std::to_string(engine.rank());
  BPS_RETURN_IF_ERROR(ValidateGather(g, what));
  if (!done) return Status::Invalid(what + ": no completion callback");
  if (!engine.initialized()) return Status(StatusCode::kNotInitialized, "byteps is not initialised: call init() first");
  if (g.device < 0) {
    PlaceOnHost(g);
  } else {
#ifdef BPS_WITH_CUDA
    BPS_RETURN_IF_ERROR(
        gpu::PlaceBytesOnStream(g.input, g.input_bytes, g.offset, g.output, g.total_bytes, g.device, stream)
            .WithContext(what));
#else
    return NoDeviceBuild(what);
#endif
  }
  TensorView bytes{};
  bytes.data = g.output;
  bytes.num_elements = g.total_bytes;
  bytes.dtype = static_cast<int32_t>(DataType::kUInt8);
  bytes.device = g.device;
  return engine.Submit(bytes, g.output, name, priority, ReduceOp::kSum, done, user_data, stream);
}

Status SubmitReduceScatter(Engine& engine, const TensorView& buffer, int64_t keep_offset, int64_t keep_count,
                           void* output, const std::string& name, int32_t priority, ReduceOp reduce_op, void* stream,
                           DoneCallback done, void* user_data) {
  const std::string what = "reduce_scatter of '" + name + "' on rank " + std::to_string(engine.rank());
  if (!IsValidDataType(buffer.dtype)) return Status::Invalid(what + ": unsupported dtype code " + std::to_string(buffer.dtype));
  if (keep_offset < 0 || keep_count < 0 || buffer.num_elements < 0 || keep_count > buffer.num_elements ||
      keep_offset > buffer.num_elements - keep_count) {
    return Status::Invalid(what + ": this rank's " + std::to_string(keep_count) + " elements at offset " +
                           std::to_string(keep_offset) + " do not fit the " + std::to_string(buffer.num_elements) +
                           " summed elements");
  }
  const int64_t element = static_cast<int64_t>(DataTypeSize(static_cast<DataType>(buffer.dtype)));
  const int64_t bytes = keep_count * element;
  const char* source = static_cast<const char*>(buffer.data) + keep_offset * element;
  if (bytes > 0 && (!output || !buffer.data)) return Status::Invalid(what + ": null buffer or output");
  if (Overlap(static_cast<const char*>(output), bytes, static_cast<const char*>(buffer.data),
              buffer.num_elements * element)) {
    return Status::Invalid(what + ": the output overlaps the summed buffer");
  }
  if (!done) return Status::Invalid(what + ": no completion callback");
#ifndef BPS_WITH_CUDA
  if (buffer.device >= 0) return NoDeviceBuild(what);
#endif
  auto kept = std::make_unique<KeptRange>();
  kept->done = done;
  kept->user_data = user_data;
  kept->output = static_cast<char*>(output);
  kept->source = source;
  kept->bytes = bytes;
  kept->device = buffer.device >= 0 ? buffer.device : -1;
  KeptRange* raw = kept.get();
  BPS_RETURN_IF_ERROR(engine.Submit(buffer, buffer.data, name, priority, reduce_op, &OnSummed, raw, stream));
  kept.release();  // OnSummed owns it now
#ifdef BPS_WITH_CUDA
  // One machine: the sum is ordered on `stream` already, so the copy goes
  // there too and a caller that completes at once, stream-ordered, sees it.
  if (raw->device >= 0 && bytes > 0 && engine.DeviceStreamOrdered()) {
    raw->copy_failure = gpu::CopyBytesOnStream(raw->output, source, bytes, raw->device, stream, &raw->copied)
                            .WithContext(what);
  }
#endif
  raw->Arm();
  return Status::OK();
}

}  // namespace bps
