"""Horovod's TF join() with uneven data, 2 ranks under torchrun: rank r runs
2 + 2r steps, then joins; the joined rank stands in with zeros for the steps
the other still runs, eagerly, inside tf.function and in a TF 1 session;
join() itself eagerly, inside tf.function and in a session. Gathers and
broadcasts after a join fail on the rank still training (Horovod's rule) and
the job goes on. Each case reports 'ok' or its error."""
import itertools
import time
import traceback

import numpy as np
import tensorflow as tf

import byteps_native.tf as hvd
from tests.support.results import report

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
        return grad, hvd.grouped_allreduce([value, 2 * value], op=hvd.Sum)

    for step in range(steps(r)):
        grad, (once, twice) = train_step(tf.constant(mine(step)))
        np.testing.assert_array_equal(grad.numpy(), expected_sum(step), err_msg=f"step {step}")
        np.testing.assert_array_equal(once.numpy(), expected_sum(step))
        np.testing.assert_array_equal(twice.numpy(), 2 * expected_sum(step))
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


def check_last(last, first_to_join):
    """Horovod's checks on join()'s value: an int32 scalar tensor, never the
    first rank to join, the same on every rank."""
    assert isinstance(last, tf.Tensor) and last.dtype == tf.int32 and last.shape.rank == 0, repr(last)
    value = int(last)
    assert value != first_to_join, f"join() returned {value}, the first rank to join"
    assert hvd.allgather_object(value) == [value] * n, "join() returned different ranks"
    assert hvd.broadcast_object(value, root_rank=n - 1) == value
    return value


@case
def join_inside_function_after_function_steps():
    """Steps in one tf.function, join in another (rank 0: 2 steps, rank 1: 4)."""
    @tf.function
    def train_step(value):
        return hvd.allreduce(value, op=hvd.Sum)

    @tf.function
    def finish():
        return hvd.join()

    for step in range(steps(r)):
        np.testing.assert_array_equal(train_step(tf.constant(mine(step))).numpy(), expected_sum(step))
    assert check_last(finish(), first_to_join=0) == n - 1


@case
def join_at_the_end_of_a_training_function():
    """One tf.function: a loop of uneven length over allreduces, then join()
    (ordered after the loop by automatic control dependencies)."""
    @tf.function
    def train(count):
        total = tf.zeros([3, 4])
        for step in tf.range(count):
            value = tf.fill([3, 4], 10.0 * (r + 1)) + tf.cast(step, tf.float32)
            total += hvd.allreduce(value, op=hvd.Sum)
        return total, hvd.join()

    total, last = train(tf.constant(steps(r)))
    np.testing.assert_array_equal(total.numpy(), sum(expected_sum(step) for step in range(steps(r))))
    assert check_last(last, first_to_join=0) == n - 1


@case
def upstream_join_allreduce():
    """Horovod's test_horovod_join_allreduce (test_tensorflow.py, there on
    GPUs), on the CPU: the first rank to join contributes zeros."""
    rng = np.random.RandomState(1234 + r)
    for dtype, dim, first in itertools.product([tf.int32, tf.int64, tf.float16, tf.float32, tf.float64],
                                               [1, 2, 3], [0, 1]):
        tensor = tf.constant(rng.uniform(-100, 100, [17] * dim).astype(dtype.as_numpy_dtype))
        if r == first:
            last = hvd.join()
        else:
            summed = hvd.allreduce(tensor, op=hvd.Sum)
            difference = float(tf.reduce_max(tf.abs(tf.cast(summed - tensor * (n - 1), tf.float64))))
            assert difference == 0, f"{dtype.name} dim {dim}: allreduce beside a joined rank off by {difference}"
            last = hvd.join()
        check_last(last, first)


def expect_join_error(run, what, joined):
    try:
        run()
    except tf.errors.FailedPreconditionError as e:
        assert f"cannot run while a rank has joined: rank(s) {joined} called join()" in e.message, e.message
        return
    raise AssertionError(f"{what} after a join did not fail")


