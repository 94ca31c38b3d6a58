"""PartialDistributedOptimizer through model.fit, with whichever Keras
tf.keras is (Keras 3, or Keras 2 under TF_USE_LEGACY_KERAS=1): after one SGD
step (lr 1) the local layer moved by its own gradient / size() (Horovod's
scale_local_gradients), the shared layer by the mean gradient over ranks."""
import numpy as np
import tensorflow as tf

import byteps_native.tf.keras as hvd
from tests.support.results import report

hvd.init()
r, n = hvd.rank(), hvd.size()
x = np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(4, 3) * (r + 1)
y = np.arange(4, dtype=np.float32).reshape(4, 1) - r
local = tf.keras.layers.Dense(2, kernel_initializer=tf.keras.initializers.Constant(0.1 * (r + 1)))
shared = tf.keras.layers.Dense(1, kernel_initializer=tf.keras.initializers.Constant(0.2))
model = tf.keras.Sequential([tf.keras.Input(shape=(3,)), local, shared])

with tf.GradientTape() as tape:
    loss = tf.reduce_mean(tf.square(model(x) - y))
grads = tape.gradient(loss, model.trainable_variables)
before = [v.numpy() for v in model.trainable_variables]
is_local = [any(v is w for w in local.trainable_weights) for v in model.trainable_variables]
expected = [b - (g.numpy() / n if loc else hvd.allreduce(g, name=f"expected.{i}").numpy())
            for i, (b, g, loc) in enumerate(zip(before, grads, is_local))]

opt = hvd.PartialDistributedOptimizer(tf.keras.optimizers.SGD(learning_rate=1.0), local_layers=[local])
model.compile(loss="mse", optimizer=opt)
model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
errors = [float(np.max(np.abs(v.numpy() - e))) for v, e in zip(model.trainable_variables, expected)]
report({"keras": type(opt).__module__.split(".")[0], "errors": errors, "local": is_local})
