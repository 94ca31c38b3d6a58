"""Horovod's and BytePS's TF/Keras API across ranks, started by torchrun (the
TF engine joins through torchrun's store). Each case reports 'ok' or its error."""
import os
import tempfile
import traceback

import numpy as np
import tensorflow as tf
import keras

import byteps_native.tf as hvd
import byteps_native.tf.keras as hk
from tests.support.results import report

hvd.init(lazy=True)
r, n = hvd.rank(), hvd.size()
cases = {}


def case(fn):
    try:
        fn()
        cases[fn.__name__] = "ok"
    except Exception:  # reported; the test asserts every case
        cases[fn.__name__] = traceback.format_exc(limit=4)
    return fn


def value(rank):
    return np.arange(6, dtype=np.float32).reshape(2, 3) + 10 * rank


@case
def joined_torchrun_job():
    assert n == int(os.environ["WORLD_SIZE"]) == 2 and r == int(os.environ["RANK"]), (r, n)


@case
def allreduce_ops():
    every = np.stack([value(k) for k in range(n)])
    np.testing.assert_allclose(hvd.allreduce(value(r)).numpy(), every.mean(0))
    np.testing.assert_allclose(hvd.allreduce(value(r), op=hvd.Sum).numpy(), every.sum(0))
    np.testing.assert_allclose(hvd.allreduce(value(r), average=False).numpy(), every.sum(0))
    np.testing.assert_array_equal(hvd.allreduce(value(r), op=hvd.Max).numpy(), every.max(0))
    np.testing.assert_array_equal(hvd.allreduce(value(r), op=hvd.Min).numpy(), every.min(0))
    np.testing.assert_allclose(hvd.allreduce(value(r), op=hvd.Product).numpy(), every.prod(0))
    np.testing.assert_allclose(hvd.allreduce(value(r), op=hvd.Sum, prescale_factor=2.0,
                                             postscale_factor=0.25).numpy(), every.sum(0) / 2)
    np.testing.assert_allclose(hvd.allreduce(value(r), compression=hvd.Compression.fp16).numpy(),
                               every.mean(0), rtol=1e-3)
    graph = tf.function(lambda t: hvd.allreduce(t, op=hvd.Max))(tf.constant(value(r)))
    np.testing.assert_array_equal(graph.numpy(), every.max(0))
    np.testing.assert_allclose(hvd.push_pull(tf.constant(value(r)), average=False).numpy(), every.sum(0))
    sparse = hvd.allreduce(tf.IndexedSlices(tf.constant([[1.0 + r]]), tf.constant([r]), tf.constant([n, 1])))
    np.testing.assert_allclose(tf.convert_to_tensor(sparse).numpy().ravel(), [(k + 1.0) / n for k in range(n)])


@case
def adasum():
    mine = tf.constant([1.0, 0.0]) if r == 0 else tf.constant([0.0, 1.0])
    np.testing.assert_allclose(hvd.allreduce(mine, op=hvd.Adasum).numpy(), [1.0, 1.0])
    np.testing.assert_allclose(hvd.allreduce(tf.constant([2.0, 4.0]), op=hvd.Adasum).numpy(), [2.0, 4.0])
    a, b = np.random.RandomState(0).randn(20), np.random.RandomState(1).randn(20)
    dot = a @ b
    expected = (1 - dot / (2 * (a @ a))) * a + (1 - dot / (2 * (b @ b))) * b
    np.testing.assert_allclose(hvd.allreduce(tf.constant([a, b][r]), op=hvd.Adasum).numpy(), expected)


@case
def allgather():
    mine = tf.fill([r + 1, 2], float(r))
    expected = np.concatenate([np.full((k + 1, 2), float(k)) for k in range(n)])
    np.testing.assert_array_equal(hvd.allgather(mine).numpy(), expected)
    graph = tf.function(lambda t: hvd.allgather(t), input_signature=[tf.TensorSpec([None, 2], tf.float32)])
    np.testing.assert_array_equal(graph(mine).numpy(), expected)
    np.testing.assert_array_equal(hvd.allgather(tf.constant([r], tf.int64)).numpy(), np.arange(n))
    np.testing.assert_array_equal(hk.allgather(tf.constant([r == 0])).numpy(), [k == 0 for k in range(n)])
    assert hvd.allgather_object({"rank": r}) == [{"rank": k} for k in range(n)]
    assert hvd.broadcast_object({"from": r}, root_rank=1) == {"from": 1}


