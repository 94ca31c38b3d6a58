// Kernel of BytepsLocalPushPull (op: local_push_pull_op.cc): the local
// replicas of a process meet here, one round per call, without blocking any
// TensorFlow thread.
//
// Each instance deposits its tensors in the round named by its `round` attr
// and returns (ComputeAsync); the last to arrive checks that every replica
// passed the same tensors, forms the local result once (sum, replica 0's, or
// the rows of every replica), hands it to the engine once when `push`, and
// finishes every instance with it. So no instance waits on a thread for a
// later one: TensorFlow's own tests trace the replicas one after another on
// one thread, and MirroredStrategy runs them on threads of their own; both
// meet here.
//
// Deadlines: an instance waits for the other local replicas at most
// `wait_seconds` (the Python face passes the engine's BYTEPS_TIMEOUT, the
// same limit the engine puts on a collective no peer completes), then every
// instance that came fails with DeadlineExceeded naming the replicas that did
// not. The clock is the engine's (bps_alarm_after; the adapter keeps none).
// `timeout_seconds` (CommunicationOptions) also bounds the engine part: it is
// the engine op's own deadline (bps_push_pull_async_with_deadline), which
// fails the round on every process.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "c_api/byteps_c.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/framework/types.h"
#include "tf/engine_alarm.h"
#include "tf/engine_bridge.h"

namespace byteps_native {
namespace tf_adapter {

using ::tensorflow::AsyncOpKernel;
using ::tensorflow::DataType;
using ::tensorflow::OpInputList;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;

namespace {

// What one instance said it reduces; every replica of a round must agree.
struct Call {
  int replicas = 0;
  std::string local_op;
  bool push = false;
  bool average = false;
  std::vector<std::string> names;
  std::vector<int64_t> priorities;
  float timeout_seconds = 0;
  int64_t fusion_bytes = 0;  // the engine's bucket limit for the pushed result (0: each tensor alone)
};

struct Arrival {
  bool arrived = false;
  OpKernelContext* ctx = nullptr;
  AsyncOpKernel::DoneCallback done;
  tsl::thread::ThreadPool* pool = nullptr;
  std::vector<Tensor> inputs;
  Call call;
};

std::string Describe(const Arrival& a) {
  std::string text = std::to_string(a.inputs.size()) + " tensor(s) [";
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    if (i) text += ", ";
    text += (i < a.call.names.size() ? "'" + a.call.names[i] + "' " : std::string()) +
            ::tensorflow::DataTypeString(a.inputs[i].dtype()) + a.inputs[i].shape().DebugString();
  }
  return text + "] local_op=" + a.call.local_op + " replicas=" + std::to_string(a.call.replicas);
}

template <typename T>
void AddInto(Tensor* out, const std::vector<Arrival>& arrivals, int index) {
  auto sum = out->flat<T>();
  sum = arrivals[0].inputs[index].flat<T>();
  for (size_t r = 1; r < arrivals.size(); ++r) sum += arrivals[r].inputs[index].flat<T>();
}

absl::Status LocalSum(DataType dtype, Tensor* out, const std::vector<Arrival>& arrivals, int index) {
  switch (dtype) {
    case ::tensorflow::DT_FLOAT: AddInto<float>(out, arrivals, index); break;
    case ::tensorflow::DT_DOUBLE: AddInto<double>(out, arrivals, index); break;
    case ::tensorflow::DT_HALF: AddInto<Eigen::half>(out, arrivals, index); break;
    case ::tensorflow::DT_BFLOAT16: AddInto<::tensorflow::bfloat16>(out, arrivals, index); break;
    case ::tensorflow::DT_INT32: AddInto<int32_t>(out, arrivals, index); break;
    case ::tensorflow::DT_INT64: AddInto<int64_t>(out, arrivals, index); break;
    case ::tensorflow::DT_UINT8: AddInto<uint8_t>(out, arrivals, index); break;
    default:
      return ::tensorflow::errors::InvalidArgument("BytePS local sum: unsupported dtype ",
                                                   ::tensorflow::DataTypeString(dtype));
  }
  return absl::OkStatus();
}

class LocalRound;

// Rounds waiting for replicas, by round name. A round leaves the table when
// its last replica arrives or its wait expires, so the next call of the same
// name (the next step) starts a fresh one.
class RoundTable {
 public:
  static RoundTable& Get() {
    static RoundTable* table = new RoundTable();  // never destroyed (engine threads may outlive statics)
    return *table;
  }
  std::mutex mu;
  std::unordered_map<std::string, std::shared_ptr<LocalRound>> waiting;
};

class LocalRound : public std::enable_shared_from_this<LocalRound> {
 public:
  struct Slot {
    LocalRound* round;
    int index;
  };

