"""Loads the TF op library once, after checking it matches this TensorFlow.

A library built against another TensorFlow fails in obscure ways (undefined
symbols, or worse, a silently different ABI), so load failures and a
graph-def version that differs from the running TensorFlow's become an
ImportError that names the rebuild command.
"""
import ctypes
import os

import tensorflow as tf

from byteps_native._runtime import library

OPS_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libbyteps_tf_ops.so")
EXPECTED_C_API_VERSION = library.C_API_VERSION
_rebuild_hint = library.rebuild_hint


def _load():
    if not os.path.exists(OPS_PATH):
        raise ImportError(
            f"byteps_native.tf: op library {OPS_PATH} is missing (TensorFlow was not importable "
            f"when byteps-native was built?); {_rebuild_hint()}")
    library.engine()  # resolve the engine first so the op library finds the same copy
    # TensorFlow must be the first to dlopen the library: it collects the ops
    # registered while it loads, so an earlier ctypes load would hide them.
    try:
        ops_module = tf.load_op_library(OPS_PATH)
    except (tf.errors.NotFoundError, OSError) as err:
        raise ImportError(
            f"byteps_native.tf: cannot load {OPS_PATH} into TensorFlow {tf.__version__}: {err}; "
            f"it was probably built against another TensorFlow; {_rebuild_hint()}") from err
    lib = ctypes.CDLL(OPS_PATH)  # already loaded: just a handle for the build facts
    built = lib.byteps_tf_graph_def_version()
    running = tf.version.GRAPH_DEF_VERSION
    if built != running:
        raise ImportError(
            f"byteps_native.tf: op library was built against a TensorFlow with graph-def version "
            f"{built}, but TensorFlow {tf.__version__} (graph-def version {running}) is running; "
            f"{_rebuild_hint()}")
    if lib.byteps_tf_c_api_version() != EXPECTED_C_API_VERSION:
        raise ImportError(
            f"byteps_native.tf: op library speaks engine C API v{lib.byteps_tf_c_api_version()}, "
            f"this Python package expects v{EXPECTED_C_API_VERSION}; {_rebuild_hint()}")
    return ops_module


ops = _load()
