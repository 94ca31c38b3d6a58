"""BytePSOps: a tf.distribute.CrossDeviceOps that spans machines.

Each machine runs one process whose ``tf.distribute.MirroredStrategy`` covers
its local devices. BytePSOps sums the local replicas on the host (in one
place, local_rounds.py, whether TensorFlow calls with merge_call or per
replica), sums the result across processes through the byteps-native engine,
and copies the result to every destination device::

    strategy = tf.distribute.MirroredStrategy(cross_device_ops=BytePSOps())

Semantics are those of MultiWorkerMirroredStrategy: SUM is the sum over every
replica of every process, MEAN divides it by (local replicas x processes),
``strategy.num_replicas_in_sync`` is the global replica count (so Keras and
``tf.nn.compute_average_loss`` scale losses correctly), broadcast takes rank 0's
value, gather concatenates the replicas of rank 0, then rank 1, ...; replica
ids are global and every process is one input pipeline (datasets are sharded
and rebatched from the global batch). See mirrored_routing.py for how
constructing BytePSOps adjusts MirroredStrategy, and docs/tf.md for limits:

* Under XLA (``jit_compile=True``) MirroredStrategy on all-GPU devices
  bypasses custom cross-device ops (``MirroredExtended._use_merge_call`` /
  ``_get_cross_device_ops``: its own in-process collectives, local only), and
  the engine op has no XLA kernel: every BytePSOps entry point and that
  bypass raise ``XlaNotSupportedError`` naming ``jit_compile=False`` at trace
  time, on every process, instead of training on local sums.
* IndexedSlices stay sparse, as in MWMS: the indices and values of every
  replica are gathered (concatenated), so a sum may repeat indices.
* Every process must have the same number of local replicas.
* ``_all_reduce`` (the merge_call-free path) with several local replicas:
  each replica calls it on its own; their values meet in the process
  (local_rounds.py), are summed once and go to the engine in one submission.
  Used directly (not through a MirroredStrategy), BytePSOps must be told the
  local devices (``devices=``) to know how many replicas to wait for.
"""
import tensorflow as tf
from tensorflow.python.distribute import collective_util
from tensorflow.python.distribute import cross_device_ops as cross_device_ops_lib
from tensorflow.python.distribute import cross_device_utils
from tensorflow.python.distribute import distribute_utils
from tensorflow.python.distribute import reduce_util
from tensorflow.python.distribute import values as value_lib
from tensorflow.python.eager import context
from tensorflow.python.util import nest

