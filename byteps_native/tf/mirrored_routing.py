"""Makes tf.distribute.MirroredStrategy behave as MultiWorkerMirroredStrategy
when its cross-device ops is a BytePSOps.

Why this exists: MirroredStrategy was written for one process. When a job
spans processes through BytePSOps, its single-process assumptions would
silently keep values local or data duplicated:

1. ``_reduce_to`` (``strategy.reduce``, reads of SUM/MEAN sync-on-read
   variables, replica-context assignments to SUM/MEAN variables) hands plain
   values -- every value when a process has one device -- to
   ``reduce_non_distributed_value`` with the local replica count, and sends
   CPU destinations to a local ReductionToOneDevice.
2. ``_gather_to_implementation`` (``strategy.gather``,
   ``ReplicaContext.all_gather``) returns plain values unchanged.
3. int32 values always go to ReductionToOneDevice.
4. ``_num_replicas_in_sync`` and ``replica_id_in_sync_group`` are local, so
   per-replica seeds repeat across processes, ``all_gather``'s gradient takes
   the slices of the wrong replicas, and losses are scaled by 1/local replicas
   while gradients are summed over every process.
5. Input is not distributed: the ``InputContext`` (of
   ``distribute_datasets_from_function`` and ``make_input_fn_iterator``)
   reports one pipeline, the per-replica batch comes from the local count, and
   ``experimental_distribute_dataset`` neither shards nor rebatches.
6. Variables start from each process's own initial value (random
   initialisers differ per process); MWMS broadcasts the chief's.
7. ``update_config_proto`` (TF1 sessions) writes none of what MWMS writes
   for its cluster (group leader, this task's device filter, rewrites), and
   ``configure(cluster_spec=...)`` turns the strategy into one in-graph
   replication over every task's devices.

``install()`` wraps those members of ``MirroredExtended`` with the
behaviour of ``CollectiveAllReduceExtended`` (MWMS): global replica count and
ids (``rank * local + local id``), one input pipeline per process with
FILE/DATA auto-sharding and rebatching from the global batch, partial-batch
handling across processes, every reduction or gather through BytePSOps, and
rank 0's initial value for every variable created in the strategy's scope,
MWMS's session config. The process count and rank come from the BytePSOps
(its cluster resolver, else the engine).
Keras' predict, which gathers rows across workers only for an MWMS, is
adjusted by keras_gather.py, installed here too.
Each wrapper defers to TensorFlow's original unless the strategy's
cross-device ops is a BytePSOps, so other strategies are untouched. Installed
once, by BytePSOps' constructor.
"""
import threading

from tensorflow.python.distribute import cross_device_ops as cross_device_ops_lib
from tensorflow.python.distribute import distribute_lib
from tensorflow.python.distribute import distribute_utils
from tensorflow.python.distribute import input_util
from tensorflow.python.distribute import mirrored_strategy
from tensorflow.python.distribute import reduce_util
from tensorflow.python.distribute import values as value_lib
from tensorflow.python.distribute.v1 import input_lib as input_lib_v1
from tensorflow.python.eager import context
from tensorflow.python.framework import ops as framework_ops
from tensorflow.python.ops import control_flow_util
from tensorflow.python.trackable import base as trackable_base
from tensorflow.python.util import nest

from byteps_native.tf import keras_gather

_lock = threading.Lock()
_installed = False


class XlaNotSupportedError(NotImplementedError):
    """A BytePSOps reduction was asked for inside an XLA-compiled function."""


