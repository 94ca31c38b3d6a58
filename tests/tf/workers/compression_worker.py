"""Compression through the servers from TensorFlow's faces. Usage:
compression_worker.py FACE COMPRESSOR OPTIONS_JSON, the compressor built by
byteps_native.compression.COMPRESSOR(**OPTIONS) (onebit, topk, randomk):

    tape       DistributedGradientTape(tape, compression=...)
    fused      BytePSOps(compression=...).batch_reduce of two gradients, the
               second 1000x smaller (3001 elements): fused into one engine
               tensor, onebit keeps a scale per gradient (both reported)
    optimizer  DistributedOptimizer(keras SGD(learning_rate=1), compression=...):
               the variable is reset to zero before each step, so it ends
               holding minus the averaged gradient, exactly
    bytepsops  BytePSOps(compression=...).reduce(MEAN, ...) on one device
    disagree   ranks pass different compressors (rank 1 drops the options):
               the error each rank's tape raises

Each step's averaged gradient (or the error) is reported for the NumPy
reference (tests/tf/test_tf_compression.py)."""
import json
import sys

import common

tf = common.setup_tensorflow(logical_devices=1)
import numpy as np  # noqa: E402
from tensorflow.python.distribute import values as value_lib  # noqa: E402

import byteps_native.compression as compression  # noqa: E402
import byteps_native.tf as bps  # noqa: E402

N, STEPS, SMALL = 50000, 3, 3001
FACE, KIND, OPTIONS = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
bps.init()
rank = bps.rank()
compressor = getattr(compression, KIND)(**(OPTIONS if FACE != "disagree" or rank == 0 else {}))


def gradient(step):
    return tf.constant(np.random.default_rng(100 * step + rank).standard_normal(N).astype(np.float32))


w = tf.Variable(tf.zeros([N]))
grads = []
if FACE in ("tape", "disagree"):
    for step in range(STEPS):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(w * gradient(step))
        tape = bps.DistributedGradientTape(tape, compression=compressor)
        try:
            (grad,) = tape.gradient(loss, [w])
        except Exception as e:  # pylint: disable=broad-except
            common.write_result(rank, {"error": str(e)})
            sys.exit(0)
        grads.append(grad.numpy().tolist())
elif FACE == "optimizer":
    opt = bps.DistributedOptimizer(tf.keras.optimizers.SGD(learning_rate=1.0), compression=compressor)
    for step in range(STEPS):
        w.assign(tf.zeros([N]))
        opt.apply_gradients([(gradient(step), w)])
        grads.append((-w).numpy().tolist())
elif FACE in ("bytepsops", "fused"):
    device = "/job:localhost/replica:0/task:0/device:CPU:0"
    ops = bps.BytePSOps(devices=[device], compression=compressor)

    def local(reduced):
        return (reduced.values[0] if isinstance(reduced, value_lib.DistributedValues) else reduced).numpy().tolist()
    for step in range(STEPS):
        with tf.device(device):
            value = value_lib.PerReplica([tf.identity(gradient(step))])
        if FACE == "bytepsops":
            grads.append(local(ops.reduce(tf.distribute.ReduceOp.MEAN, value, destinations=value)))
            continue
        small = np.random.default_rng(100 * step + rank + 7).standard_normal(SMALL).astype(np.float32) * 1e-3
        with tf.device(device):
            second = value_lib.PerReplica([tf.constant(small)])
        reduced = ops.batch_reduce(tf.distribute.ReduceOp.MEAN, [(value, value), (second, second)])
        grads.append([local(r) for r in reduced])
common.write_result(rank, {"grads": grads, "spec": compressor.engine_spec, "error": None})
