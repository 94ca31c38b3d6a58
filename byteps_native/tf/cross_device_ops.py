"""BytePSOps: a tf.distribute.CrossDeviceOps that spans machines.

Each machine runs one process whose ``tf.distribute.MirroredStrategy`` covers
its local devices. BytePSOps sums the local replicas on the host, sums the
result across processes through the byteps-native engine, and copies the
result to every destination device::

    strategy = tf.distribute.MirroredStrategy(cross_device_ops=BytePSOps())

Semantics are those of MultiWorkerMirroredStrategy: SUM is the sum over every
replica of every process, MEAN divides it by (local replicas x processes),
``strategy.num_replicas_in_sync`` is the global replica count (so Keras and
``tf.nn.compute_average_loss`` scale losses correctly), broadcast takes rank 0's
value, gather concatenates the replicas of rank 0, then rank 1, ...
Each process feeds its own shard of the data. See mirrored_routing.py for why
constructing BytePSOps adjusts MirroredStrategy, and docs/tf.md for limits:

* With ``jit_compile=True`` on all-GPU devices MirroredStrategy bypasses
  custom cross-device ops entirely (it uses its own collectives under XLA), so
  nothing crosses processes: do not combine XLA-compiled steps on GPUs with
  BytePSOps.
* Sparse gradients (IndexedSlices) are reduced as dense tensors and come back
  dense.
* Every process must have the same number of local replicas.
"""
import tensorflow as tf
from tensorflow.python.distribute import cross_device_ops as cross_device_ops_lib
from tensorflow.python.distribute import distribute_utils
from tensorflow.python.distribute import reduce_util
from tensorflow.python.distribute import values as value_lib

from byteps_native.tf import engine, fusion


def _local_values(value):
    if isinstance(value, value_lib.DistributedValues):
        return list(value.values)
    return [value]


def _hint(destinations, index):
    """A stable description of one reduced value: its variable's name if the
    destination is a variable (same on every process), else its position."""
    name = getattr(destinations, "name", None)
    if isinstance(name, str) and name and not isinstance(destinations, str):
        return f"{index}.{name.split(':')[0]}"
    return f"t{index}"


class BytePSOps(cross_device_ops_lib.CrossDeviceOps):
    """Cross-device and cross-process reduction through the byteps-native engine.

    Constructing it initialises the engine from the BytePS environment
    (idempotent) and installs the MirroredStrategy routing of
    mirrored_routing.py.
    """

    def __init__(self):
        super().__init__()
        engine.init()
        from byteps_native.tf import mirrored_routing  # imports this module
        mirrored_routing.install()

    @property
    def _num_between_graph_workers(self):
        # >1 disables the base class's "one local replica: just copy" shortcut,
        # which would skip the other processes.
        return engine.size()

    # -- helpers -------------------------------------------------------------

    def _host(self):
        # The engine op has a CPU kernel; local sums are formed where it runs.
        return "/device:CPU:0"

    def _mirror(self, tensor, destinations, fallback_value, always_wrap=False):
        if cross_device_ops_lib.check_destinations(destinations):
            devices = cross_device_ops_lib.get_devices_from(destinations, self._canonicalize_devices)
        else:
            devices = cross_device_ops_lib.get_devices_from(fallback_value, self._canonicalize_devices)
        copies = []
        for device in devices:
            with tf.device(device):
                copies.append(tf.identity(tensor))
        return distribute_utils.regroup(copies, wrap_class=value_lib.Mirrored, always_wrap=always_wrap)

    def _reduce_pairs(self, reduce_op, value_destination_pairs, label):
        if reduce_op not in (reduce_util.ReduceOp.SUM, reduce_util.ReduceOp.MEAN):
            raise ValueError(f"BytePSOps supports ReduceOp.SUM and ReduceOp.MEAN, got {reduce_op}")
        local_sums, hints, replica_counts = [], [], set()
        with tf.device(self._host()):
            for index, (value, destinations) in enumerate(value_destination_pairs):
                parts = [fusion.densify(v) for v in _local_values(value)]
                replica_counts.add(len(parts))
                local_sums.append(parts[0] if len(parts) == 1 else tf.math.add_n(parts))
                hints.append(_hint(destinations, index))
        if len(replica_counts) > 1:
            raise ValueError(f"values to reduce together have different numbers of local replicas: "
                             f"{sorted(replica_counts)}")
        divisor = 1
        if reduce_op == reduce_util.ReduceOp.MEAN:
            divisor = replica_counts.pop() * engine.size()
        label = f"bps.tf.{label}.{reduce_op.value.lower()}"
        reduced = fusion.push_pull_many(local_sums, label, hints, divisor, device=self._host())
        return [self._mirror(r, d, v) for r, (v, d) in zip(reduced, value_destination_pairs)]

    # -- CrossDeviceOps ------------------------------------------------------

    def reduce_implementation(self, reduce_op, per_replica_value, destinations, options):
        del options  # fusion and priorities are BytePS's own
        return self._reduce_pairs(reduce_op, [(per_replica_value, destinations)], "reduce")[0]

    def batch_reduce_implementation(self, reduce_op, value_destination_pairs, options):
        del options
        return self._reduce_pairs(reduce_op, list(value_destination_pairs), "batch_reduce")

    def broadcast_implementation(self, tensor, destinations):
        """Every process receives rank 0's `tensor` (root's value + zeros, summed)."""
        with tf.device(self._host()):
            value = tf.convert_to_tensor(tensor)
            original_dtype = value.dtype
            if original_dtype == tf.bool:
                value = tf.cast(value, tf.uint8)
            contribution = value if engine.rank() == 0 else tf.zeros_like(value)
            (result,) = fusion.push_pull_many([contribution], "bps.tf.broadcast", ["value"],
                                              device=self._host())
            result = tf.cast(result, original_dtype) if original_dtype == tf.bool else result
        return self._mirror(result, destinations, tensor, always_wrap=True)

    def _gather_implementation(self, per_replica_value, destinations, axis, options):
        """Concatenate along `axis` the local replicas of rank 0, then rank 1, ...

        Two engine calls: the per-process lengths along `axis`, then each
        process's block placed at its offset in a zero tensor, summed.
        """
        del options
        size, rank = engine.size(), engine.rank()
        with tf.device(self._host()):
            parts = [tf.convert_to_tensor(v) for v in _local_values(per_replica_value)]
            local = parts[0] if len(parts) == 1 else tf.concat(parts, axis)
            original_dtype = local.dtype
            if original_dtype == tf.bool:
                local = tf.cast(local, tf.uint8)
            ndim = local.shape.rank
            if ndim is None:
                raise ValueError("BytePSOps gather needs tensors of known rank")
            axis = axis % ndim if ndim else 0
            length = tf.cast(tf.shape(local)[axis], tf.int64)
            slot = tf.one_hot(rank, size, dtype=tf.int64) * length
            (lengths,) = fusion.push_pull_many([slot], "bps.tf.gather", [f"lengths.axis{axis}"],
                                               device=self._host())
            offset = tf.reduce_sum(lengths[:rank])
            after = tf.reduce_sum(lengths) - offset - length
            paddings = [[0, 0]] * ndim
            paddings[axis] = [offset, after]
            padded = tf.pad(local, tf.cast(paddings, tf.int64))
            (gathered,) = fusion.push_pull_many(
                [padded], "bps.tf.gather", [f"values.axis{axis}"], device=self._host())
            if original_dtype == tf.bool:
                gathered = tf.cast(gathered, tf.bool)
        return self._mirror(gathered, destinations, per_replica_value)
