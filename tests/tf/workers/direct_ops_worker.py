"""BytePSOps' CrossDeviceOps entry points called directly, as TensorFlow's
cross-device tests call CollectiveAllReduce (CollectiveOpsTest), on argv[1]
logical CPU devices per process: each either gives the right value or fails
naming its limit, never a wrong number (issue 31: the per-replica
``_all_reduce`` with 2 local devices returned 1.0 / 2.0 where 2.0 / 4.0 was
right); results of tf.function arguments (no device) come back as Mirrored
values on the local devices, as TensorFlow's testInputsAreFunctionArgs
expects. Every outcome is recorded, not asserted: the test decides."""
import sys

import common

LOCAL = int(sys.argv[1]) if len(sys.argv) > 1 else 2
tf = common.setup_tensorflow(logical_devices=LOCAL)
from tensorflow.python.distribute import values as value_lib  # noqa: E402

import byteps_native.tf as bps  # noqa: E402

SUM, MEAN = tf.distribute.ReduceOp.SUM, tf.distribute.ReduceOp.MEAN
DEVICES = [f"/job:localhost/replica:0/task:0/device:CPU:{i}" for i in range(LOCAL)]


def per_replica(fn):
    values = []
    for i, device in enumerate(DEVICES):
        with tf.device(device):
            values.append(tf.identity(fn(i)))
    return value_lib.PerReplica(values)


def outcome(fn):
    """["ok", value] or ["error", exception class, message]."""
    try:
        return ["ok", common.to_jsonable(tf.nest.map_structure(
            lambda t: t.numpy() if hasattr(t, "numpy") else t, fn()))]
    except Exception as e:  # pylint: disable=broad-except
        return ["error", type(e).__name__, str(e)]


def all_reduce_per_device(ops, reduce_op, value_fn, eager=False):
    """TensorFlow's CollectiveOpsTest.testAllReduceDense: one call per local
    device, one after another on this thread (value_fn(replica_id))."""
    def run():
        results = []
        for replica_id, device in enumerate(DEVICES):
            with tf.device(device):
                results.append(ops._all_reduce(reduce_op, value_fn(replica_id), replica_id, None))  # pylint: disable=protected-access
        return results
    return dense_values(run() if eager else tf.function(run)())


def dense_values(results):
    """IndexedSlices as [indices, values] lists, for the result file."""
    return tf.nest.map_structure(lambda t: [t.indices, t.values] if isinstance(t, tf.IndexedSlices) else t,
                                 results, expand_composites=False)


def slices(rows, indices):
    return tf.IndexedSlices(tf.constant(rows), tf.constant(indices, tf.int64), tf.constant([5, 1], tf.int64))


def local_results(value):
    return [t for t in value.values] if isinstance(value, value_lib.DistributedValues) else [value]


def function_args(ops):
    """TensorFlow's CollectiveOpsTest.testInputsAreFunctionArgs."""
    traced = {}

    @tf.function
    def reduce_fn(v):
        traced["input_devices"] = [t.device for t in v.values]  # function inputs carry no device
        reduced = ops.batch_reduce(SUM, [(v, v), (v, v)])
        traced["types"] = [type(r).__name__ for r in reduced]
        traced["devices"] = [[t.device for t in local_results(r)] for r in reduced]
        return [local_results(r) for r in reduced]

    values = reduce_fn(per_replica(lambda i: tf.constant(1.0)))
    return dict(traced, values=values)


with_devices = bps.BytePSOps(devices=DEVICES)  # starts the engine
rank = bps.rank()
without_devices = bps.BytePSOps()
strategy = tf.distribute.MirroredStrategy(DEVICES, cross_device_ops=bps.BytePSOps())
bound = strategy.extended._cross_device_ops  # pylint: disable=protected-access

