"""Horovod's ``hvd.elastic`` for TF 2 and Keras (TensorFlowState,
TensorFlowKerasState, KerasState and the Keras state callbacks) over
torchrun's restarts; the framework-neutral part (commit file, restart rules,
ObjectState, run) is byteps_native/elastic_state.py."""

import tensorflow as tf

from byteps_native import elastic_state
from byteps_native._runtime.errors import HorovodInternalError  # noqa: F401  (hvd.elastic.HorovodInternalError)
from byteps_native.elastic_state import HostsUpdatedInterrupt  # noqa: F401  (hvd.elastic.HostsUpdatedInterrupt)
from byteps_native.tf import engine
from byteps_native.tf.api import broadcast_variables
from byteps_native.tf.collectives import broadcast_object
from byteps_native.tf.keras_flavor import Callback, build_optimizer, optimizer_variables


class State(elastic_state.State):
    """Horovod's State for TF and Keras (commits pickled)."""

    commit_file = "commit_tf.pkl"

    def __init__(self, bcast_object=None, get_rank=None):
        super().__init__(bcast_object or broadcast_object, get_rank or engine.rank)


class ObjectState(elastic_state.ObjectState, State):
    """Keyword arguments become attributes, saved, restored and broadcast from rank 0."""


class TensorFlowState(ObjectState):
    """Any list of tf.Variables plus picklable values."""

    def __init__(self, variables=None, session=None, **kwargs):
        if session is not None:
            raise NotImplementedError("TensorFlowState(session=...): TF 1 sessions are not supported; use eager TF 2")
        self.variables = list(variables or [])
        self._values = None
        super().__init__(**kwargs)
        self._snapshot()

    def _all_variables(self):
        return self.variables

    def _snapshot(self):
        self._values = [v.numpy() for v in self._all_variables()]

    def save(self):
        self._snapshot()
        super().save()

    def restore(self):
        for v, value in zip(self._all_variables(), self._values):
            v.assign(value)
        super().restore()

    def sync(self):
        variables = self._all_variables()
        if variables:
            broadcast_variables(variables, root_rank=0)
            self._snapshot()  # as Horovod: restore() after sync() returns the synced values
        super().sync()

    def _persistent(self):
        return {"objects": self._saved_state, "values": self._values}

    def _load_persistent(self, saved):
        super()._load_persistent(saved)
        self._values = saved["values"]
        variables = self._all_variables()
        if len(variables) != len(self._values):
            raise RuntimeError(f"elastic commit on disk has {len(self._values)} variables but the state has "
                               f"{len(variables)}; remove {elastic_state.commit_path(self.commit_file)} if the model changed")
        for v, value in zip(variables, self._values):
            v.assign(value)


class TensorFlowKerasState(TensorFlowState):
    """A Keras model, its optimizer (built first, so its slots exist) and picklable values."""

    def __init__(self, model, optimizer=None, backend=None, **kwargs):
        self.model = model
        self.optimizer = optimizer if optimizer is not None else getattr(model, "optimizer", None)
        if self.optimizer is not None and model.built:
            build_optimizer(self.optimizer, model.trainable_variables)
        super().__init__(**kwargs)

    def _all_variables(self):
        variables = list(self.model.variables)
        if self.optimizer is not None:
            variables += optimizer_variables(self.optimizer)
        return variables


KerasState = TensorFlowKerasState


class CommitStateCallback(Callback):
    """Commit every `batches_per_commit` batches (and at each epoch end)."""

    def __init__(self, state, batches_per_commit=1):
        super().__init__()
        self.state = state
        self.batches_per_commit = batches_per_commit
        self._batches = 0

    def on_train_batch_end(self, batch, logs=None):
        self._batches += 1
        if self._batches % self.batches_per_commit == 0:
            self.state.commit()

    def on_epoch_end(self, epoch, logs=None):
        self.state.commit()


class UpdateBatchStateCallback(Callback):
    def __init__(self, state):
        super().__init__()
        self.state = state

    def on_train_batch_end(self, batch, logs=None):
        self.state.batch = batch

    def on_epoch_end(self, epoch, logs=None):
        self.state.batch = 0


class UpdateEpochStateCallback(Callback):
    def __init__(self, state):
        super().__init__()
        self.state = state

    def on_epoch_end(self, epoch, logs=None):
        self.state.epoch = epoch + 1


run = elastic_state.make_run(engine.init, engine.rank, HorovodInternalError)


__all__ = ["State", "ObjectState", "TensorFlowState", "TensorFlowKerasState", "KerasState", "CommitStateCallback",
           "UpdateBatchStateCallback", "UpdateEpochStateCallback", "run", "HorovodInternalError",
           "HostsUpdatedInterrupt"]
