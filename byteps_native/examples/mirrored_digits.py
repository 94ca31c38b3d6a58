"""Keras model.fit on scikit-learn's digits with
tf.distribute.MirroredStrategy(cross_device_ops=byteps_native.tf.BytePSOps()).

Each process is one "machine": its MirroredStrategy mirrors the model over its
local devices (here logical CPU devices), BytePSOps sums gradients over those
devices and then over all processes through the byteps-native engine.

Written as TensorFlow's tutorials write it for MultiWorkerMirroredStrategy:
every process builds the same dataset of the whole training set, batched by
the global batch (per-replica batch x strategy.num_replicas_in_sync), and
strategy.experimental_distribute_dataset shards it over the processes and
splits each global batch over the replicas.

One machine, one process with 2 logical CPU devices:
    bpslaunch --local-workers 1 -- python -m byteps_native.examples.mirrored_digits
Two machines emulated on this host (2 processes x 2 logical CPU devices):
    bpslaunch --machines 2 --local-workers 1 --servers 1 -- python -m byteps_native.examples.mirrored_digits
Real machines: run bpslaunch per machine in BytePS mode (DMLC_ROLE=...), see docs/tf.md.
"""
import argparse

import numpy as np
import tensorflow as tf

from byteps_native.examples.progress import Progress


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--logical-devices", type=int, default=2, help="logical CPU devices per process")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32, help="per replica (global batch = this x replicas)")
    parser.add_argument("--lr", type=float, default=0.05)
    return parser.parse_args()


def configure_devices(count):
    # Must run before TensorFlow creates any op or tensor.
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * count)
    return [d.name for d in tf.config.list_logical_devices("CPU")]


def load_digits_split():
    """The same train/test split on every process."""
    from sklearn.datasets import load_digits
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int32)
    order = np.random.default_rng(0).permutation(len(x))
    x, y = x[order], y[order]
    split = int(0.8 * len(x))
    return (x[:split], y[:split]), (x[split:], y[split:])


def main():
    args = parse_args()
    devices = configure_devices(args.logical_devices)
    import keras

    import byteps_native.tf as bps

    strategy = tf.distribute.MirroredStrategy(devices=devices, cross_device_ops=bps.BytePSOps())
    rank, size = bps.rank(), bps.size()
    (x_train, y_train), (x_test, y_test) = load_digits_split()
    global_batch = args.batch_size * strategy.num_replicas_in_sync

    with strategy.scope():
        model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(128, activation="relu"),
                                  keras.layers.Dense(64, activation="relu"), keras.layers.Dense(10)])
        model.compile(optimizer=keras.optimizers.SGD(args.lr, momentum=0.9),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy"],
                      jit_compile=False)  # XLA would bypass custom cross-device ops (docs/tf.md)
    # Every process starts from rank 0's weights.
    bps.broadcast_variables(model.variables, root_rank=0)

    if rank == 0:
        print(f"{size} process(es) x {len(devices)} devices = {strategy.num_replicas_in_sync} replicas; "
              f"global batch {global_batch}")
    # The whole training set in global batches, shuffled alike on every process
    # (same seed); the strategy gives each process its share of every global
    # batch and each replica global_batch / num_replicas_in_sync rows. The
    # processes agree on the last, partial batch.
    train = (tf.data.Dataset.from_tensor_slices((x_train, y_train))
             .shuffle(len(x_train), seed=0, reshuffle_each_iteration=True)
             .batch(global_batch).prefetch(2))
    train = strategy.experimental_distribute_dataset(train)
    steps = -(-len(x_train) // global_batch)
    progress = Progress(args.epochs, steps, global_batch, enabled=rank == 0)

    class ProgressLines(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.epoch = epoch

        def on_train_batch_end(self, batch, logs=None):
            progress.step(self.epoch, batch, (logs or {}).get("loss"))

    model.fit(train, epochs=args.epochs, verbose=0, callbacks=[ProgressLines()])
    loss, accuracy = model.evaluate(x_test, y_test, verbose=0)
    print(f"rank {rank}: test loss {loss:.4f} accuracy {accuracy:.4f}", flush=True)
    weight_sum = float(sum(np.abs(w).sum() for w in model.get_weights()))
    print(f"rank {rank}: weight checksum {weight_sum:.6f} (identical on every rank)", flush=True)


if __name__ == "__main__":
    main()
