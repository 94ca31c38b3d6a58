"""Collectives that the processes of a MirroredStrategy(BytePSOps) job do not
agree on, one scenario after another in one job (each with its own engine
names, taken from the destination variables), on 1 CPU device per process:

* shape:   strategy.extended.reduce_to of [3] on rank 0 and [4] on rank 1;
* variable_shape: a variable of shape [3] on rank 0 and [4] on rank 1;
* timeout: rank 0 reduces, rank 1 batch-reduces (a collective only some
  processes call), per-call CommunicationOptions(timeout_seconds=CALL);
* uneven:  a tf.function step with ReplicaContext.all_reduce, 3 steps on
  rank 0 and 2 on rank 1, which then reduces a result (the constructor's
  CommunicationOptions(timeout_seconds=DEFAULT) applies);
* evaluate: Keras model.evaluate on rank 0 only while rank 1 goes on with
  model.fit.

Each scenario records the error class, message and seconds to fail.
"""
import sys
import time

import common

tf = common.setup_tensorflow(logical_devices=1)
import keras  # noqa: E402
import numpy as np  # noqa: E402

import byteps_native.tf as bps  # noqa: E402

DEFAULT_TIMEOUT, CALL_TIMEOUT = float(sys.argv[1]), float(sys.argv[2])
SUM = tf.distribute.ReduceOp.SUM
strategy = tf.distribute.MirroredStrategy(cross_device_ops=bps.BytePSOps(
    communication_options=tf.distribute.experimental.CommunicationOptions(timeout_seconds=DEFAULT_TIMEOUT)))
rank = bps.rank()
outcome = {"rank": rank}


def attempt(scenario, fn):
    started = time.monotonic()
    try:
        fn()
        outcome[scenario] = {"error": None}
    except tf.errors.OpError as err:
        outcome[scenario] = {"error": type(err).__name__, "message": err.message}
    outcome[scenario]["seconds"] = time.monotonic() - started


def destination(name, shape):
    with strategy.scope():
        return tf.Variable(tf.zeros(shape), name=name)


# shape: the same collective with different shapes (the destination only names
# it: a variable of different shapes would already disagree at creation, where
# its initial value is broadcast from rank 0)
shape_dest = destination("shape_check", [3])
attempt("shape", lambda: strategy.extended.reduce_to(SUM, tf.ones([3 + rank]), shape_dest))

# variable_shape: a variable created with different shapes (its initial value
# is broadcast from rank 0, as MWMS does)
attempt("variable_shape", lambda: destination("differs_at_creation", [3 + rank]))

# timeout: different collectives, per-call timeout
call_options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=CALL_TIMEOUT)
only_rank0 = destination("only_rank0", [2])
only_rank1 = destination("only_rank1", [2])
if rank == 0:
    attempt("timeout", lambda: strategy.extended.reduce_to(SUM, tf.ones([2]), only_rank0, options=call_options))
else:
    attempt("timeout", lambda: strategy.extended.batch_reduce_to(
        SUM, [(tf.ones([2]), only_rank1), (tf.ones([2]), only_rank1)], options=call_options))

# uneven: rank 0 runs one step more
step_value = destination("uneven_step", [2])
final = destination("uneven_final", [2])


@tf.function
def step():
    def replica_fn():
        ctx = tf.distribute.get_replica_context()
        return ctx.all_reduce(SUM, step_value + 1.0)
    return strategy.run(replica_fn)


def uneven():
    for _ in range(3 if rank == 0 else 2):
        step()
    strategy.extended.reduce_to(SUM, tf.ones([2]), final)


attempt("uneven", uneven)

# evaluate: Keras evaluate on rank 0 only
x = np.random.RandomState(0).rand(64, 4).astype(np.float32)
y = np.random.RandomState(1).randint(0, 3, 64).astype(np.int32)
with strategy.scope():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    model.compile(optimizer=keras.optimizers.SGD(0.1), jit_compile=False,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
if rank == 0:
    attempt("evaluate", lambda: model.evaluate(x, y, batch_size=16, verbose=0))
else:
    attempt("evaluate", lambda: model.fit(x, y, batch_size=16, epochs=1, verbose=0))

common.write_result(rank, outcome)