def xla_not_supported(what):
    """The error for `what` inside an XLA-compiled function: raised by
    BytePSOps' entry points, and for MirroredStrategy's own XLA bypass."""
    return XlaNotSupportedError(
        f"{what} inside an XLA-compiled function (jit_compile=True) with BytePSOps: MirroredStrategy "
        f"under XLA on GPUs replaces custom cross-device ops by its own in-process collectives "
        f"(tensorflow/python/distribute/mirrored_strategy.py: MirroredExtended._use_merge_call is False "
        f"in an XLA context when every device is a GPU, and _get_cross_device_ops then returns "
        f"self._collective_ops), which sum over this process's devices only, and BytePS's op has no XLA "
        f"kernel. Compile the step without XLA: model.compile(..., jit_compile=False) in Keras (Keras 3's "
        f"default jit_compile='auto' already resolves to False under a distribution strategy), "
        f"tf.function(jit_compile=False) around strategy.run in a custom loop.")


def in_xla_context():
    """Whether ops built now are compiled by XLA (TensorFlow's own test)."""
    return not context.executing_eagerly() and \
        control_flow_util.GraphOrParentsInXlaContext(framework_ops.get_default_graph())


def _byteps_ops(extended):
    return keras_gather.bytepsops_of(extended)


def _refuse_xla(extended, what):
    """Before TensorFlow's own checks (an XLA step's values carry no device,
    and TF would first fail on empty destinations, naming nothing useful).
    One process on GPUs may keep TensorFlow's XLA path: its in-process
    collectives are then the whole job."""
    ops = _byteps_ops(extended)
    if ops is not None and in_xla_context() and (ops.num_processes > 1 or extended._use_merge_call()):  # pylint: disable=protected-access
        raise xla_not_supported(what)


def _local_count(extended):
    return len(extended._devices)  # pylint: disable=protected-access


def _reject_per_replica_mode(options):
    if options and options.experimental_replication_mode == \
            distribute_lib.InputReplicationMode.PER_REPLICA:
        raise NotImplementedError(
            "InputReplicationMode.PER_REPLICA is not supported with BytePSOps (nor by "
            "MultiWorkerMirroredStrategy): use the default PER_WORKER mode")


def _wrap(cls, name, make_wrapper, kind="method"):
    original = cls.__dict__[name]
    if kind == "property":
        setattr(cls, name, property(make_wrapper(original.fget)))
    else:
        setattr(cls, name, make_wrapper(original))


