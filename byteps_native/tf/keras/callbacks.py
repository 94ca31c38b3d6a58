"""Keras callbacks for Horovod-style (one device per process) training,
for Keras 3 and Keras 2 (callback_base.py says which base class).

`device=` is accepted everywhere for Horovod compatibility: the reduction op
runs on the CPU whatever it says.
"""
import tensorflow as tf

from byteps_native.tf import api, engine
from byteps_native.tf.keras.callback_base import Callback, ModelCheckpoint
from byteps_native.tf.keras.flavor import optimizer_variables


class BroadcastGlobalVariablesCallback(Callback):
    """Start every process from `root_rank`'s model and optimizer state.

    A model already built at ``on_train_begin`` (Keras 3 builds it and its
    optimizer before; Keras 2 a model with known input shapes) is broadcast
    then, with the optimizer's variables that exist (Keras 2 creates its
    slots at the first step, equal on every process then); a model still
    unbuilt is broadcast after its first batch instead (Horovod's moment).
    `local_variables` / register_local_var(): variables left as they are.
    """

    def __init__(self, root_rank=0, device="", local_variables=None):
        super().__init__()
        self.root_rank = root_rank
        self.device = device
        self.local_variables = {id(v): v for v in (local_variables or [])}
        self._done = False

    def register_local_var(self, var):
        self.local_variables[id(var)] = var

    def _broadcast(self):
        variables = list(self.model.variables)
        optimizer = getattr(self.model, "optimizer", None)
        if optimizer is not None:
            variables += optimizer_variables(optimizer)
        variables = [v for v in variables if id(v) not in self.local_variables]
        if variables:
            api.broadcast_variables(variables, root_rank=self.root_rank)
            self._done = True

    def on_train_begin(self, logs=None):
        if self.model.built:
            self._broadcast()

    def on_train_batch_end(self, batch, logs=None):
        if not self._done:
            self._broadcast()


class MetricAverageCallback(Callback):
    """Replace each epoch's logged metrics by their mean over processes.

    Put it before callbacks that read the logs (checkpointing, early stopping)
    so that they see the same values on every process.
    """

    def __init__(self, device=""):
        super().__init__()
        self.device = device

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


def _get_lr(optimizer):
    value = optimizer.learning_rate
    return float(value.numpy() if hasattr(value, "numpy") else value)


def _set_lr(optimizer, value):
    optimizer.learning_rate = value  # Keras 3 and 2 assign into their learning-rate variable


class LearningRateScheduleCallback(Callback):
    """Horovod's schedule: lr = initial_lr * multiplier(epoch) between
    start_epoch and end_epoch, at epoch starts (staircase) or every batch.

    momentum_correction scales SGD's momentum by new_lr/old_lr for the step in
    which the rate changes, as Horovod does, where the momentum is a variable
    the compiled step reads; a plain-float momentum (Keras 3's SGD) is baked
    into the compiled step, so there it is left alone."""

    def __init__(self, initial_lr, multiplier, start_epoch=0, end_epoch=None, staircase=True,
                 momentum_correction=True, steps_per_epoch=None):
        super().__init__()
        if initial_lr is None:
            raise ValueError("Parameter `initial_lr` is required")
        self.initial_lr = initial_lr
        self.start_epoch = start_epoch
        self.end_epoch = end_epoch
        self.staircase = staircase
        self.momentum_correction = momentum_correction
        self.steps_per_epoch = steps_per_epoch
        self.current_epoch = None
        self.restore_momentum = None
        self.multiplier = multiplier if callable(multiplier) else (lambda epoch: multiplier ** (epoch - start_epoch))

    def _autodetect_steps_per_epoch(self):
        if self.params.get("steps"):
            return self.params["steps"]
        raise ValueError(f"Could not autodetect the number of steps per epoch; pass steps_per_epoch= to "
                         f"{type(self).__name__}()")

    def _adjust_learning_rate(self, epoch):
        optimizer = self.model.optimizer
        old_lr = _get_lr(optimizer)
        new_lr = self.initial_lr * self.multiplier(epoch)
        _set_lr(optimizer, new_lr)
        momentum = getattr(optimizer, "momentum", None)
        if self.momentum_correction and isinstance(momentum, tf.Variable) and old_lr > 0:
            self.restore_momentum = float(momentum.numpy())
            momentum.assign(self.restore_momentum * new_lr / old_lr)

    def _restore_momentum_if_needed(self):
        if self.restore_momentum is not None:
            self.model.optimizer.momentum.assign(self.restore_momentum)
            self.restore_momentum = None

    def on_train_begin(self, logs=None):
        if not self.staircase and not self.steps_per_epoch:
            self.steps_per_epoch = self._autodetect_steps_per_epoch()

    def on_epoch_begin(self, epoch, logs=None):
        self.current_epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        if self.current_epoch < self.start_epoch or (self.end_epoch is not None and
                                                     self.current_epoch >= self.end_epoch):
            return
        if self.staircase and batch == 0:
            self._adjust_learning_rate(self.current_epoch)
        elif not self.staircase:
            self._adjust_learning_rate(self.current_epoch + float(batch) / self.steps_per_epoch)

    def on_train_batch_end(self, batch, logs=None):
        self._restore_momentum_if_needed()

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["lr"] = _get_lr(self.model.optimizer)


class LearningRateWarmupCallback(LearningRateScheduleCallback):
    """Horovod's gradual warmup (Goyal et al.): from initial_lr/size() to
    initial_lr over warmup_epochs, adjusted every batch."""

    def __init__(self, initial_lr, warmup_epochs=5, momentum_correction=True, steps_per_epoch=None, verbose=0):
        def multiplier(epoch):
            epoch += 1.0 / self.steps_per_epoch  # round numbers at epoch ends, as Horovod
            size = engine.size()
            return 1.0 / size * (epoch * (size - 1) / warmup_epochs + 1)

        super().__init__(initial_lr, multiplier, start_epoch=0, end_epoch=warmup_epochs, staircase=False,
                         momentum_correction=momentum_correction, steps_per_epoch=steps_per_epoch)
        self.verbose = verbose

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        if epoch == self.end_epoch - 1 and self.verbose > 0 and engine.rank() == 0:
            print(f"\nEpoch {epoch + 1}: finished gradual learning rate warmup to {_get_lr(self.model.optimizer):g}.")


class BestModelCheckpoint(ModelCheckpoint):
    """Horovod's: a ModelCheckpoint that keeps only the best model."""

    def __init__(self, filepath, monitor="val_loss", verbose=0, mode="auto", save_freq="epoch"):
        super().__init__(filepath=filepath, monitor=monitor, verbose=verbose, save_best_only=True,
                         save_weights_only=False, mode=mode, save_freq=save_freq)
