"""MirroredStrategy(BytePSOps) collective semantics on 2 logical CPU devices
per process: reduce SUM/MEAN, batch_reduce of mixed shapes and dtypes,
broadcast, gather, sparse values; each eagerly and under tf.function; and
whether the engine names stay the same over steps."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

tf = common.setup_tensorflow(logical_devices=2)
import byteps_native.tf as bps  # noqa: E402
from byteps_native.tf import naming  # noqa: E402

strategy = tf.distribute.MirroredStrategy(cross_device_ops=bps.BytePSOps())
rank, size = bps.rank(), bps.size()
SUM, MEAN = tf.distribute.ReduceOp.SUM, tf.distribute.ReduceOp.MEAN
MIXED = [("float32", [3, 4]), ("float64", [7]), ("float16", [2, 2]), ("bfloat16", [5]),
         ("int32", [6]), ("int64", []), ("uint8", [4]), ("float32", [1000])]


def per_replica(fn):
    """fn(replica_id) -> tensor, evaluated on each local replica."""
    return strategy.experimental_distribute_values_from_function(
        lambda ctx: fn(ctx.replica_id_in_sync_group))


def filled(dtype, shape, replica_id):
    # distinct per process and replica, small enough for uint8 and float16
    return tf.cast(tf.fill(shape, 1 + rank * 4 + replica_id), dtype)


def collectives():
    out = {}
    vec = per_replica(lambda r: filled(tf.float32, [3], r))
    out["reduce_sum"] = strategy.reduce(SUM, vec, axis=None)
    out["reduce_mean"] = strategy.reduce(MEAN, vec, axis=None)
    out["reduce_mean_axis0"] = strategy.reduce(MEAN, vec, axis=0)
    out["reduce_int32_sum"] = strategy.reduce(SUM, per_replica(lambda r: filled(tf.int32, [2], r)), axis=None)
    values = [per_replica(lambda r, d=d, s=s: filled(d, s, r)) for d, s in MIXED]
    out["batch_sum"] = strategy.extended.batch_reduce_to(SUM, [(v, v) for v in values])
    out["batch_mean"] = strategy.extended.batch_reduce_to(MEAN, [(v, v) for v in values])
    out["broadcast"] = strategy.extended._broadcast_to(  # pylint: disable=protected-access
        tf.fill([3], 100.0 + rank), destinations=vec)
    # rank r replica i contributes (r + 1) rows of value 10 r + i
    out["gather"] = strategy.gather(
        per_replica(lambda r: tf.fill([rank + 1, 2], 10.0 * rank + tf.cast(r, tf.float32))), axis=0)
    sparse = per_replica(lambda r: tf.IndexedSlices(
        values=tf.fill([2, 3], 1.0 + rank * 2 + tf.cast(r, tf.float32)),
        indices=tf.constant([rank, 3]), dense_shape=tf.constant([5, 3])))
    out["sparse_sum"] = strategy.reduce(SUM, sparse, axis=None)
    return tf.nest.map_structure(unwrap, out, expand_composites=False)


def unwrap(value):
    """Mirrored results as their per-device copies (a tf.function would return only one)."""
    if isinstance(value, tf.distribute.DistributedValues):
        return tuple(strategy.experimental_local_results(value))
    return value


graph_collectives = tf.function(collectives)


def materialise(results):
    return tf.nest.map_structure(lambda t: t.numpy().astype("float64").tolist(), results)


result = {"rank": rank, "size": size, "num_replicas_in_sync": strategy.num_replicas_in_sync,
          "eager": materialise(collectives()), "graph": materialise(graph_collectives())}


@tf.function
def gather_dynamic(rows):
    """Lengths known only at run time: each distinct size needs its own engine name."""
    value = per_replica(lambda r: tf.fill(tf.stack([rows + rank, 2]), 10.0 * rank + tf.cast(r, tf.float32)))
    return strategy.gather(value, axis=0)


result["gather_dynamic"] = {str(rows): local_copies[0].numpy().tolist()
                            for rows in (1, 3, 1)
                            for local_copies in [strategy.experimental_local_results(gather_dynamic(tf.constant(rows)))]}
names_after_first = naming.issued_names()
for _ in range(3):
    collectives()
    graph_collectives()
names_after_more = naming.issued_names()
result["names_after_first"] = sorted(names_after_first)
result["names_added_later"] = sorted(names_after_more - names_after_first)
result["graph_again"] = materialise(graph_collectives())
common.write_result(rank, result)
