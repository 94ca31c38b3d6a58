"""MirroredStrategy(BytePSOps) collective semantics on argv[1] (default 2)
logical CPU devices per process: reduce SUM/MEAN, batch_reduce of mixed shapes
and dtypes, broadcast, gather, sparse values; each eagerly and under
tf.function; whether the engine names stay the same over steps; and the paths
that MirroredStrategy keeps in-process (see global_semantics)."""
import sys

import common

LOCAL = int(sys.argv[1]) if len(sys.argv) > 1 else 2
tf = common.setup_tensorflow(logical_devices=LOCAL)
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
    return tf.cast(tf.fill(shape, 1 + replica_id), dtype)


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
        per_replica(lambda r: tf.fill([rank + 1, 2], tf.cast(r, tf.float32))), axis=0)
    sparse = per_replica(lambda r: tf.IndexedSlices(
        values=tf.fill([2, 3], 1.0 + tf.cast(r, tf.float32)),
        indices=tf.constant([rank, 3]), dense_shape=tf.constant([5, 3])))
    out["sparse_sum"] = tf.convert_to_tensor(strategy.reduce(SUM, sparse, axis=None))
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
    value = per_replica(lambda r: tf.fill(tf.stack([rows + rank, 2]), tf.cast(r, tf.float32)))
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


def replica_id():
    return tf.distribute.get_replica_context().replica_id_in_sync_group


def global_semantics():
    """Paths MirroredStrategy keeps inside the process unless told otherwise:
    results of strategy.run reduced or gathered (plain tensors with one device
    per process), all_gather and its gradient, replica-context assignments to
    SUM/MEAN variables, replica ids."""
    out = {}
    ids = strategy.run(lambda: tf.cast(replica_id(), tf.float32) + tf.zeros([1]))
    out["local_replica_ids"] = [t for t in strategy.experimental_local_results(ids)]
    out["gathered_replica_ids"] = strategy.gather(ids, axis=0)
    out["reduce_run_sum"] = strategy.reduce(SUM, ids, axis=None)
    out["reduce_to_cpu_mean"] = strategy.extended.reduce_to(MEAN, ids, destinations="/cpu:0")

    def all_gather_with_gradient():
        context = tf.distribute.get_replica_context()
        x = tf.cast(replica_id(), tf.float32) + tf.ones([1])
        with tf.GradientTape() as tape:
            tape.watch(x)
            gathered = context.all_gather(x, axis=0)
            weights = tf.range(1.0, tf.cast(context.num_replicas_in_sync, tf.float32) + 1.0)
            loss = tf.reduce_sum(gathered * weights)
        return gathered, tape.gradient(loss, x)

    gathered, grads = strategy.run(all_gather_with_gradient)
    out["all_gather"] = strategy.experimental_local_results(gathered)
    out["all_gather_grad"] = strategy.experimental_local_results(grads)
    out["assign_sum"] = variables["sum"].read_value()
    out["assign_mean"] = variables["mean"].read_value()
    return out


with strategy.scope():
    variables = {
        "sum": tf.Variable(0.0, aggregation=tf.VariableAggregation.SUM),
        "mean": tf.Variable(0.0, aggregation=tf.VariableAggregation.MEAN),
    }


def assign_in_replica_context():
    value = 1.0 + tf.cast(replica_id(), tf.float32)
    variables["sum"].assign(value)
    variables["mean"].assign(value)


strategy.run(assign_in_replica_context)
result["global_eager"] = materialise(global_semantics())
strategy.run(tf.function(assign_in_replica_context))
result["global_graph"] = materialise(tf.function(global_semantics)())

contexts = []


def dataset_fn(context):
    contexts.append([context.num_input_pipelines, context.input_pipeline_id,
                     context.get_per_replica_batch_size(8 * size * LOCAL)])
    return tf.data.Dataset.range(64).batch(context.get_per_replica_batch_size(8 * size * LOCAL))


iter(strategy.distribute_datasets_from_function(dataset_fn))
result["input_context"] = contexts[0]
# Global batch of 4 per replica over 4 * global-replica rows, sharded and rebatched.
rows = 4 * strategy.num_replicas_in_sync
batches = strategy.experimental_distribute_dataset(tf.data.Dataset.range(2 * rows).batch(rows))
result["distributed_batches"] = [[t.numpy().tolist() for t in strategy.experimental_local_results(b)]
                                 for b in batches]
# Uneven: the last global batch has one row, which only rank 0's shard holds;
# every process must take the same number of steps (partial batches) and stop.
uneven = tf.data.Dataset.range(2 * size + 1).batch(2 * size * LOCAL)
result["uneven_steps"] = sum(1 for _ in strategy.experimental_distribute_dataset(uneven))

# The merge_call-free path (XLA on GPUs) reaches CrossDeviceOps._all_reduce:
# each local replica calls it on its own thread under MirroredStrategy.
ops = strategy.extended._cross_device_ops  # pylint: disable=protected-access


@tf.function
def direct_all_reduce():
    def replica_fn():
        local_id = tf.get_static_value(tf.distribute.get_replica_context().replica_id_in_sync_group) % LOCAL
        value = (tf.fill([2], 1.0 + rank),
                 tf.IndexedSlices(tf.fill([1, 1], 1.0 + rank), tf.constant([rank]), tf.constant([2, 1])))
        dense, sparse = ops._all_reduce(SUM, value, local_id, None)  # pylint: disable=protected-access
        return dense, tf.convert_to_tensor(sparse), tf.constant(isinstance(sparse, tf.IndexedSlices))
    return strategy.run(replica_fn)


result["direct_all_reduce"] = [[t.numpy().tolist() for t in strategy.experimental_local_results(part)]
                               for part in direct_all_reduce()]
# Variables created in the scope start from rank 0's initial value on every
# process, as MWMS broadcasts the chief's: seeds and values differ per rank here.
tf.random.set_seed(100 + rank)
with strategy.scope():
    initial_vars = [tf.Variable(tf.random.uniform([4])), tf.Variable(lambda: tf.fill([2], 10 * (rank + 1))),
                    tf.Variable(rank == 0)]
result["initial_values"] = [[c.numpy().tolist() for c in strategy.experimental_local_results(v)]
                            for v in initial_vars]
common.write_result(rank, result)