@case
def alltoall():
    splits = [k + 1 for k in range(n)]
    rows = np.concatenate([np.full((k + 1, 2), 100.0 * r + k, np.float32) for k in range(n)])
    out, received = hvd.alltoall(rows, splits=splits)
    expected = np.concatenate([np.full((r + 1, 2), 100.0 * src + r) for src in range(n)])
    np.testing.assert_array_equal(out.numpy(), expected)
    assert received.numpy().tolist() == [r + 1] * n


@case
def reducescatter():
    t = np.arange(2 * n, dtype=np.float32).reshape(n, 2) * (r + 1)
    out = hvd.reducescatter(t, op=hvd.Sum).numpy()
    np.testing.assert_allclose(out, (np.arange(2 * n).reshape(n, 2) * n * (n + 1) / 2)[r:r + 1])


@case
def flags_and_join():
    assert hvd.nccl_built() == 0 and hvd.cuda_built() is False and hvd.mpi_threads_supported() is False
    assert 0 <= hvd.join() < n
    hvd.barrier()
    assert hvd.util._executing_eagerly()


def keras_model(seed):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="relu"), keras.layers.Dense(2)])


def data(seed):
    rng = np.random.RandomState(seed)
    return rng.randn(32, 4).astype(np.float32), rng.randint(0, 2, 32)


@case
def keras_fit_with_options():
    model = keras_model(seed=r)  # differs until the broadcast callback
    opt = hk.DistributedOptimizer(keras.optimizers.SGD(0.05, momentum=0.9), backward_passes_per_step=2,
                                  average_aggregated_gradients=True, compression=hk.Compression.fp16)
    model.compile(optimizer=opt, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x, y = data(r)
    history = model.fit(x, y, batch_size=8, epochs=3, verbose=0, callbacks=[
        hk.callbacks.BroadcastGlobalVariablesCallback(0, device=""),
        hk.callbacks.MetricAverageCallback(device=""),
        hk.callbacks.LearningRateWarmupCallback(initial_lr=0.05, warmup_epochs=2, verbose=0),
        hk.callbacks.LearningRateScheduleCallback(initial_lr=0.05, multiplier=0.5, start_epoch=2)])
    weights = np.concatenate([w.ravel() for w in model.get_weights()])
    every = hvd.allgather(tf.constant(weights[None])).numpy()
    assert np.array_equal(every[0], every[1]), "ranks disagree after fit"
    assert abs(history.history["lr"][-1] - 0.05 * 0.5 ** 0) < 1e-6, history.history["lr"]  # epoch 2: multiplier**0
    assert history.history["lr"][0] < 0.05  # warmup starts below the target rate
    losses = hvd.allgather(tf.constant([history.history["loss"]])).numpy()
    assert np.array_equal(losses[0], losses[1]), "MetricAverageCallback left ranks with different losses"


@case
def tape_options():
    w = tf.Variable([1.0, 2.0])
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(w * tf.constant([1.0, 2.0]) * (r + 1))
    tape = hvd.DistributedGradientTape(tape, compression=hvd.Compression.fp16, gradient_predivide_factor=2.0,
                                       device_dense="", sparse_as_dense=True)
    (grad,) = tape.gradient(loss, [w])
    np.testing.assert_allclose(grad.numpy(), [1.5, 3.0], rtol=1e-3)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(w * tf.constant([1.0, 2.0]) * (r + 1))
    (grad,) = hvd.DistributedGradientTape(tape, op=hvd.Sum).gradient(loss, [w])
    np.testing.assert_allclose(grad.numpy(), [3.0, 6.0])


@case
def keras_load_model():
    folder = tempfile.mkdtemp()
    model = keras_model(seed=0)
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    model.fit(np.ones((4, 4)), np.ones((4, 2)), verbose=0)
    path = os.path.join(folder, "m.keras")
    model.save(path)
    loaded = hk.load_model(path)
    assert type(loaded.optimizer).__name__ == "Adam"
    assert int(loaded.optimizer.iterations.numpy()) == 1  # restored state kept
    x = np.full((4, 4), float(r))
    loaded.fit(x, np.ones((4, 2)), verbose=0, epochs=1)
    weights = np.concatenate([w.ravel() for w in loaded.get_weights()])
    every = hvd.allgather(tf.constant(weights[None])).numpy()
    assert np.array_equal(every[0], every[1]), "loaded model did not average gradients"


@case
def missing_names():
    try:
        hvd.SyncBatchNormalization
    except AttributeError as e:
        assert "synchronized=True" in str(e)
    else:
        raise AssertionError("expected an AttributeError with advice")


report({"rank": r, "size": n, "cases": cases})