from byteps_native.tf import cluster as cluster_lib
from byteps_native.tf import engine, fusion, local_rounds, mirrored_routing, naming
from byteps_native.tf import ops as ops_lib


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

    communication_options: a ``tf.distribute.experimental.CommunicationOptions``
    whose ``timeout_seconds`` applies to every collective (as MWMS's
    constructor argument of that name); options passed to one call override
    it. A collective that does not complete in time fails with
    ``DeadlineExceededError`` naming the tensors it waited for, on every
    process that called it. Other fields are ignored (BytePS has its own
    fusion and priorities).

    cluster_resolver: as MWMS's argument, a ``tf.distribute.cluster_resolver``
    naming the cluster and this process's task. With a non-empty cluster spec
    the process count and this process's rank come from it (chief first,
    then the workers), so the strategy is built and reports its global
    replica count without any peer running; the engine then starts at the
    first collective and must agree with the spec (cluster.py). Without one,
    TF_CONFIG is read the same way in a process that no BytePS launcher set
    up (no DMLC_ROLE, not torchrun); otherwise (or with an empty spec) the
    engine starts here and its job decides.

    devices: this process's local devices, when the ops are used directly
    rather than through a MirroredStrategy (as TensorFlow's
    ``CollectiveAllReduce(devices=...)``): results of inputs that carry no
    device (tf.function arguments) are mirrored on them, and ``_all_reduce``
    knows how many local replicas call it. A MirroredStrategy adopting the ops
    sets them to its devices.
    """

    # mirrored_routing.py and keras_gather.py act on strategies whose
    # cross-device ops declares this (they sit below this module).
    ROUTES_MIRRORED_STRATEGY = True

    def __init__(self, communication_options=None, cluster_resolver=None, devices=None, compression=None):
        super().__init__()
        # The engine's compressors (Compression.onebit, "topk:ratio=0.01", ...)
        # for every dense reduction (docs/compression.md).
        self._compression = compression
        if communication_options is None:
            communication_options = collective_util.Options()
        if not isinstance(communication_options, collective_util.Options):
            raise ValueError("communication_options must be a tf.distribute.experimental.CommunicationOptions, "
                             f"got {communication_options!r}")
        self._options = communication_options
        if isinstance(devices, str):
            devices = [devices]
        self._strategy_devices = tuple(devices or ())
        self._eager_replica_functions = {}  # the eager per-replica all-reduce's tf.functions
        self._cluster = cluster_lib.ClusterPosition.from_environment(cluster_resolver)
        if self._cluster is None or engine.is_initialized():
            self._start_engine()
        mirrored_routing.install()

    @property
    def _num_between_graph_workers(self):
        # >1 disables the base class's "one local replica: just copy" shortcut,
        # which would skip the other processes.
        return self.num_processes

    @property
    def num_processes(self):
        """Processes in the job: the cluster spec's chief/worker tasks when a
        cluster was given, else the engine's size."""
        return self._cluster.size if self._cluster is not None else engine.size()

    @property
    def process_rank(self):
        """This process's rank (its input pipeline; replica ids start at rank x local replicas)."""
        return self._cluster.rank if self._cluster is not None else engine.rank()

    def _start_engine(self):
        """Starts the engine (idempotent; before every collective, as the engine
        starts late when a cluster was given) and checks it against the cluster."""
        engine.init()
        if self._cluster is not None:
            self._cluster.check_engine(engine.rank(), engine.size())

    def adopt_cluster(self, cluster_spec, task_type, task_id):
        """The cluster of ``strategy.configure(cluster_spec=...)`` (TF1), as a
        resolver given at construction; checked now if the engine runs."""
        from tensorflow.python.distribute import multi_worker_util
        position = cluster_lib.ClusterPosition(multi_worker_util.normalize_cluster_spec(cluster_spec),
                                               task_type, task_id)
        if engine.is_initialized():
            position.check_engine(engine.rank(), engine.size())  # before adopting: a refusal changes nothing
        self._cluster = position

    def update_config_proto(self, config_proto):
        """The session config MWMS would write for this process (cluster.py)."""
        return cluster_lib.update_config_proto(config_proto, self._cluster)

    # -- helpers -------------------------------------------------------------

    def _host(self):
        # The engine op has a CPU kernel; local sums are formed where it runs.
        return "/device:CPU:0"

    def _mirror(self, tensor, destinations, fallback_value, always_wrap=False):
        """Copies of `tensor` on the destination devices; when neither the
        destinations nor the input carry a device (tf.function arguments), on the
        strategy's devices, as MirroredStrategy places them."""
        devices = ()
        for source in (destinations, fallback_value):
            if cross_device_ops_lib.check_destinations(source):
                raw = cross_device_ops_lib.get_devices_from(source, canonicalize_devices=False)
                if raw and all(raw):
                    devices = cross_device_ops_lib.get_devices_from(source, self._canonicalize_devices)
                    break
        if not devices:
            local_values = len(_local_values(fallback_value))
            if not self._strategy_devices and local_values > 1:
                raise ValueError(
                    f"BytePSOps cannot tell where to place the result of {local_values} local values that "
                    f"carry no device (tf.function arguments): construct it as "
                    f"BytePSOps(devices=[...this process's devices...]), as CollectiveAllReduce(devices=...), "
                    f"or use it through MirroredStrategy(devices, cross_device_ops=BytePSOps())")
            devices = self._replica_devices()
        copies = [cross_device_utils.copy_tensor_or_indexed_slices_to_device(tensor, device)
                  for device in devices]
        return distribute_utils.regroup(copies, wrap_class=value_lib.Mirrored, always_wrap=always_wrap)

    def _replica_devices(self):
        """The local devices of the strategy using these ops (bound by
        mirrored_routing), else those given to the constructor: the
        destination when a value carries no device, e.g. a tf.function
        argument."""
        return self._strategy_devices or (self._host(),)

    def bind_devices(self, devices):
        """Called when a MirroredStrategy adopts these ops."""
        self._strategy_devices = tuple(devices)

    def _timeout(self, options):
        """timeout_seconds of this call: the call's options, else the constructor's."""
        merged = self._options.merge(options) if options is not None else self._options
        return merged.timeout_seconds or 0

    def _reduce_pairs(self, reduce_op, value_destination_pairs, label, options=None):
        if reduce_op not in (reduce_util.ReduceOp.SUM, reduce_util.ReduceOp.MEAN):
            raise ValueError(f"BytePSOps supports ReduceOp.SUM and ReduceOp.MEAN, got {reduce_op}")
        replica_counts = {len(_local_values(v)) for v, _ in value_destination_pairs}
        if len(replica_counts) > 1:
            raise ValueError(f"values to reduce together have different numbers of local replicas: "
                             f"{sorted(replica_counts)}")
        replicas = replica_counts.pop() if replica_counts else 1
        self._start_engine()
        if replicas > 1:
            return self._reduce_local_replicas(reduce_op, value_destination_pairs, replicas, options)
        divisor = engine.size() if reduce_op == reduce_util.ReduceOp.MEAN else 1
        label = f"bps.tf.{label}.{reduce_op.value.lower()}"
        dense, sparse = [], []  # (index, value, hint)
        for index, (value, destinations) in enumerate(value_destination_pairs):
            is_sparse = any(isinstance(v, tf.IndexedSlices) for v in _local_values(value))
            (sparse if is_sparse else dense).append((index, value, _hint(destinations, index)))
        results = [None] * len(value_destination_pairs)
        timeout = self._timeout(options)
        with tf.device(self._host()):
            values = [tf.convert_to_tensor(_local_values(value)[0]) for _, value, _ in dense]
            reduced = fusion.push_pull_many(values, label, [h for _, _, h in dense], divisor,
                                            device=self._host(), timeout_seconds=timeout,
                                            compression=self._compression)
            for (index, _, _), r in zip(dense, reduced):
                results[index] = r
            for index, value, hint in sparse:
                results[index] = self._all_gather_indexed_slices(value, divisor, f"{label}.sparse", hint, timeout)
        return [self._mirror(r, d, v) for r, (v, d) in zip(results, value_destination_pairs)]

    def _reduce_local_replicas(self, reduce_op, value_destination_pairs, replicas, options):
        """reduce/batch_reduce (merge_call) with several local replicas: each
        replica's values go through the per-replica path's call
        (_replica_all_reduce), so the calls meet in the process and the
        local values are combined in one place (local_rounds.py), whichever
        path TensorFlow took. All the calls are made here, one after another,
        which that path allows; the result waits for every one of them (in a
        graph an unfetched call would never run and the others would wait
        for it)."""
        hints = [_hint(d, i) for i, (_, d) in enumerate(value_destination_pairs)]
        host = [self._host()] * len(value_destination_pairs)
        # A value that is IndexedSlices on some replica is gathered on all
        # (as _reduce_pairs does), so every replica's call makes the same rounds.
        sparse = [any(isinstance(p, tf.IndexedSlices) for p in _local_values(v)) for v, _ in value_destination_pairs]
        calls = []
        for replica in range(replicas):
            values = [_dense_as_slices(p) if is_sparse and not isinstance(p, tf.IndexedSlices) else p
                      for p, is_sparse in zip((_local_values(v)[replica] for v, _ in value_destination_pairs),
                                              sparse)]
            if context.executing_eagerly():
                calls.append(self._eager_replica_all_reduce(reduce_op, values, replica, replicas, host, options,
                                                            hints=hints))
            else:
                calls.append(self._replica_all_reduce(reduce_op, values, replica, replicas, host, options,
                                                      hints=hints))
        if not context.executing_eagerly():
            others = nest.flatten(calls[1:], expand_composites=True)
            with tf.device(self._host()), tf.control_dependencies(others):
                calls[0] = [nest.map_structure(tf.identity, r, expand_composites=True) for r in calls[0]]
        return [self._mirror(r, d, v) for r, (v, d) in zip(calls[0], value_destination_pairs)]

    def _all_gather_indexed_slices(self, value, divisor, label, hint, timeout, call=None):
        """The sum of IndexedSlices as MWMS forms it: every replica's indices and
        values concatenated (rank 0's replicas first), values / divisor for MEAN.
        call: one local replica's per-replica call (local_rounds.ReplicaCall),
        whose `value` is that replica's alone: the local replicas' rows are
        concatenated in the process first, and the gather goes to the engine
        once for all of them."""
        parts = [v if isinstance(v, tf.IndexedSlices) else _dense_as_slices(v) for v in _local_values(value)]
        if any(p.dense_shape is None for p in parts):
            raise ValueError("BytePSOps cannot reduce IndexedSlices without dense_shape")
        indices = tf.concat([tf.cast(p.indices, tf.int64) for p in parts], 0)
        values = tf.concat([p.values for p in parts], 0)
        if call is not None:
            indices, values = call.concat([indices, values], f"{hint}.local_rows")
        gathered_indices, gathered_values = self._all_gather_rows([indices, values], label, hint, timeout=timeout,
                                                                  call=call)
        if divisor != 1:
            gathered_values = fusion.divide(gathered_values, divisor)
        return tf.IndexedSlices(gathered_values, tf.cast(gathered_indices, parts[0].indices.dtype),
                                parts[0].dense_shape)

    def _all_gather_rows(self, tensors, label, hint, original_shape=None, axis=0, timeout=0, call=None):
        """Concatenate along axis 0 every process's `tensors` (which share their
        leading length), rank 0 first. Two engine calls: every process's length,
        rank, dtype and dimensions, then each process's rows placed at its offset
        in zeros, summed. Processes whose tensors disagree except along the
        gather axis all fail after the first call, naming the shapes, instead of
        waiting for tensors the others never send. `original_shape`/`axis`:
        the caller's shape and axis, for that message. call: a per-replica
        call, whose every local replica passes the same `tensors`: each
        engine call is made once for all of them."""
        self._start_engine()
        pushes = {} if call is None else {
            "shapes": dict(submit=call.submitter(f"{hint}.shapes", "first"), name=call.name),
            "rows": dict(submit=call.submitter(f"{hint}.rows", "first"), name=call.name)}
        size, rank = engine.size(), engine.rank()
        first = tensors[0]
        if first.shape.rank > _MAX_GATHER_RANK:
            raise ValueError(f"BytePSOps gather supports tensors of rank <= {_MAX_GATHER_RANK}")
        shape = tf.shape(first, out_type=tf.int64) if original_shape is None else original_shape
        meta = tf.concat([
            tf.constant([first.shape.rank, first.dtype.as_datatype_enum], tf.int64),
            tf.shape(first, out_type=tf.int64)[:1],
            tf.pad(shape, [[0, _MAX_GATHER_RANK - first.shape.rank]], constant_values=-1)], 0)
        slot = tf.one_hot(rank, size, dtype=tf.int64)[:, None] * meta[None, :]
        (all_meta,) = fusion.push_pull_many([slot], label, [f"{hint}.shapes"], device=self._host(),
                                            timeout_seconds=timeout, **pushes.get("shapes", {}))
        check = _assert_same_shapes(all_meta, axis)
        with tf.control_dependencies([check]):
            lengths = tf.identity(all_meta[:, 2])
        length = lengths[rank]
        offset = tf.reduce_sum(lengths[:rank])
        after = tf.reduce_sum(lengths) - offset - length
        padded, casts = [], []
        for t in tensors:
            casts.append(t.dtype)
            t = tf.cast(t, tf.uint8) if t.dtype == tf.bool else t
            paddings = [[0, 0]] * t.shape.rank
            paddings[0] = [offset, after]
            padded.append(tf.pad(t, tf.cast(paddings, tf.int64)))
        gathered = fusion.push_pull_many(padded, label, [f"{hint}.rows{i}" for i in range(len(padded))],
                                         device=self._host(), timeout_seconds=timeout, **pushes.get("rows", {}))
        return [tf.cast(g, d) if d == tf.bool else g for g, d in zip(gathered, casts)]

    # -- CrossDeviceOps ------------------------------------------------------

    def _refuse_xla(self, what):
        if mirrored_routing.in_xla_context():
            raise mirrored_routing.xla_not_supported(f"BytePSOps.{what}")

    def reduce_implementation(self, reduce_op, per_replica_value, destinations, options):
        self._refuse_xla("reduce")
        return self._reduce_pairs(reduce_op, [(per_replica_value, destinations)], "reduce", options)[0]

    def batch_reduce_implementation(self, reduce_op, value_destination_pairs, options):
        self._refuse_xla("batch_reduce")
        return self._reduce_pairs(reduce_op, list(value_destination_pairs), "batch_reduce", options)

    def broadcast_implementation(self, tensor, destinations):
        """Every process receives rank 0's `tensor` (root's value + zeros, summed)."""
        self._refuse_xla("broadcast")
        result = self._from_rank0(tensor, "bps.tf.broadcast")
        return self._mirror(result, destinations, tensor)  # one device: the tensor itself

    @staticmethod
    def can_broadcast(dtype):
        return dtype == tf.bool or dtype in ops_lib.SUPPORTED_DTYPES

    def broadcast_initial_value(self, value, device):
        """Rank 0's initial value of a variable, on `device` (mirrored_routing)."""
        result = self._from_rank0(value, "bps.tf.initial_value")
        with tf.device(device):
            return tf.identity(result)

    def _from_rank0(self, tensor, label):
        self._start_engine()
        with tf.device(self._host()):
            value = tf.convert_to_tensor(tensor)
            original_dtype = value.dtype
            if original_dtype == tf.bool:
                value = tf.cast(value, tf.uint8)
            contribution = value if engine.rank() == 0 else tf.zeros_like(value)
            (result,) = fusion.push_pull_many([contribution], label, ["value"],
                                              device=self._host(), timeout_seconds=self._timeout(None))
            return tf.cast(result, original_dtype) if original_dtype == tf.bool else result

    def _gather_implementation(self, per_replica_value, destinations, axis, options):
        """Concatenate along `axis` the local replicas of rank 0, then rank 1, ..."""
        self._refuse_xla("gather")
        with tf.device(self._host()):
            parts = [tf.convert_to_tensor(v) for v in _local_values(per_replica_value)]
            local = parts[0] if len(parts) == 1 else tf.concat(parts, axis)
            ndim = local.shape.rank
            if ndim is None:
                raise ValueError("BytePSOps gather needs tensors of known rank")
            if ndim == 0:
                raise ValueError("BytePSOps gather needs tensors of rank >= 1 (gather concatenates)")
            axis = axis % ndim
            moved = local if axis == 0 else tf.experimental.numpy.moveaxis(local, axis, 0)
            (gathered,) = self._all_gather_rows([moved], "bps.tf.gather", f"axis{axis}",
                                                original_shape=tf.shape(local, out_type=tf.int64), axis=axis,
                                                timeout=self._timeout(options))
            if axis != 0:
                gathered = tf.experimental.numpy.moveaxis(gathered, 0, axis)
        return self._mirror(gathered, destinations, per_replica_value)

    def _all_reduce(self, reduce_op, value, replica_id, options):
        """All-reduce in a replica context without merge_call: each local
        replica calls this on its own (its own thread under MirroredStrategy,
        one after another in TensorFlow's cross-device tests). With one local
        replica, a plain reduction. With several, the replicas' calls meet in
        the process (local_rounds.py): the values are summed there once and
        go to the engine in one submission, every replica gets the result,
        and no call waits for a later one. How many replicas to wait for
        comes from the strategy's devices or ``devices=``."""
        self._refuse_xla("_all_reduce")
        if reduce_op not in (reduce_util.ReduceOp.SUM, reduce_util.ReduceOp.MEAN):
            raise ValueError(f"BytePSOps supports ReduceOp.SUM and ReduceOp.MEAN, got {reduce_op}")
        local = len(self._strategy_devices)
        if local == 0 and replica_id != 0:
            raise ValueError(
                f"BytePSOps._all_reduce was called for local replica {replica_id}, but these ops do not know "
                f"this process's devices, so they cannot tell how many local replicas to combine: construct "
                f"them as BytePSOps(devices=[...]), as CollectiveAllReduce(devices=...), or use them through "
                f"MirroredStrategy(devices, cross_device_ops=BytePSOps())")
        flat = nest.flatten(value, expand_composites=False)
        if local <= 1:
            device = flat[0].device if flat and getattr(flat[0], "device", "") else self._host()
            reduced = self._reduce_pairs(reduce_op, [(v, device) for v in flat], "all_reduce", options)
            return nest.pack_sequence_as(value, reduced, expand_composites=False)
        if not 0 <= replica_id < local:
            raise ValueError(f"BytePSOps._all_reduce: replica_id {replica_id} is not one of this process's "
                             f"{local} local replicas")
        self._start_engine()
        devices = [getattr(v, "device", "") or self._replica_devices()[replica_id] for v in flat]
        if context.executing_eagerly():
            reduced = self._eager_replica_all_reduce(reduce_op, flat, replica_id, local, devices, options)
        else:
            reduced = self._replica_all_reduce(reduce_op, flat, replica_id, local, devices, options)
        return nest.pack_sequence_as(value, reduced, expand_composites=False)

    def _eager_replica_all_reduce(self, reduce_op, flat, replica_id, local, devices, options, hints=None):
        """Eagerly, the replica's call runs as a tf.function on the replica's
        own asynchronous executor: it returns at once, with tensors that are
        ready once every local replica has called (local_rounds.py)."""
        key = (reduce_op, replica_id, local, tuple(devices), self._timeout(options),
               tuple(hints) if hints else None)
        function = self._eager_replica_functions.get(key)
        if function is None:
            function = tf.function(lambda values: self._replica_all_reduce(
                reduce_op, values, replica_id, local, devices, options, hints=hints))
            self._eager_replica_functions[key] = function
        with context.executor_scope(local_rounds.replica_executor(replica_id)):
            return function(list(flat))

    def _replica_all_reduce(self, reduce_op, flat, replica_id, local, devices, options, hints=None):
        """Graph part of one replica's call (see _all_reduce): dense values
        through fusion's buckets, summed over the local replicas and the
        processes in one engine submission; IndexedSlices gathered as in
        _all_gather_indexed_slices, every local replica's rows first.
        hints: the values' descriptions in engine names and errors (default
        their positions; reduce passes its variables' names)."""
        hints = hints or [f"t{i}" for i in range(len(flat))]
        # The local replica count is in the names: a process with another
        # count (whose MEAN would divide by another number) then meets no one
        # and fails after BYTEPS_TIMEOUT naming the tensor, never silently.
        label = (f"bps.tf.replica_all_reduce.{reduce_op.value.lower()}.x{local}"
                 f".c{naming.replica_call(replica_id)}")
        call = local_rounds.ReplicaCall(label, replica_id, local, self._timeout(options))
        divisor = local * engine.size() if reduce_op == reduce_util.ReduceOp.MEAN else 1
        results = [None] * len(flat)
        with tf.device(self._host()):
            dense = [(i, tf.convert_to_tensor(v)) for i, v in enumerate(flat) if not isinstance(v, tf.IndexedSlices)]
            reduced = fusion.push_pull_many([t for _, t in dense], label, [hints[i] for i, _ in dense], divisor,
                                            device=self._host(), timeout_seconds=call.timeout_seconds,
                                            compression=self._compression, submit=call.submitter("dense"),
                                            name=call.name)
            for (i, _), r in zip(dense, reduced):
                results[i] = r
            for i, v in enumerate(flat):
                if isinstance(v, tf.IndexedSlices):
                    results[i] = self._all_gather_indexed_slices(v, divisor, f"{label}.sparse", hints[i],
                                                                 call.timeout_seconds, call=call)
        return [cross_device_utils.copy_tensor_or_indexed_slices_to_device(r, d) for r, d in zip(results, devices)]