  LocalRound(std::string key, int replicas) : key_(std::move(key)), arrivals_(replicas) {}

  // Under RoundTable::mu. Returns true when this arrival completes the round.
  bool Arrive(int replica, Arrival arrival, absl::Status* rejected) {
    if (replica >= static_cast<int>(arrivals_.size())) {
      *rejected = ::tensorflow::errors::InvalidArgument(
          "BytePS per-replica all-reduce '", key_, "': local replica ", replica, " called it, but the round has ",
          arrivals_.size(), " local replicas (replicas disagree on the local replica count)");
      return false;
    }
    if (arrivals_[replica].arrived) {
      *rejected = ::tensorflow::errors::InvalidArgument(
          "BytePS per-replica all-reduce '", key_, "': local replica ", replica,
          " called it twice before every local replica called it once. Every local replica must call "
          "the all-reduce for the same values in the same order.");
      return false;
    }
    arrival.arrived = true;
    arrivals_[replica] = std::move(arrival);
    return ++arrived_ == static_cast<int>(arrivals_.size());
  }

  void StartWait(double seconds) {
    std::lock_guard<std::mutex> lock(mu_);
    if (answered_ || completing_) return;
    wait_seconds_ = seconds;
    wait_.Start(seconds, weak_from_this());
  }

  // Every replica arrived (the round has left the table).
  void Complete() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      completing_ = true;
      wait_.Cancel();
    }
    if (answered_) return;  // the wait expired just before the last arrival
    absl::Status status = Agree();
    if (status.ok()) status = FormLocalResults();
    if (!status.ok() || !arrivals_[0].call.push) {
      Finish(status);
      return;
    }
    Submit();
  }

  // The wait for the other local replicas passed.
  void Expire() {
    bool everyone_arrived = false;
    {
      RoundTable& table = RoundTable::Get();
      std::lock_guard<std::mutex> lock(table.mu);
      auto it = table.waiting.find(key_);
      if (it != table.waiting.end() && it->second.get() == this) table.waiting.erase(it);
      everyone_arrived = arrived_ == static_cast<int>(arrivals_.size());
    }
    std::string missing;
    {
      std::lock_guard<std::mutex> lock(mu_);
      // The last replica arrived as the wait ran out: Complete() answers.
      if (everyone_arrived || completing_) return;
      for (size_t r = 0; r < arrivals_.size(); ++r) {
        if (!arrivals_[r].arrived) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      }
    }
    Finish(::tensorflow::errors::DeadlineExceeded(
        "BytePS per-replica all-reduce '", key_, "': local replica(s) ", missing, " of ", arrivals_.size(),
        " of this process did not call it within ", FormatTimeout(wait_seconds_),
        " s (BYTEPS_TIMEOUT, or CommunicationOptions.timeout_seconds when smaller). Every local replica "
        "must call CrossDeviceOps._all_reduce / ReplicaContext.all_reduce for each value, in the same "
        "order; a replica that skips a call (a branch on the replica id, an early return) leaves the "
        "others waiting."));
  }

