// What this op library was compiled against, read by byteps_native/tf at
// import (through ctypes, before TensorFlow loads the ops) so that a
// TensorFlow upgrade gives a clear "rebuild" message instead of an undefined
// symbol or a silent ABI mismatch.
//
// TensorFlow's headers do not carry its release string (TF_MAJOR_VERSION is a
// build-time define of TF itself), but they do carry TF_GRAPH_DEF_VERSION,
// which moves with every release: Python compares it with
// tf.version.GRAPH_DEF_VERSION.
#include "c_api/byteps_c.h"
#include "tensorflow/core/public/version.h"

extern "C" {

__attribute__((visibility("default"))) int byteps_tf_graph_def_version(void) {
  return TF_GRAPH_DEF_VERSION;
}

__attribute__((visibility("default"))) int byteps_tf_c_api_version(void) {
  return BPS_C_API_VERSION;
}

}  // extern "C"