def install():
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
    keras_gather.install()
    extended_cls = mirrored_strategy.MirroredExtended

    def initialize_strategy(original):
        def _initialize_strategy(self, devices):
            original(self, devices)
            ops = _byteps_ops(self)
            if ops is not None:
                ops.bind_devices(self._devices)
        return _initialize_strategy

    def get_cross_device_ops(original):
        def _get_cross_device_ops(self, value):
            ops = _byteps_ops(self)
            if ops is not None and self._use_merge_call():
                return ops  # including int32: the engine sums int32
            if ops is not None and ops.num_processes > 1:
                # TensorFlow's XLA bypass (XLA context, all devices GPUs): its
                # in-process collectives would sum this process's replicas only.
                raise xla_not_supported("a MirroredStrategy reduction across processes")
            return original(self, value)
        return _get_cross_device_ops

    def reduce_to(original):
        def _reduce_to(self, reduce_op, value, destinations, options):
            ops = _byteps_ops(self)
            _refuse_xla(self, "strategy.reduce / extended.reduce_to")
            if ops is None or not self._use_merge_call():
                return original(self, reduce_op, value, destinations, options)
            if distribute_utils.is_mirrored(value) and reduce_op == reduce_util.ReduceOp.MEAN:
                return value  # already equal everywhere
            options = self._communication_options.merge(options)

            def reduce_one(v):
                if not isinstance(v, value_lib.DistributedValues) and ops.num_processes == 1:
                    return cross_device_ops_lib.reduce_non_distributed_value(
                        reduce_op, v, destinations, _local_count(self))
                # A plain value counts as one replica of this process, as in MWMS.
                return ops.reduce(reduce_op, v, destinations=destinations, options=options)

            return nest.map_structure(reduce_one, value)
        return _reduce_to

    def batch_reduce_to(original):
        def _batch_reduce_to(self, reduce_op, value_destination_pairs, options):
            _refuse_xla(self, "ReplicaContext.all_reduce / extended.batch_reduce_to")
            if _byteps_ops(self) is not None and _local_count(self) == 1:
                # A value read inside a tf.function (e.g. a sync-on-read variable
                # in ReplicaContext.all_reduce) carries no device, and TF rejects
                # empty destinations; with one device there is one answer.
                value_destination_pairs = [
                    (v, d if cross_device_ops_lib.check_destinations(d) else self._devices[0])
                    for v, d in value_destination_pairs]
            return original(self, reduce_op, value_destination_pairs, options)
        return _batch_reduce_to

    def gather_to(original):
        def _gather_to_implementation(self, value, destinations, axis, options):
            ops = _byteps_ops(self)
            _refuse_xla(self, "strategy.gather / ReplicaContext.all_gather")
            if ops is None or not self._use_merge_call():
                return original(self, value, destinations, axis, options)
            return ops._gather(value, destinations=destinations, axis=axis,  # pylint: disable=protected-access
                               options=self._communication_options.merge(options))
        return _gather_to_implementation

    def num_replicas_in_sync(original_fget):
        def _num_replicas_in_sync(self):
            ops = _byteps_ops(self)
            if ops is not None:
                return _local_count(self) * ops.num_processes
            return original_fget(self)
        return _num_replicas_in_sync

    def replica_id_in_sync_group(original):
        def _get_replica_id_in_sync_group(self, replica_id):
            ops = _byteps_ops(self)
            if ops is not None:
                return ops.process_rank * _local_count(self) + replica_id
            return original(self, replica_id)
        return _get_replica_id_in_sync_group

    def local_replica_id(original):
        def _get_local_replica_id(self, replica_id_in_sync_group):
            ops = _byteps_ops(self)
            if ops is not None:
                return replica_id_in_sync_group - ops.process_rank * _local_count(self)
            return original(self, replica_id_in_sync_group)
        return _get_local_replica_id

    def in_multi_worker_mode(original):
        def _in_multi_worker_mode(self):
            # True makes tf.data agree across processes on the last partial
            # batch (uneven shards), as under MWMS.
            ops = _byteps_ops(self)
            if ops is not None:
                return ops.num_processes > 1
            return original(self)
        return _in_multi_worker_mode

    def distribute_dataset(original):
        def _experimental_distribute_dataset(self, dataset, options):
            if _byteps_ops(self) is None:
                return original(self, dataset, options)
            keras_gather.install()  # Keras may have been imported after the strategy was made
            _reject_per_replica_mode(options)
            return input_util.get_distributed_dataset(
                dataset, self._input_workers_with_options(options), self._container_strategy(),
                num_replicas_in_sync=self._num_replicas_in_sync,
                input_context=input_context(self), options=options)
        return _experimental_distribute_dataset

    def distribute_datasets_from_function(original):
        def _distribute_datasets_from_function(self, dataset_fn, options):
            if _byteps_ops(self) is None:
                return original(self, dataset_fn, options)
            keras_gather.install()
            _reject_per_replica_mode(options)
            return input_util.get_distributed_datasets_from_function(
                dataset_fn=dataset_fn, input_workers=self._input_workers_with_options(options),
                input_contexts=[input_context(self)], strategy=self._container_strategy(),
                options=options)
        return _distribute_datasets_from_function

    def distribute_values_from_function(original):
        def _experimental_distribute_values_from_function(self, value_fn):
            if _byteps_ops(self) is None:
                return original(self, value_fn)
            total = self._num_replicas_in_sync
            values = [value_fn(distribute_lib.ValueContext(
                self._get_replica_id_in_sync_group(local_id), total))
                for local_id in range(_local_count(self))]
            return distribute_utils.regroup(values, always_wrap=True)
        return _experimental_distribute_values_from_function

    def variable_initial_value(original):
        def _get_variable_creator_initial_value(self, replica_id, device, primary_var, **kwargs):
            ops = _byteps_ops(self)
            if ops is None or replica_id != 0 or ops.num_processes == 1:
                return original(self, replica_id, device, primary_var, **kwargs)
            # As MWMS: the first local replica's variable starts from rank 0's
            # value (later local replicas copy it, in the original). Variables
            # must be created in the same order on every process, as for MWMS.

            def initial_value_fn():
                with framework_ops.device(device):
                    value = kwargs["initial_value"]
                    if callable(value):
                        value = value()
                    if isinstance(value, trackable_base.CheckpointInitialValue):
                        value = value.wrapped_value
                    value = framework_ops.convert_to_tensor(value, dtype=kwargs.get("dtype", None))
                if not ops.can_broadcast(value.dtype):
                    return value  # e.g. strings: the engine only moves numbers
                return ops.broadcast_initial_value(value, device)
            return initial_value_fn
        return _get_variable_creator_initial_value

    def update_config_proto(original):
        def _update_config_proto(self, config_proto):
            ops = _byteps_ops(self)
            updated = original(self, config_proto)
            return updated if ops is None else ops.update_config_proto(updated)
        return _update_config_proto

    def configure(original):
        def _configure(self, session_config=None, cluster_spec=None, task_type=None, task_id=None):
            ops = _byteps_ops(self)
            if ops is None:
                return original(self, session_config, cluster_spec, task_type, task_id)
            # As MWMS: the cluster names this process's task; the devices stay
            # local (each task is its own BytePS process).
            if cluster_spec:
                ops.adopt_cluster(cluster_spec, task_type, task_id)
            if session_config:
                session_config.CopyFrom(self._update_config_proto(session_config))
            return None
        return _configure

    def make_input_fn_iterator(original):
        def _make_input_fn_iterator(self, input_fn, replication_mode=distribute_lib.InputReplicationMode.PER_WORKER):
            if _byteps_ops(self) is None:
                return original(self, input_fn, replication_mode)
            return input_lib_v1.InputFunctionIterator(input_fn, self._input_workers, [input_context(self)],
                                                      self._container_strategy())
        return _make_input_fn_iterator

    _wrap(extended_cls, "_initialize_strategy", initialize_strategy)
    _wrap(extended_cls, "_make_input_fn_iterator", make_input_fn_iterator)
    _wrap(extended_cls, "_update_config_proto", update_config_proto)
    _wrap(extended_cls, "_configure", configure)
    _wrap(extended_cls, "_get_variable_creator_initial_value", variable_initial_value)
    _wrap(extended_cls, "_get_cross_device_ops", get_cross_device_ops)
    _wrap(extended_cls, "_reduce_to", reduce_to)
    _wrap(extended_cls, "_batch_reduce_to", batch_reduce_to)
    _wrap(extended_cls, "_gather_to_implementation", gather_to)
    _wrap(extended_cls, "_num_replicas_in_sync", num_replicas_in_sync, kind="property")
    _wrap(extended_cls, "_get_replica_id_in_sync_group", replica_id_in_sync_group)
    _wrap(extended_cls, "_get_local_replica_id", local_replica_id)
    _wrap(extended_cls, "_in_multi_worker_mode", in_multi_worker_mode)
    _wrap(extended_cls, "_experimental_distribute_dataset", distribute_dataset)
    _wrap(extended_cls, "_distribute_datasets_from_function", distribute_datasets_from_function)
    _wrap(extended_cls, "_experimental_distribute_values_from_function", distribute_values_from_function)


def input_context(extended):
    """One input pipeline per process, as MWMS: this process is pipeline `rank`."""
    ops = _byteps_ops(extended)
    return distribute_lib.InputContext(num_input_pipelines=ops.num_processes,
                                       input_pipeline_id=ops.process_rank,
                                       num_replicas_in_sync=extended._num_replicas_in_sync)  # pylint: disable=protected-access
