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


def all_reduce_per_device(ops, reduce_op, value_fn):
    """TensorFlow's CollectiveOpsTest.testAllReduceDense: one call per local device."""
    @tf.function
    def run():
        results = []
        for replica_id, device in enumerate(DEVICES):
            with tf.device(device):
                results.append(ops._all_reduce(reduce_op, value_fn(), replica_id, None))  # pylint: disable=protected-access
        return results
    return run()


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
        ops, SUM, lambda: (tf.constant(1.0), tf.constant(2.0))))
result["all_reduce_mean_with_devices"] = outcome(lambda: all_reduce_per_device(
    with_devices, MEAN, lambda: tf.constant(1.0)))
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
common.write_result(rank, result)
