// Every tensor this process's BytepsPushPull kernels handed to the engine,
// numbered in submission order, for Horovod's join(): a rank that has joined
// must stand in, with zeros, for the operations the others still submit, and
// it learns them from the others' logs (byteps_native/tf/join_protocol.py reads this
// one through the C functions below and publishes it in the job's store).
// Recording happens in the kernel, not in Python, so that ops inside
// tf.function and TF 1 graphs are seen as they run, not as they are traced.
#ifndef BYTEPS_NATIVE_TF_SUBMISSION_LOG_H_
#define BYTEPS_NATIVE_TF_SUBMISSION_LOG_H_

#include <cstdint>
#include <string>
#include <vector>

namespace byteps_native {
namespace tf_adapter {

struct Submission {
  std::string name;  // the engine name, run-time suffix included
  int dtype;         // TensorFlow DataType
  std::vector<int64_t> shape;
  int32_t priority;
  int32_t reduce_op;  // BPS_REDUCE_*
};

// Appends one submission (thread-safe; keeps the most recent ones).
void RecordSubmission(Submission submission);

}  // namespace tf_adapter
}  // namespace byteps_native

extern "C" {
// How many submissions were recorded since the library loaded.
int64_t byteps_tf_submission_count(void);
// Submission `index` as one line of text, "dtype reduce_op priority ndim
// dims... name", into `buf` (NUL-terminated when it fits). Returns the text's
// length (call again with a larger buffer when >= cap), or -1 when `index` was
// never recorded or is no longer kept.
int64_t byteps_tf_submission(int64_t index, char* buf, int64_t cap);
}

#endif  // BYTEPS_NATIVE_TF_SUBMISSION_LOG_H_