result = {"rank": rank, "devices": DEVICES}
for label, ops in (("with_devices", with_devices), ("without_devices", without_devices), ("strategy", bound)):
    result[f"all_reduce_sum_{label}"] = outcome(lambda ops=ops: all_reduce_per_device(
        ops, SUM, lambda r: (tf.constant(1.0), tf.constant(2.0))))
result["all_reduce_mean_with_devices"] = outcome(lambda: all_reduce_per_device(
    with_devices, MEAN, lambda r: tf.constant(1.0)))
# Issue 42: the per-replica all-reduce with every local replica's own value
# (global replica g holds 1 + g), dense, sparse and mixed, SUM and MEAN, in a
# tf.function and eagerly (the calls one after another on this thread).
GLOBAL = rank * LOCAL


def mixed(r):
    g = float(GLOBAL + r)
    return (slices([[1.0 + g]], [r]), tf.constant(1.0 + g), slices([[3.0], [g]], [2, 4]), tf.fill([2], 2.0 + g))


for mode in ("function", "eager"):
    eager = mode == "eager"
    for op_name, op in (("sum", SUM), ("mean", MEAN)):
        result[f"replica_dense_{op_name}_{mode}"] = outcome(lambda op=op, eager=eager: all_reduce_per_device(
            with_devices, op, lambda r: (tf.constant(1.0 + GLOBAL + r), tf.fill([3], 2.0 * (GLOBAL + r))),
            eager=eager))
    result[f"replica_sparse_sum_{mode}"] = outcome(lambda eager=eager: all_reduce_per_device(
        with_devices, SUM, lambda r: slices([[1.0 + GLOBAL + r]], [GLOBAL + r]), eager=eager))
    result[f"replica_mixed_mean_{mode}"] = outcome(lambda eager=eager: all_reduce_per_device(
        with_devices, MEAN, mixed, eager=eager))


def replica_args():
    """Function arguments (no device) as each replica's input, through the strategy's bound ops."""
    @tf.function
    def run(values):
        return [bound._all_reduce(SUM, v, r, None) for r, v in enumerate(values)]  # pylint: disable=protected-access
    return run([tf.constant([1.0 + GLOBAL + r, 1.0]) for r in range(LOCAL)])


result["replica_function_args"] = outcome(replica_args)
if LOCAL > 1:
    # replicas that disagree: replica 1 passes [4] where replica 0 passes [3];
    # then replica 1 never calls (a short wait through BYTEPS_TIMEOUT's reader)
    result["replica_shape_mismatch"] = outcome(lambda: all_reduce_per_device(
        with_devices, SUM, lambda r: tf.ones([3 + r])))

    def only_replica_0():
        @tf.function
        def run():
            with tf.device(DEVICES[0]):
                return with_devices._all_reduce(SUM, tf.constant(1.0), 0, None)  # pylint: disable=protected-access
        return run()

    import os  # noqa: E402
    os.environ["BYTEPS_TIMEOUT"] = "3"  # read by the op's wait (the engine already runs with its own)
    result["replica_never_calls"] = outcome(only_replica_0)
for label, ops in (("with_devices", with_devices), ("strategy", bound), ("without_devices", without_devices)):
    result[f"function_args_{label}"] = outcome(lambda ops=ops: function_args(ops))

# The merge_call entry points with every local replica's value: global replica g holds 1 + g.
value = per_replica(lambda i: tf.fill([3], 1.0 + rank * LOCAL + i))
result["reduce_sum"] = outcome(lambda: local_results(with_devices.reduce(SUM, value, value)))
result["reduce_mean"] = outcome(lambda: local_results(with_devices.reduce(MEAN, value, value)))
result["batch_reduce_sum"] = outcome(lambda: [local_results(r) for r in with_devices.batch_reduce(
    SUM, [(value, value), (value, value)])])
result["broadcast"] = outcome(lambda: local_results(with_devices.broadcast(
    tf.fill([2], 100.0 + rank), value)))
result["gather"] = outcome(lambda: local_results(with_devices._gather(  # pylint: disable=protected-access
    per_replica(lambda i: tf.fill([1, 2], float(rank * LOCAL + i))), value, 0, None)))

