"""Horovod's TF join() with uneven data, 2 ranks under torchrun: rank r runs
2 + 2r steps, then joins; the joined rank stands in with zeros for the steps
the other still runs, eagerly and inside tf.function. Each case reports 'ok'
or its error."""
import traceback

import numpy as np
import tensorflow as tf

import byteps_native.tf as hvd
from harness import report

hvd.init()
r, n = hvd.rank(), hvd.size()
cases = {}


def case(fn):
    try:
        fn()
        cases[fn.__name__] = "ok"
    except Exception:  # reported; the test asserts every case
        cases[fn.__name__] = traceback.format_exc(limit=6)
    return fn


def steps(rank):
    return 2 + 2 * rank


def mine(step):
    return np.full([3, 4], 10.0 * (r + 1) + step, np.float32)


def expected_sum(step):
    """The ranks that still run `step` contribute their value; joined ones zeros."""
    return sum(np.full([3, 4], 10.0 * (k + 1) + step, np.float32) for k in range(n) if step < steps(k))


@case
def eager_allreduce_then_join():
    for step in range(steps(r)):
        out = hvd.allreduce(tf.constant(mine(step)), op=hvd.Sum)
        np.testing.assert_array_equal(out.numpy(), expected_sum(step), err_msg=f"step {step}")
    assert hvd.join() == n - 1  # the rank with the most steps joins last


@case
def function_steps_then_join():
    variable = tf.Variable(tf.zeros([3, 4]))

    @tf.function
    def train_step(value):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(variable * value)
        grad = hvd.DistributedGradientTape(tape, op=hvd.Sum).gradient(loss, [variable])[0]
        broadcast = hvd.broadcast(value, root_rank=n - 1)  # root n - 1 runs every step
        return grad, hvd.grouped_allreduce([value, 2 * value], op=hvd.Sum), broadcast

    for step in range(steps(r)):
        grad, (once, twice), broadcast = train_step(tf.constant(mine(step)))
        np.testing.assert_array_equal(grad.numpy(), expected_sum(step), err_msg=f"step {step}")
        np.testing.assert_array_equal(once.numpy(), expected_sum(step))
        np.testing.assert_array_equal(twice.numpy(), 2 * expected_sum(step))
        np.testing.assert_array_equal(broadcast.numpy(), np.full([3, 4], 10.0 * n + step, np.float32))
    assert hvd.join() == n - 1


@case
def next_epoch_everyone_again():
    """After a join every rank trains again; this time rank 0 joins last."""
    out = hvd.allreduce(tf.constant(mine(0)), op=hvd.Sum)
    np.testing.assert_array_equal(out.numpy(), expected_sum(0))
    if r == 0:
        extra = hvd.allreduce(tf.constant(mine(7)), op=hvd.Sum)
        np.testing.assert_array_equal(extra.numpy(), mine(7))
    assert hvd.join() == 0


report({"rank": r, "cases": cases})