  static void EngineDone(void* user_data, int code, const char* message) {
    Slot* slot = static_cast<Slot*>(user_data);
    LocalRound* self = slot->round;
    if (code != BPS_OK) {
      std::lock_guard<std::mutex> lock(self->mu_);
      if (self->status_.ok()) {
        self->status_ = FromEngineStatus(code, self->arrivals_[0].call.names[slot->index], message,
                                         self->arrivals_[0].call.timeout_seconds);
      }
    }
    self->Release();
  }

 private:
  // Every replica passed the same call: tensors, dtypes, shapes (rows may
  // differ for concat), names and options.
  absl::Status Agree() {
    const Arrival& first = arrivals_[0];
    bool same = true;
    for (size_t r = 1; r < arrivals_.size() && same; ++r) {
      const Arrival& other = arrivals_[r];
      same = other.inputs.size() == first.inputs.size() && other.call.names == first.call.names &&
             other.call.local_op == first.call.local_op && other.call.push == first.call.push &&
             other.call.average == first.call.average && other.call.replicas == first.call.replicas;
      for (size_t i = 0; same && i < first.inputs.size(); ++i) {
        const Tensor& a = first.inputs[i];
        const Tensor& b = other.inputs[i];
        same = a.dtype() == b.dtype();
        if (!same) break;
        if (first.call.local_op != "concat") {
          same = a.shape() == b.shape();
        } else {
          same = a.dims() >= 1 && a.dims() == b.dims();
          for (int d = 1; same && d < a.dims(); ++d) same = a.dim_size(d) == b.dim_size(d);
        }
      }
    }
    if (same) return absl::OkStatus();
    std::string each;
    for (size_t r = 0; r < arrivals_.size(); ++r) {
      each += "; replica " + std::to_string(r) + ": " + Describe(arrivals_[r]);
    }
    return ::tensorflow::errors::InvalidArgument(
        "BytePS per-replica all-reduce '", key_, "': the local replicas of this process disagree on what "
        "they reduce (every local replica must pass the same structure of values, with the same dtypes and "
        "shapes, in the same order)", each);
  }

  absl::Status FormLocalResults() {
    const Arrival& first = arrivals_[0];
    const int n = static_cast<int>(first.inputs.size());
    results_.resize(n);
    for (int i = 0; i < n; ++i) {
      const Tensor& in = first.inputs[i];
      const std::string& op = first.call.local_op;
      if (op == "first") {
        if (!first.call.push) {
          results_[i] = in;
          continue;
        }
        TF_RETURN_IF_ERROR(first.ctx->allocate_temp(in.dtype(), in.shape(), &results_[i]));
        continue;  // the engine writes it from replica 0's input
      }
      if (op == "sum") {
        TF_RETURN_IF_ERROR(first.ctx->allocate_temp(in.dtype(), in.shape(), &results_[i]));
        if (in.NumElements() > 0) TF_RETURN_IF_ERROR(LocalSum(in.dtype(), &results_[i], arrivals_, i));
        continue;
      }
      TensorShape shape = in.shape();  // concat
      int64_t rows = 0;
      for (const Arrival& a : arrivals_) rows += a.inputs[i].dim_size(0);
      shape.set_dim(0, rows);
      TF_RETURN_IF_ERROR(first.ctx->allocate_temp(in.dtype(), shape, &results_[i]));
      char* out = const_cast<char*>(results_[i].tensor_data().data());
      for (const Arrival& a : arrivals_) {
        const auto bytes = a.inputs[i].tensor_data();
        if (bytes.size()) std::memcpy(out, bytes.data(), bytes.size());
        out += bytes.size();
      }
    }
    return absl::OkStatus();
  }

