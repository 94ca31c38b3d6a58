"""MirroredStrategy(BytePSOps(cluster_resolver=...)) in a 2-process job.

argv[1] = "agree": this process is task chief:0 (rank 0) or worker:0 (rank 1)
of a chief + 1 worker cluster, as the BytePS job numbers it. Records, before
any collective: what a strategy of a 3-worker cluster reports with no peer
running (as MWMS reads it from the spec), and the session config it writes;
then a global reduce through the 2-process strategy.
argv[1] = "disagree": the resolver names the other process's task; the first
collective must fail on both processes, naming the cause.
argv[1] = "tf_config": no BytePS job at all, TF_CONFIG names task worker:2 of
3 and BytePSOps() gets no resolver: it reads TF_CONFIG as MWMS does, and the
first collective fails naming the missing job.
"""
import os
import sys
import time

import common

MODE = sys.argv[1]
tf = common.setup_tensorflow(logical_devices=2)
from tensorflow.python.distribute.cluster_resolver import SimpleClusterResolver  # noqa: E402

import byteps_native.tf as bps  # noqa: E402
from byteps_native.tf import engine  # noqa: E402

rank = int(os.environ.get("DMLC_WORKER_ID", "0"))
DEVICES = ["/cpu:0", "/cpu:1"]


def strategy_for(cluster, task_type, task_id):
    resolver = SimpleClusterResolver(tf.train.ClusterSpec(cluster), task_type=task_type, task_id=task_id)
    return tf.distribute.MirroredStrategy(DEVICES, cross_device_ops=bps.BytePSOps(cluster_resolver=resolver))


def input_context_of(strategy):
    seen = []

    def dataset_fn(ctx):
        seen.append([ctx.num_input_pipelines, ctx.input_pipeline_id, ctx.get_per_replica_batch_size(12)])
        return tf.data.Dataset.range(4)
    strategy.distribute_datasets_from_function(dataset_fn)
    return seen[0]


result = {}
if MODE == "agree":
    # worker 1 of 3: nobody else of that cluster exists
    lone = strategy_for({"worker": ["host:1", "host:2", "host:3"]}, "worker", 1)
    config = lone.update_config_proto(tf.compat.v1.ConfigProto(device_filters=["to_be_overridden"]))
    rewrite = config.graph_options.rewrite_options
    result["lone"] = {
        "engine_started": engine.is_initialized(),
        "num_replicas_in_sync": lone.num_replicas_in_sync,
        "input_context": input_context_of(lone),
        "replica_ids": lone.experimental_local_results(lone.experimental_distribute_values_from_function(
            lambda ctx: tf.constant(ctx.replica_id_in_sync_group))),
        "group_leader": config.experimental.collective_group_leader,
        "device_filters": list(config.device_filters),
        "scoped_allocator": rewrite.scoped_allocator_optimization == rewrite.ON,
        "scoped_allocator_ops": list(rewrite.scoped_allocator_opts.enable_op),
    }
    task = ("chief", 0) if rank == 0 else ("worker", 0)
    strategy = strategy_for({"chief": ["host:0"], "worker": ["host:1"]}, *task)
    result["engine_started_before_collective"] = engine.is_initialized()
    result["num_replicas_in_sync"] = strategy.num_replicas_in_sync
    values = strategy.experimental_distribute_values_from_function(
        lambda ctx: tf.constant(1.0 + ctx.replica_id_in_sync_group))
    result["sum"] = strategy.reduce(tf.distribute.ReduceOp.SUM, values, axis=None)
    result["engine"] = [engine.rank(), engine.size()]
    # TF1's configure(cluster_spec=...) names the task the same way; the
    # devices stay this process's own
    configured = tf.distribute.MirroredStrategy(DEVICES, cross_device_ops=bps.BytePSOps())
    session_config = tf.compat.v1.ConfigProto()
    configured.configure(session_config, cluster_spec={"chief": ["host:0"], "worker": ["host:1"]},
                         task_type=task[0], task_id=task[1])
    result["configured"] = {"devices": list(configured.extended.worker_devices),
                            "num_replicas_in_sync": configured.num_replicas_in_sync,
                            "device_filters": list(session_config.device_filters)}
    try:
        configured.configure(cluster_spec={"worker": ["host:1", "host:2", "host:3"]}, task_type="worker", task_id=2)
        result["configured"]["error"] = None
    except ValueError as e:
        result["configured"]["error"] = str(e)
    result["configured"]["num_replicas_after_refusal"] = configured.num_replicas_in_sync
elif MODE == "tf_config":
    strategy = tf.distribute.MirroredStrategy(DEVICES, cross_device_ops=bps.BytePSOps())
    result["num_replicas_in_sync"] = strategy.num_replicas_in_sync
    result["replica_ids"] = strategy.experimental_local_results(strategy.experimental_distribute_values_from_function(
        lambda ctx: tf.constant(ctx.replica_id_in_sync_group)))
    result["engine_started"] = engine.is_initialized()
    try:
        strategy.reduce(tf.distribute.ReduceOp.SUM, tf.constant(1.0), axis=None)
        result["error"] = None
    except ValueError as e:
        result["error"] = str(e)
else:
    task = ("worker", 0) if rank == 0 else ("chief", 0)  # the other process's task
    strategy = strategy_for({"chief": ["host:0"], "worker": ["host:1"]}, *task)
    start = time.monotonic()
    try:
        strategy.reduce(tf.distribute.ReduceOp.SUM, tf.constant(1.0), axis=None)
        result["error"] = None
    except ValueError as e:
        result["error"] = str(e)
    result["seconds"] = time.monotonic() - start
common.write_result(rank, result)