_MAX_GATHER_RANK = 8


def _assert_same_shapes(all_meta, axis):
    """An op failing with InvalidArgumentError on every process unless every
    process's row of `all_meta` ([rank, dtype, length, dims padded with -1])
    equals rank 0's outside the length and the gather axis."""
    compare = tf.concat([all_meta[:, :2], all_meta[:, 3:3 + axis], all_meta[:, 4 + axis:]], 1)
    differs = tf.reduce_any(tf.not_equal(compare, compare[:1]), axis=0)
    ranks_differ = differs[0]
    dtypes_differ = differs[1]
    dims = tf.concat([tf.range(axis), tf.range(axis + 1, _MAX_GATHER_RANK)], 0)
    first_dim = tf.gather(dims, tf.argmax(tf.cast(differs[2:], tf.int32)))
    reason = tf.where(ranks_differ, tf.constant("Ranks of all input tensors should match"),
                      tf.where(dtypes_differ, tf.constant("dtypes of all input tensors should match"),
                               tf.strings.format("Dimension {} in both shapes must be equal", first_dim)))
    message = tf.strings.format(
        "Shape mismatch across processes in BytePSOps gather along axis {}: {}. Per process "
        "(rank, dtype enum, rows, dims padded with -1): {}", [axis, reason, all_meta], summarize=-1)
    return tf.debugging.Assert(tf.logical_not(tf.reduce_any(differs)), [message])


def _dense_as_slices(tensor):
    tensor = tf.convert_to_tensor(tensor)
    rows = tf.shape(tensor, out_type=tf.int64)[0]
    return tf.IndexedSlices(tensor, tf.range(rows), tf.shape(tensor, out_type=tf.int64))
