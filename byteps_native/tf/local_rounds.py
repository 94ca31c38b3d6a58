"""The local replicas of a process meeting for one per-replica all-reduce.

Without merge_call, each local replica calls ``CrossDeviceOps._all_reduce``
on its own: on its own thread under MirroredStrategy, one after another on
one thread in TensorFlow's own tests. A ``ReplicaCall`` is one replica's
call; every engine submission it makes goes through the BytepsLocalPushPull
op (local_push_pull_kernel.cc), whose instances of one round -- one per local
replica -- meet inside the process: the last to arrive forms the local result
(the one place the local replicas' values are combined on this path), submits
it to the engine once, and all of them finish with the result. Nothing waits
on a Python or TensorFlow thread for a later replica, so calls made one after
another cannot deadlock:

* in a tf.function the instances are graph nodes that run concurrently (the
  op is exempt from tf.function's program-order chain, see ops.py);
* eagerly, each replica's call runs as a small tf.function on an
  asynchronous executor of its own (``replica_executor``), so the call
  returns at once with tensors that become ready when every replica has
  called.

A replica that never calls leaves the others waiting at most BYTEPS_TIMEOUT
(the engine's own limit for a collective, read through _runtime.config; the
adapter's deadline thread applies it), then every replica that called fails
naming the missing ones.
"""
import threading

from tensorflow.python.eager import executor as executor_lib

from byteps_native.tf import naming
from byteps_native.tf.ops import local_push_pull


class ReplicaCall:
    """One local replica's call: `replica` of `replicas`, its rounds named
    after `label` (which every replica computes alike, naming.replica_call)."""

    def __init__(self, label, replica, replicas, timeout_seconds=0):
        self.label = label
        self.replica = replica
        self.replicas = replicas
        self.timeout_seconds = timeout_seconds

    def submitter(self, round_suffix, local_op="sum"):
        """A stand-in for ops.push_pull_list (fusion.push_pull_many's
        `submit`): the buckets go to the engine once for all local replicas,
        combined by `local_op` first."""
        def submit(payloads, names, priorities=None, average=False, timeout_seconds=None, fusion_bytes=0):
            return local_push_pull(payloads, names, f"{self.label}#{round_suffix}", self.replica, self.replicas,
                                   local_op, push=True, average=average, priorities=priorities,
                                   timeout_seconds=timeout_seconds if timeout_seconds is not None
                                   else self.timeout_seconds, fusion_bytes=fusion_bytes)
        return submit

    def concat(self, tensors, round_suffix):
        """Every local replica's `tensors` concatenated along axis 0 in
        replica order (no engine): the local part of a sparse reduction."""
        names = [f"{self.label}#{round_suffix}/{i}" for i in range(len(tensors))]
        return local_push_pull(tensors, names, f"{self.label}#{round_suffix}", self.replica, self.replicas,
                               "concat", push=False, timeout_seconds=self.timeout_seconds)

    @staticmethod
    def name(base):
        """Engine names of a replica call: the label already makes them unique
        in their graph, and every replica must compute the same ones."""
        return naming.issued(base)


_executors = {}
_executors_lock = threading.Lock()


def replica_executor(replica):
    """The asynchronous eager executor of local replica `replica` (one each,
    kept for the process's life: deleting an executor waits for its pending
    ops). An op that failed on it leaves it in an error state; cleared here
    before the next call, the failure having reached its result tensors."""
    with _executors_lock:
        executor = _executors.get(replica)
        if executor is None:
            executor = _executors[replica] = executor_lib.new_executor(enable_async=True)
    executor.clear_error()
    return executor
