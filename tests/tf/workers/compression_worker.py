"""Compression through the servers from TensorFlow: DistributedGradientTape
(compression=Compression.onebit) over several steps, each step's averaged
gradient reported for the NumPy reference (tests/tf/test_tf_compression.py)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

tf = common.setup_tensorflow(logical_devices=1)
import numpy as np  # noqa: E402

import byteps_native.tf as bps  # noqa: E402

N, STEPS = 50000, 3
bps.init()
rank = bps.rank()
w = tf.Variable(tf.zeros([N]))
grads = []
for step in range(STEPS):
    g = tf.constant(np.random.default_rng(100 * step + rank).standard_normal(N).astype(np.float32))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(w * g)
    tape = bps.DistributedGradientTape(tape, compression=bps.Compression.onebit)
    (grad,) = tape.gradient(loss, [w])
    grads.append(grad.numpy().tolist())
common.write_result(rank, {"grads": grads, "compressed_pushes": bps.stats()["compressed_pushes"]
                           if hasattr(bps, "stats") else None})
