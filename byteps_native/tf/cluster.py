"""Where this process sits in a TensorFlow cluster handed to BytePSOps.

``BytePSOps(cluster_resolver=...)`` takes the same resolver as
MultiWorkerMirroredStrategy. With a non-empty cluster spec the job's size and
this process's rank come from the spec (chief and workers count, the chief
first, as MWMS numbers them), so a strategy can be built, and report its
global replica count, before any peer runs; the engine starts at the first
collective, and must then agree with the spec (its rank and size come from
the BytePS environment, e.g. bpslaunch's DMLC_WORKER_ID/DMLC_NUM_WORKER).

Without a resolver, TF_CONFIG is read as MWMS reads it, but only in a
process that no BytePS launcher set up (no DMLC_ROLE, not torchrun): there a
program written for MWMS gets its cluster's size and its replica ids, and,
at the first collective, an error naming the missing BytePS job instead of
training alone. Where a launcher set the job up, the engine decides.
"""
import copy
import os

from tensorflow.core.protobuf import rewriter_config_pb2
from tensorflow.python.distribute import multi_worker_util

from byteps_native._runtime import config


class ClusterPosition:
    """This task's place in a cluster spec: job size, rank, TF task name."""

    def __init__(self, cluster_spec, task_type, task_id):
        if task_type is None or task_id is None:
            raise ValueError("BytePSOps(cluster_resolver=...): the resolver's cluster spec is not empty, so it must "
                             "also name this process's task (task_type and task_id), as for "
                             "MultiWorkerMirroredStrategy")
        if task_type not in ("chief", "worker"):
            raise ValueError(f"BytePSOps(cluster_resolver=...): task_type {task_type!r} does not train; BytePSOps "
                             f"runs in the cluster's 'chief' and 'worker' tasks")
        self.cluster_spec = cluster_spec
        self.task_type = task_type
        self.task_id = int(task_id)
        # validates that the task exists in the spec
        self.size = multi_worker_util.worker_count(cluster_spec, task_type)
        self.rank = multi_worker_util.id_in_cluster(cluster_spec, task_type, self.task_id)

    @classmethod
    def from_environment(cls, cluster_resolver):
        """The position of `cluster_resolver`, else of TF_CONFIG in a process no
        BytePS launcher set up (see the module docstring); None: the engine decides."""
        if cluster_resolver is None and os.environ.get("TF_CONFIG") and not _launcher_configured():
            from tensorflow.python.distribute.cluster_resolver import tfconfig_cluster_resolver
            cluster_resolver = tfconfig_cluster_resolver.TFConfigClusterResolver()
        return cls.from_resolver(cluster_resolver)

    @classmethod
    def from_resolver(cls, cluster_resolver):
        """The position a resolver describes; None for no resolver or an empty
        cluster spec (a local job: the engine's own environment decides)."""
        if cluster_resolver is None:
            return None
        cluster_spec = multi_worker_util.normalize_cluster_spec(cluster_resolver.cluster_spec())
        if not cluster_spec.as_dict():
            return None
        return cls(cluster_spec, cluster_resolver.task_type, cluster_resolver.task_id)

    def describe(self):
        return f"task {self.task_type}:{self.task_id} of a cluster of {self.size} chief/worker tasks (rank {self.rank})"

    def check_engine(self, engine_rank, engine_size):
        """A clear error when the running engine's job is not the cluster's."""
        if (engine_rank, engine_size) != (self.rank, self.size):
            raise ValueError(
                f"BytePSOps was given {self.describe()}, but the BytePS engine runs as rank {engine_rank} of "
                f"{engine_size}: start one BytePS worker per chief/worker task with DMLC_NUM_WORKER={self.size} "
                f"and DMLC_WORKER_ID={self.rank} for this task (bpslaunch sets them), or drop cluster_resolver=")


def _launcher_configured():
    return bool(config.role()) or config.launched_by_torchrun()


def update_config_proto(config_proto, position):
    """A copy of `config_proto` with what MWMS writes into a session config
    (CollectiveAllReduceExtended._update_config_proto), so that a TF1 program
    configures its sessions the same whichever of the two strategies it
    uses: the scoped-allocator rewrite for CollectiveReduce ops only (it
    leaves BytePSOps' ops alone), and, when the cluster is known, the
    collective group leader and a device filter of this task (a session then
    never waits on another task's devices)."""
    updated = copy.deepcopy(config_proto)
    rewrite_options = updated.graph_options.rewrite_options
    rewrite_options.scoped_allocator_optimization = rewriter_config_pb2.RewriterConfig.ON
    del rewrite_options.scoped_allocator_opts.enable_op[:]
    rewrite_options.scoped_allocator_opts.enable_op.append("CollectiveReduce")
    if position is None:
        return updated
    updated.experimental.collective_group_leader = multi_worker_util.collective_leader(
        position.cluster_spec, position.task_type, position.task_id)
    del updated.device_filters[:]
    updated.device_filters.append(f"/job:{position.task_type}/task:{position.task_id}")
    return updated
