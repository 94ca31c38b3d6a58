#include "core/fused_group.h"

#include <cstring>
#include <memory>

#include "common/alarm_clock.h"
#include "common/dtype.h"
#include "core/fusion_plan.h"
#include "core/validation.h"

namespace bps {
namespace {

int64_t BytesOf(const TensorView& t) {
  return t.num_elements * static_cast<int64_t>(DataTypeSize(static_cast<DataType>(t.dtype)));
}

// A bucket of several members in flight: the packed copy the engine sums in
// place, and where each member's part goes back.
struct FusedBucket {
  Engine* engine = nullptr;
  std::string name;
  std::vector<GroupMember> members;
  std::vector<int64_t> offsets;  // bytes into `buffer`, per member
  std::vector<char> buffer;
  SubmitOptions options;  // the group's, for members resubmitted alone
};

// A member submitted alone, as bps_push_pull_async would.
Status SubmitAlone(Engine& engine, const GroupMember& m, const SubmitOptions& options) {
  return engine.Submit(m.input, m.output, m.name, m.priority, m.reduce_op, m.done, m.user_data, options, nullptr);
}

void OnBucketDone(void* user_data, int code, const char* message) {
  std::unique_ptr<FusedBucket> bucket(static_cast<FusedBucket*>(user_data));
  if (code == static_cast<int>(StatusCode::kOk)) {
    for (size_t i = 0; i < bucket->members.size(); ++i) {
      const GroupMember& m = bucket->members[i];
      if (m.input.num_elements > 0) memcpy(m.output, bucket->buffer.data() + bucket->offsets[i], BytesOf(m.input));
    }
    for (const GroupMember& m : bucket->members) m.done(m.user_data, code, "");
    return;
  }
  if (code == static_cast<int>(StatusCode::kMismatch)) {
    // Every rank of the bucket's round fails it so (the servers and the local
    // ranks tell each other), so every rank resubmits the same members alone,
    // and the one that differs fails under its own name. The inputs are
    // untouched: only the packed copy was summed.
    for (const GroupMember& m : bucket->members) {
      Status st = SubmitAlone(*bucket->engine, m, bucket->options);
      if (!st.ok()) m.done(m.user_data, static_cast<int>(st.code()), st.message().c_str());
    }
    return;
  }
  const std::string why = message ? message : "";
  for (const GroupMember& m : bucket->members) {
    const std::string text = "tensor '" + m.name + "' (fused with " + std::to_string(bucket->members.size() - 1) +
                             " others into '" + bucket->name + "'): " + why;
    m.done(m.user_data, code, text.c_str());
  }
}

// A refusal that came after part of the group was accepted: its members
// still complete once, but never inside the submitting call. Rare (the engine
// stopped or failed meanwhile), so one process-wide clock thread serves it.
void FailLater(std::vector<GroupMember> members, Status why) {
  static AlarmClock* clock = new AlarmClock();  // never destroyed: may fire during exit
  clock->After(0, [members = std::move(members), why] {
    for (const GroupMember& m : members) m.done(m.user_data, static_cast<int>(why.code()), why.message().c_str());
  });
}

}  // namespace

Status SubmitGroup(Engine& engine, const std::vector<GroupMember>& members, const GroupOptions& options,
                   GroupReport* report) {
  if (!engine.initialized()) return Status(StatusCode::kNotInitialized, "byteps is not initialised: call init() first");
  BPS_RETURN_IF_ERROR(engine.failure());
  std::vector<FusionCandidate> candidates(members.size());
  std::vector<CompressionSpec> compressions;  // the group's, by class - 1
  for (size_t i = 0; i < members.size(); ++i) {
    const GroupMember& m = members[i];
    BPS_RETURN_IF_ERROR(ValidatePushPull(m.input, m.output, m.name, m.reduce_op, m.done)
                            .WithContext("group member " + std::to_string(i)));
    FusionCandidate& c = candidates[i];
    c.dtype = static_cast<DataType>(m.input.dtype);
    c.reduce_op = m.reduce_op;
    c.bytes = BytesOf(m.input);
    c.priority = m.priority;
    c.alone = m.input.device >= 0;
    CompressionSpec spec;
    if (!c.alone && engine.DeclaredCompression(m.name, &spec)) {
      if (spec.segment_ends) {
        c.alone = true;  // segments of its own (a DDP bucket): its codec state is its name's
      } else {
        // Tensors of one compression share buckets, one segment each.
        size_t k = 0;
        while (k < compressions.size() && !(compressions[k] == spec)) ++k;
        if (k == compressions.size()) compressions.push_back(spec);
        c.compression = static_cast<int>(k) + 1;
      }
    }
  }
  SubmitOptions submit_options;
  submit_options.stream = options.stream;
  submit_options.timeout_seconds = options.timeout_seconds;
  // join() sees the group as one operation: a joined rank stands in with the
  // same group of zeros, so its buckets get the same names and signatures
  // (a stand-in per bucket would not match a bucket's member shapes).
  submit_options.recorded_by_caller = true;
  Submission record;
  record.group = true;
  record.fusion_bytes = options.fusion_bytes;
  for (const GroupMember& m : members) {
    record.members.push_back(Engine::SubmissionOf(m.input, m.name, m.priority, m.reduce_op));
  }
  engine.RecordSubmission(std::move(record));
  const std::vector<FusionBucket> plan = PlanFusion(candidates, options.fusion_bytes);
  GroupReport made;
  for (size_t b = 0; b < plan.size(); ++b) {
    const FusionBucket& planned = plan[b];
    Status st;
    if (planned.members.size() == 1) {
      st = SubmitAlone(engine, members[planned.members[0]], submit_options);
    } else {
      auto bucket = std::make_unique<FusedBucket>();
      bucket->engine = &engine;
      bucket->options = submit_options;
      std::vector<std::string> names, shapes;
      int64_t bytes = 0;
      for (size_t i : planned.members) {
        const GroupMember& m = members[i];
        bucket->members.push_back(m);
        bucket->offsets.push_back(bytes);
        bytes += BytesOf(m.input);
        names.push_back(m.name);
        shapes.push_back(ShapeString(m.input));
      }
      const GroupMember& first = members[planned.members[0]];
      bucket->name = FusedBucketName(names, static_cast<DataType>(first.input.dtype), first.reduce_op);
      // The bucket compresses as its members do, with a segment per member
      // (onebit keeps a scale per tensor); an uncompressed bucket clears a
      // declaration left from steps when its members were compressed.
      const int compression = candidates[planned.members[0]].compression;
      CompressionSpec bucket_spec;
      if (compression > 0) {
        bucket_spec = compressions[compression - 1];
        std::vector<uint64_t> sizes;
        for (size_t i : planned.members) sizes.push_back(static_cast<uint64_t>(members[i].input.num_elements));
        bucket_spec.segment_ends = SegmentEndsOf(sizes);
      }
      engine.DeclareCompressionSpec(bucket->name, std::move(bucket_spec));
      bucket->buffer.resize(static_cast<size_t>(bytes));
      for (size_t k = 0; k < bucket->members.size(); ++k) {
        const GroupMember& m = bucket->members[k];
        if (m.input.num_elements > 0) memcpy(bucket->buffer.data() + bucket->offsets[k], m.input.data, BytesOf(m.input));
      }
      TensorView packed{};
      packed.data = bucket->buffer.data();
      packed.dtype = first.input.dtype;
      packed.device = -1;
      packed.num_elements = bytes / static_cast<int64_t>(DataTypeSize(static_cast<DataType>(first.input.dtype)));
      SubmitOptions bucket_options = submit_options;
      bucket_options.shape_text = FusedBucketShape(shapes);
      FusedBucket* raw = bucket.get();
      st = engine.Submit(packed, raw->buffer.data(), raw->name, planned.priority, first.reduce_op, &OnBucketDone, raw,
                         bucket_options, nullptr);
      if (st.ok()) {
        bucket.release();  // OnBucketDone owns it now
        made.fused_members += static_cast<int>(planned.members.size());
      }
    }
    if (!st.ok()) {
      if (b == 0) return st;  // nothing accepted yet
      std::vector<GroupMember> refused;
      for (size_t later = b; later < plan.size(); ++later) {
        for (size_t i : plan[later].members) refused.push_back(members[i]);
      }
      FailLater(std::move(refused), st);
      break;
    }
    made.operations++;
  }
  if (report) *report = made;
  return Status::OK();
}

}  // namespace bps
