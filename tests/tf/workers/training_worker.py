"""Training under MirroredStrategy(BytePSOps), written as the TensorFlow
tutorials write it for MultiWorkerMirroredStrategy (the whole dataset, the
global batch; the strategy shards and rebatches), compared with
single-process training on the global batch.

argv[1]: "fit" (Keras model.fit with a checkpoint callback, then SavedModel
export), "loop" (custom loop under tf.function) or "sparse" (custom loop on a
model with an Embedding: IndexedSlices gradients). argv[2]: logical CPU
devices per process.
"""
import os
import sys

import common

tf = common.setup_tensorflow(logical_devices=int(sys.argv[2]))
import keras  # noqa: E402
import numpy as np  # noqa: E402

import byteps_native.tf as bps  # noqa: E402

MODE = sys.argv[1]
GLOBAL_BATCH, STEPS, LR = 32, 6, 0.2
strategy = tf.distribute.MirroredStrategy(cross_device_ops=bps.BytePSOps())
rank, size = bps.rank(), bps.size()

x, y = common.digits(GLOBAL_BATCH * STEPS)
if MODE == "sparse":
    x = (x * 4).astype(np.int32)  # 64 tokens in [0, 4]: an Embedding input


def make_model():
    keras.utils.set_random_seed(1234)  # identical initial weights on every process
    if MODE == "sparse":
        return keras.Sequential([keras.Input((64,), dtype="int32"), keras.layers.Embedding(5, 4),
                                 keras.layers.Flatten(), keras.layers.Dense(10)])
    return keras.Sequential([keras.Input((64,)), keras.layers.Dense(32, activation="relu"),
                             keras.layers.Dense(10)])


def make_optimizer():
    return keras.optimizers.SGD(LR, momentum=0.5)


loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

# Reference: one process, no strategy, whole global batch per step.
reference = make_model()
initial = reference.get_weights()
reference_losses = []
ref_opt = make_optimizer()
for step in range(STEPS):
    xb, yb = x[step * GLOBAL_BATCH:(step + 1) * GLOBAL_BATCH], y[step * GLOBAL_BATCH:(step + 1) * GLOBAL_BATCH]
    with tf.GradientTape() as tape:
        loss = loss_fn(yb, reference(xb, training=True))
    ref_opt.apply_gradients(zip(tape.gradient(loss, reference.trainable_variables),
                                reference.trainable_variables))
    reference_losses.append(float(loss))

with strategy.scope():
    model = make_model()
    model.set_weights(initial)
    optimizer = make_optimizer()

losses = []
checks = {}
if MODE == "fit":
    with strategy.scope():
        model.compile(optimizer=optimizer, loss=loss_fn, jit_compile=False)
    out_dir = os.path.join(os.environ["RESULT_DIR"], f"rank{rank}")
    checkpoint = os.path.join(out_dir, "epoch{epoch}.weights.h5")
    history = model.fit(x, y, batch_size=GLOBAL_BATCH, epochs=1, shuffle=False, verbose=0,
                        callbacks=[keras.callbacks.ModelCheckpoint(checkpoint, save_weights_only=True)])
    losses = history.history["loss"]
    restored = make_model()
    restored.load_weights(checkpoint.format(epoch=1))
    checks["checkpoint_restores_weights"] = all(
        np.array_equal(a, b) for a, b in zip(restored.get_weights(), model.get_weights()))
    model.export(os.path.join(out_dir, "saved_model"), verbose=False)
    served = tf.saved_model.load(os.path.join(out_dir, "saved_model"))
    probe = x[:5]
    checks["saved_model_serves_same_outputs"] = bool(np.allclose(
        served.serve(tf.constant(probe)).numpy(), model(probe).numpy(), atol=1e-5))
else:
    per_example = keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction=None)
    dataset = strategy.experimental_distribute_dataset(
        tf.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH))

    @tf.function
    def train_step(inputs):
        def step_fn(xb, yb):
            with tf.GradientTape() as tape:
                loss = tf.nn.compute_average_loss(per_example(yb, model(xb, training=True)))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(step_fn, args=inputs), axis=None)

    for batch in dataset:
        losses.append(float(train_step(batch)))

common.write_result(rank, {
    "weights": [w.tolist() for w in model.get_weights()],
    "reference_weights": [w.tolist() for w in reference.get_weights()],
    "initial_weights": [w.tolist() for w in initial],
    "losses": losses,
    "reference_losses": reference_losses,
    "num_replicas_in_sync": strategy.num_replicas_in_sync,
    "checks": checks,
})
