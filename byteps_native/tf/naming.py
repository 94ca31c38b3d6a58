"""Engine tensor names: deterministic across processes, stable across steps.

The engine matches tensors across processes by name and keeps state for every
distinct name forever, so a name must be derived only from things every
process agrees on (call site kind, position, dtype, shape, variable path) and
never from a step counter, a uid or an address.

Within one traced graph two ops may run concurrently, so equal base names get
a per-graph occurrence suffix (``~1``, ``~2``...). The counter belongs to the
outermost ``tf.function`` graph being traced, so a retrace reproduces the same
names. Eager ops run one after another, so an eager name needs no suffix:
repeated submissions of one name are served as successive rounds.
"""
import collections
import re
import threading
import weakref

import tensorflow as tf
from tensorflow.python.framework import func_graph as func_graph_lib
from tensorflow.python.framework import ops as tf_ops

from byteps_native._runtime import config, lifecycle

_lock = threading.Lock()
_counters = weakref.WeakKeyDictionary()  # outermost FuncGraph -> Counter of base names
_issued = set()  # every name this process handed to the engine (tests, leak hunting)
_UNSAFE = re.compile(r"[^A-Za-z0-9_.,:/\[\]\-]")


def sanitize(text):
    """Make `text` safe and readable inside an engine name."""
    return _UNSAFE.sub("_", str(text))


def sizes_in_names():
    """Whether engine names must carry a tensor's dtype and shape.

    With one process per machine (every BytePSOps job) they must not: the
    servers then see every process push the same name, compare the shapes and
    dtypes each push declares, and fail a disagreement at once on every
    process, naming the tensor -- where names that differ by shape would only
    wait for each other until a timeout. A name may change size between
    rounds (the servers re-size it). With several processes per machine the
    engine's shared-memory staging fixes a name's size on first use, and with
    BYTEPS_ENABLE_ASYNC so do the servers, so there the size goes into the name.
    """
    if not lifecycle.initialized():
        return False  # the op will fail, naming the missing init()
    # A job-wide answer: machines of different sizes (issue 29) have some
    # machine with several processes, and every process must name alike.
    topology = lifecycle.Topology("tf")
    return topology.local_size() > 1 or not topology.is_homogeneous() or config.asynchronous()


def describe(dtype, shape):
    """`float32[10,5]`; unknown dimensions print as `?`."""
    dims = tf.TensorShape(shape)
    if dims.rank is None:
        return f"{tf.as_dtype(dtype).name}[*]"
    text = ",".join("?" if d is None else str(d) for d in dims.as_list())
    return f"{tf.as_dtype(dtype).name}[{text}]"


def _outermost_function_graph():
    graph = tf_ops.get_default_graph()
    while isinstance(getattr(graph, "outer_graph", None), func_graph_lib.FuncGraph):
        graph = graph.outer_graph
    return graph


def unique(base):
    """The engine name for one tensor whose deterministic description is `base`."""
    base = sanitize(base)
    if tf.executing_eagerly():
        name = base
    else:
        with _lock:
            counter = _counters.setdefault(_outermost_function_graph(), collections.Counter())
            occurrence = counter[base]
            counter[base] += 1
        name = base if occurrence == 0 else f"{base}~{occurrence}"
    with _lock:
        _issued.add(name)
    return name


_replica_calls = weakref.WeakKeyDictionary()  # outermost FuncGraph -> Counter of local replica ids


def replica_call(replica_id):
    """Which per-replica all-reduce call this is for local replica
    `replica_id`, counted per outermost tf.function graph (0 in eager mode).
    Every local replica makes the same calls in the same order, so its k-th
    call names the same round and tensors as every other replica's k-th
    (naming.unique would count the replicas' calls as repeats of one name)."""
    if tf.executing_eagerly():
        return 0
    with _lock:
        counter = _replica_calls.setdefault(_outermost_function_graph(), collections.Counter())
        call = counter[replica_id]
        counter[replica_id] += 1
    return call


def issued(name):
    """Records `name` as used (a name built without unique(), e.g. per replica call)."""
    name = sanitize(name)
    with _lock:
        _issued.add(name)
    return name


def issued_names():
    """A copy of every engine name this process has used so far."""
    with _lock:
        return set(_issued)
