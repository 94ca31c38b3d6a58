"""Keras callbacks for Horovod-style (one device per process) training."""
import keras
import tensorflow as tf

from byteps_native.tf import api, engine


class BroadcastGlobalVariablesCallback(keras.callbacks.Callback):
    """Start every process from `root_rank`'s model and optimizer state.

    Keras 3 builds the model and optimizer before ``on_train_begin``, so the
    broadcast happens before the first step; a model still unbuilt then is
    broadcast after its first batch instead.
    """

    def __init__(self, root_rank=0):
        super().__init__()
        self.root_rank = root_rank
        self._done = False

    def _broadcast(self):
        variables = list(self.model.variables)
        optimizer = getattr(self.model, "optimizer", None)
        if optimizer is not None and getattr(optimizer, "built", False):
            variables += list(optimizer.variables)
        if variables:
            api.broadcast_variables(variables, root_rank=self.root_rank)
            self._done = True

    def on_train_begin(self, logs=None):
        if self.model.built:
            self._broadcast()

    def on_train_batch_end(self, batch, logs=None):
        if not self._done:
            self._broadcast()


class MetricAverageCallback(keras.callbacks.Callback):
    """Replace each epoch's logged metrics by their mean over processes.

    Put it before callbacks that read the logs (checkpointing, early stopping)
    so that they see the same values on every process.
    """

    def _average(self, logs, where):
        if not logs:
            return
        for key in sorted(logs):  # same order on every process
            value = logs[key]
            try:
                number = float(value)
            except (TypeError, ValueError):
                continue
            averaged = api.push_pull(tf.constant(number, tf.float64), average=True,
                                     name=f"bps.tf.keras.metric.{where}/{key}")
            logs[key] = float(averaged.numpy())

    def on_epoch_end(self, epoch, logs=None):
        if engine.size() > 1:
            self._average(logs, "epoch")