# Issue 42, XLA: a step compiled with XLA must fail on every process naming
# jit_compile, never reduce locally. On CPUs MirroredStrategy keeps
# merge_call (its _use_merge_call is False only in an XLA context on all-GPU
# devices), so BytePSOps' own refusal answers; with _is_gpu_device patched to
# call these CPUs GPUs, TensorFlow takes its XLA bypass (_get_cross_device_ops
# returns its in-process collectives), which mirrored_routing refuses.
from unittest import mock  # noqa: E402

from tensorflow.python.distribute import mirrored_run, mirrored_strategy  # noqa: E402


def gpu_decision(as_gpus):
    if not as_gpus:
        return mock.patch.object(mirrored_strategy, "_is_gpu_device", mirrored_strategy._is_gpu_device)  # pylint: disable=protected-access
    patches = [mock.patch.object(module, "_is_gpu_device", lambda device: True)
               for module in (mirrored_strategy, mirrored_run)]

    class Both:
        def __enter__(self):
            for p in patches:
                p.start()

        def __exit__(self, *exc):
            for p in patches:
                p.stop()
    return Both()


def xla_step(as_gpus):
    xla_strategy = tf.distribute.MirroredStrategy(DEVICES, cross_device_ops=bps.BytePSOps())

    @tf.function(jit_compile=True)
    def step(x):
        with gpu_decision(as_gpus):
            # TensorFlow's decision itself, as MirroredExtended sees it in this context
            traced["use_merge_call"] = xla_strategy.extended._use_merge_call()  # pylint: disable=protected-access
        return tf.distribute.get_replica_context().all_reduce(SUM, x)

    traced = {}
    with gpu_decision(as_gpus):
        out = xla_strategy.run(step, args=(tf.constant(1.0),))
    return {"use_merge_call": traced.get("use_merge_call"), "values": local_results(out)}


result["xla_step_cpu"] = outcome(lambda: xla_step(False))
result["xla_step_gpu_decision"] = outcome(lambda: xla_step(True))


def keras_fit(jit_compile):
    import keras
    keras_strategy = tf.distribute.MirroredStrategy(DEVICES, cross_device_ops=bps.BytePSOps())
    with keras_strategy.scope():
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        model.compile(optimizer="sgd", loss="mse", jit_compile=jit_compile)
    # each process its own rows (rank-dependent): weights agree across
    # processes only if the gradients were summed across them
    data = tf.data.Dataset.from_tensor_slices((tf.fill([16, 2], float(rank + 1)), tf.ones([16, 1]))).batch(16)
    model.fit(data, epochs=1, verbose=0)
    return {"jit_compile": model.jit_compile, "weights": [w.tolist() for w in model.get_weights()]}


def keras_auto_resolution():
    """Keras 3's own decision for jit_compile="auto" (trainer.py,
    _resolve_auto_jit_compile) on a machine that reports a GPU: False for a
    model built in a strategy's scope, True without one."""
    import keras
    fake = [tf.config.PhysicalDevice("/physical_device:CPU:0", "CPU"),
            tf.config.PhysicalDevice("/physical_device:GPU:0", "GPU")]
    auto_strategy = tf.distribute.MirroredStrategy(DEVICES, cross_device_ops=bps.BytePSOps())
    with auto_strategy.scope():
        scoped = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    plain = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    with mock.patch.object(tf.config, "list_physical_devices", lambda *a, **k: fake):
        return {"in_scope": scoped._resolve_auto_jit_compile(),  # pylint: disable=protected-access
                "no_strategy": plain._resolve_auto_jit_compile()}  # pylint: disable=protected-access


result["keras_fit_jit"] = outcome(lambda: keras_fit(True))
result["keras_fit_auto"] = outcome(lambda: keras_fit("auto"))
result["keras_auto_resolution"] = outcome(keras_auto_resolution)
common.write_result(rank, result)
