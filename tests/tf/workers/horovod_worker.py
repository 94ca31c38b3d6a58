"""The Horovod-style API, one device per process: topology, push_pull,
broadcast, broadcast_variables, DistributedGradientTape, the op's gradient,
and Keras DistributedOptimizer + BroadcastGlobalVariablesCallback +
MetricAverageCallback compared with single-process training."""

import common

tf = common.setup_tensorflow(logical_devices=1)
import keras  # noqa: E402

import byteps_native.tf as bps  # noqa: E402
import byteps_native.tf.keras as bps_keras  # noqa: E402

bps.init()
rank, size = bps.rank(), bps.size()
out = {"rank": rank, "size": size, "local_rank": bps.local_rank(), "local_size": bps.local_size()}

value = tf.constant([1.0, 2.0, 3.0]) * (rank + 1)
out["push_pull_sum"] = bps.push_pull(value, average=False)
out["push_pull_avg"] = bps.push_pull(value, average=True)
out["push_pull_int64_sum"] = bps.push_pull(tf.constant([rank + 1, 10], tf.int64), average=False)
out["push_pull_graph"] = tf.function(lambda t: bps.push_pull(t, average=False))(value)
out["broadcast"] = bps.broadcast(tf.constant([5.0, 6.0]) + rank * 100, root_rank=1)
out["broadcast_bool"] = tf.cast(bps.broadcast(tf.constant([rank == 0, True]), root_rank=0), tf.int32)

variables = [tf.Variable(tf.fill([2, 2], float(rank))), tf.Variable(tf.constant(rank + 7, tf.int64))]
bps.broadcast_variables(variables, root_rank=0)
out["broadcast_variables"] = [v.numpy() for v in variables]

w = tf.Variable([1.0, 1.0])
with tf.GradientTape() as tape:
    loss = tf.reduce_sum(w * tf.constant([1.0, 2.0]) * (rank + 1))
out["tape_grad"] = bps.DistributedGradientTape(tape).gradient(loss, [w])[0]

x = tf.Variable([1.0, 2.0])
with tf.GradientTape() as tape:  # d/dx sum_over_processes(x * (rank+1)) = sum of seeds
    y = tf.reduce_sum(bps.push_pull(x * (rank + 1), average=False, name="grad_through_op"))
out["op_gradient"] = tape.gradient(y, x)

# Keras: processes start from different weights; the callback makes them rank 0's.
GLOBAL_BATCH, STEPS = 32, 5
xs, ys = common.digits(GLOBAL_BATCH * STEPS)


def make_model(seed):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((64,)), keras.layers.Dense(16, activation="relu"),
                             keras.layers.Dense(10)])


loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
reference = make_model(seed=0)  # rank 0's initial weights
reference.compile(optimizer=keras.optimizers.SGD(0.2), loss=loss_fn, jit_compile=False)
reference.fit(xs, ys, batch_size=GLOBAL_BATCH, epochs=1, shuffle=False, verbose=0)

model = make_model(seed=rank)
model.compile(optimizer=bps_keras.DistributedOptimizer(keras.optimizers.SGD(0.2)), loss=loss_fn,
              jit_compile=False)
xr, yr = common.shard_global_batches(xs, ys, GLOBAL_BATCH, rank, size)
history = model.fit(xr, yr, batch_size=GLOBAL_BATCH // size, epochs=1, shuffle=False,
                    verbose=0, callbacks=[bps_keras.BroadcastGlobalVariablesCallback(0),
                                          bps_keras.MetricAverageCallback()])
out["keras_weights"] = [v.tolist() for v in model.get_weights()]
out["keras_reference_weights"] = [v.tolist() for v in reference.get_weights()]
out["keras_logged_loss"] = history.history["loss"]
out["optimizer_class"] = type(model.optimizer).__name__
common.write_result(rank, out)