def gathers_fail_beside_a_joined_rank(first):
    """Rank `first` joins; the other tries each gather and broadcast (each
    fails, naming the cause), then an allreduce (goes on) and joins."""
    if r == first:
        return hvd.join()
    rows = tf.constant(np.full([n, 3], r, np.float32))

    @tf.function
    def gather_in_function(x):
        return hvd.allgather(x)

    @tf.function
    def alltoall_in_function(x):
        return hvd.alltoall(x)

    @tf.function
    def broadcast_in_function(x):
        return hvd.broadcast(x, root_rank=first, name="after_join_in_function")

    variable = tf.Variable(rows)

    @tf.function
    def broadcast_variables_in_function():
        hvd.broadcast_variables([variable], root_rank=first)

    for what, run in [("allgather", lambda: hvd.allgather(rows)),
                      ("named allgather", lambda: hvd.allgather(rows, name="after_join")),
                      ("alltoall", lambda: hvd.alltoall(rows)),
                      ("named alltoall", lambda: hvd.alltoall(rows, name="after_join")),
                      ("allgather_object", lambda: hvd.allgather_object({"rank": r})),
                      ("broadcast", lambda: hvd.broadcast(rows, root_rank=first)),
                      ("named broadcast", lambda: hvd.broadcast(rows, root_rank=1 - first, name="after_join")),
                      ("named broadcast in tf.function", lambda: broadcast_in_function(rows)),
                      ("broadcast_object", lambda: hvd.broadcast_object("x", root_rank=first)),
                      ("broadcast_variables", lambda: hvd.broadcast_variables([variable], root_rank=first)),
                      ("broadcast_variables in tf.function", broadcast_variables_in_function),
                      ("allgather in tf.function", lambda: gather_in_function(rows)),
                      ("alltoall in tf.function", lambda: alltoall_in_function(rows))]:
        expect_join_error(run, what, joined=first)
    np.testing.assert_array_equal(variable.numpy(), rows.numpy())  # not assigned the joined root's zeros
    np.testing.assert_array_equal(hvd.allreduce(rows, op=hvd.Sum).numpy(), rows.numpy())  # the joined: zeros
    return hvd.join()


@case
def gathers_after_join_fail_then_job_goes_on():
    for first in (0, 1):
        check_last(gathers_fail_beside_a_joined_rank(first), first)
    # Everyone trains again: gathers work once every rank has joined.
    np.testing.assert_array_equal(hvd.allgather(tf.constant([r])).numpy(), np.arange(n))
    np.testing.assert_array_equal(hvd.broadcast(tf.constant([r]), root_rank=1, name="after_all_joined").numpy(), [1])


@case
def tf1_session_steps_then_join():
    """TF 1 graph mode: the steps and join() run through a session."""
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        value = tf.compat.v1.placeholder(tf.float32, [3, 4])
        summed = hvd.allreduce(value, op=hvd.Sum)
        gathered = hvd.allgather(value)
        joined = hvd.join()
        if r == 0:  # joins first; the other's gather then fails
            last = session.run(joined)
        else:
            for step in range(3):
                np.testing.assert_array_equal(session.run(summed, {value: mine(step)}), mine(step))
            expect_join_error(lambda: session.run(gathered, {value: mine(0)}), "allgather in a session", joined=0)
            last = session.run(joined)
    assert int(last) == n - 1 and hvd.allgather_object(int(last)) == [n - 1] * n


@case
def bpslaunch_barrier_form():
    """join() without torchrun's store (bpslaunch) is a barrier returning the
    last rank to arrive, an int32 tensor too, eagerly and in a tf.function;
    called directly here, where the store is there. Rank 0 arrives a second late."""
    from byteps_native.tf import join_protocol

    @tf.function
    def in_function():
        return join_protocol._join_as_barrier()

    for form in (join_protocol._join_as_barrier, in_function):
        hvd.barrier()
        if r == 0:
            time.sleep(1.0)
        last = form()
        assert last.dtype == tf.int32 and last.shape.rank == 0 and int(last) == 0, repr(last)


report({"rank": r, "cases": cases})