  void Submit() {
    const Arrival& first = arrivals_[0];
    const Call& call = first.call;
    const int n = static_cast<int>(results_.size());
    self_ = shared_from_this();  // until the engine's last callback
    remaining_ = n + 1;          // +1: the submission guard
    slots_.resize(n);
    shapes_.resize(n);
    const int32_t reduce_op = call.average ? BPS_REDUCE_AVERAGE : BPS_REDUCE_SUM;
    std::vector<bps_group_member> members;
    members.reserve(n);
    for (int i = 0; i < n; ++i) {
      slots_[i] = Slot{this, i};
      const Tensor& source = call.local_op == "first" ? first.inputs[i] : results_[i];
      int32_t engine_dtype = 0;
      if (source.NumElements() == 0 || !ToEngineDtype(source.dtype(), &engine_dtype)) {
        if (source.NumElements() != 0) {
          std::lock_guard<std::mutex> lock(mu_);
          if (status_.ok()) {
            status_ = ::tensorflow::errors::InvalidArgument("BytePS cannot reduce dtype ",
                                                            ::tensorflow::DataTypeString(source.dtype()));
          }
        }
        Release();
        continue;
      }
      members.push_back(GroupMemberOf(source, const_cast<char*>(results_[i].tensor_data().data()), engine_dtype,
                                      /*device=*/-1, &shapes_[i], call.names[i],
                                      call.priorities.empty() ? 0 : static_cast<int32_t>(call.priorities[i]),
                                      reduce_op, &LocalRound::EngineDone, &slots_[i]));
    }
    if (!members.empty()) {  // one group: the engine fuses (call.fusion_bytes)
      const int code = bps_push_pull_group_async(members.data(), static_cast<int32_t>(members.size()),
                                                 call.fusion_bytes, call.timeout_seconds, /*cuda_stream=*/nullptr);
      if (code != BPS_OK) {  // nothing accepted: no callback will come
        const std::string why = bps_last_error();
        {
          std::lock_guard<std::mutex> lock(mu_);
          if (status_.ok()) status_ = FromEngineStatus(code, members[0].name, why.c_str());
        }
        for (size_t k = 0; k < members.size(); ++k) Release();
      }
    }
    Release();  // the submission guard
  }

  void Release() {
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    absl::Status status;
    {
      std::lock_guard<std::mutex> lock(mu_);
      status = status_;
    }
    std::shared_ptr<LocalRound> self = std::move(self_);  // the buffers go with the last reference
    Finish(status);
  }

  // Finishes every replica that arrived, once, on its device's worker pool
  // (never inline on an engine or clock thread: `done` may run kernels).
  void Finish(const absl::Status& status) {
    if (answered_.exchange(true)) return;
    auto self = shared_from_this();
    for (size_t r = 0; r < arrivals_.size(); ++r) {
      if (!arrivals_[r].arrived) continue;
      auto finish = [self, r, status] {
        Arrival& a = self->arrivals_[r];
        if (status.ok()) {
          for (size_t i = 0; i < self->results_.size(); ++i) a.ctx->set_output(static_cast<int>(i), self->results_[i]);
        } else {
          a.ctx->SetStatus(status);
        }
        AsyncOpKernel::DoneCallback done = std::move(a.done);
        done();  // a.ctx is invalid from here on
      };
      if (arrivals_[r].pool != nullptr) {
        arrivals_[r].pool->Schedule(std::move(finish));
      } else {
        finish();
      }
    }
  }

  const std::string key_;
  std::vector<Arrival> arrivals_;
  int arrived_ = 0;  // under RoundTable::mu
  std::vector<Tensor> results_;
  std::vector<Slot> slots_;
  std::vector<std::vector<int64_t>> shapes_;  // the engine may read them until done
  std::atomic<int> remaining_{0};
  std::atomic<bool> answered_{false};
  std::shared_ptr<LocalRound> self_;
  std::mutex mu_;
  absl::Status status_;
  bool completing_ = false;
  double wait_seconds_ = 0;
  EngineAlarm<LocalRound> wait_;  // for the other local replicas; under mu_
};

}  // namespace

class BytepsLocalPushPullKernel : public AsyncOpKernel {
 public:
  explicit BytepsLocalPushPullKernel(OpKernelConstruction* c) : AsyncOpKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("tensor_names", &call_.names));
    OP_REQUIRES_OK(c, c->GetAttr("round", &round_));
    OP_REQUIRES_OK(c, c->GetAttr("replica", &replica_));
    OP_REQUIRES_OK(c, c->GetAttr("replicas", &call_.replicas));
    OP_REQUIRES_OK(c, c->GetAttr("local_op", &call_.local_op));
    OP_REQUIRES_OK(c, c->GetAttr("push", &call_.push));
    OP_REQUIRES_OK(c, c->GetAttr("average", &call_.average));
    OP_REQUIRES_OK(c, c->GetAttr("priorities", &call_.priorities));
    OP_REQUIRES_OK(c, c->GetAttr("timeout_seconds", &call_.timeout_seconds));
    OP_REQUIRES_OK(c, c->GetAttr("fusion_bytes", &call_.fusion_bytes));
    OP_REQUIRES_OK(c, c->GetAttr("wait_seconds", &wait_seconds_));
    ::tensorflow::DataTypeVector dtypes;
    OP_REQUIRES_OK(c, c->GetAttr("T", &dtypes));
    OP_REQUIRES(c, call_.names.size() == dtypes.size(),
                ::tensorflow::errors::InvalidArgument("BytepsLocalPushPull got ", dtypes.size(), " tensors but ",
                                                      call_.names.size(), " tensor_names"));
    OP_REQUIRES(c, call_.priorities.empty() || call_.priorities.size() == dtypes.size(),
                ::tensorflow::errors::InvalidArgument("BytepsLocalPushPull: pass none or one priority per tensor"));
    OP_REQUIRES(c, replica_ < call_.replicas,
                ::tensorflow::errors::InvalidArgument("BytepsLocalPushPull: replica ", replica_, " of ",
                                                      call_.replicas));
    OP_REQUIRES(c, wait_seconds_ > 0 && call_.timeout_seconds >= 0,
                ::tensorflow::errors::InvalidArgument("BytepsLocalPushPull: wait_seconds must be > 0 and "
                                                      "timeout_seconds >= 0"));
  }

  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    OpInputList inputs;
    OP_REQUIRES_OK_ASYNC(ctx, ctx->input_list("tensors", &inputs), done);
    Arrival arrival;
    arrival.ctx = ctx;
    arrival.done = std::move(done);
    const auto* threads = ctx->device()->tensorflow_cpu_worker_threads();
    arrival.pool = threads ? threads->workers : nullptr;
    for (int i = 0; i < inputs.size(); ++i) arrival.inputs.push_back(inputs[i]);
    arrival.call = call_;

    std::shared_ptr<LocalRound> round;
    bool complete = false, started = false;
    absl::Status rejected;
    DoneCallback reject_done;
    {
      RoundTable& table = RoundTable::Get();
      std::lock_guard<std::mutex> lock(table.mu);
      std::shared_ptr<LocalRound>& slot = table.waiting[round_];
      if (!slot) {
        slot = std::make_shared<LocalRound>(round_, call_.replicas);
        started = true;
      }
      round = slot;
      AsyncOpKernel::DoneCallback keep = arrival.done;  // Arrive moves it only when accepted
      complete = round->Arrive(replica_, std::move(arrival), &rejected);
      if (!rejected.ok()) reject_done = std::move(keep);
      if (complete) table.waiting.erase(round_);
    }
    if (!rejected.ok()) {
      ctx->SetStatus(rejected);
      reject_done();
      return;
    }
    if (complete) {
      round->Complete();
      return;
    }
    if (started) {
      const float limit = call_.timeout_seconds > 0 && call_.timeout_seconds < wait_seconds_
                              ? call_.timeout_seconds : wait_seconds_;
      round->StartWait(limit);
    }
  }

 private:
  Call call_;
  std::string round_;
  int replica_ = 0;
  float wait_seconds_ = 0;
};

REGISTER_KERNEL_BUILDER(Name("BytepsLocalPushPull").Device(::tensorflow::DEVICE_CPU), BytepsLocalPushPullKernel);

}  // namespace tf_adapter
}  // namespace byteps_native
