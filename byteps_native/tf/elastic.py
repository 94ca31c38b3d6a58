"""Horovod's ``hvd.elastic`` for TF 2 and Keras (State, commit, run,
TensorFlowKerasState, KerasState and the Keras state callbacks) over
torchrun's restart mechanism, as byteps_native.torch.elastic does for torch:
torchrun restarts every worker when one fails, so commit() also writes the
committed state to disk (rank 0, atomically) and the restarted job resumes
from it. The file lives in $BYTEPS_ELASTIC_DIR (default: the temp dir per
torchrun run id) and is removed when the decorated function returns.
"""
import copy
import functools
import os
import pickle
import tempfile

import keras
import tensorflow as tf

from byteps_native.tf import engine
from byteps_native.tf.api import broadcast_variables
from byteps_native.tf.collectives import broadcast_object


class HorovodInternalError(RuntimeError):
    """A collective failed; elastic training restores its last commit."""


class HostsUpdatedInterrupt(RuntimeError):
    def __init__(self, skip_sync=False):
        super().__init__("hosts updated")
        self.skip_sync = skip_sync


def _commit_path():
    folder = os.environ.get("BYTEPS_ELASTIC_DIR") or os.path.join(
        tempfile.gettempdir(), "byteps_native_elastic", os.environ.get("TORCHELASTIC_RUN_ID", "job"))
    return os.path.join(folder, "commit_tf.pkl")


class State:
    def __init__(self, bcast_object=broadcast_object, get_rank=None):
        self._bcast_object = bcast_object
        self._rank = get_rank or engine.rank
        self._reset_callbacks = []

    def register_reset_callbacks(self, callbacks):
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        self.reset()
        for callback in self._reset_callbacks:
            callback()

    def on_hosts_updated(self, timestamp, update_res):
        pass

    def commit(self):
        """Save in memory and on disk; a restarted job resumes here."""
        self.save()
        if self._rank() == 0:
            path = _commit_path()
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.tmp.{os.getpid()}"
            with open(tmp, "wb") as f:
                pickle.dump(self._persistent(), f)
            os.replace(tmp, path)
        self.check_host_updates()

    def check_host_updates(self):
        """Never raises: under torchrun a membership change restarts the workers."""

    def reset(self):
        pass

    def resume_from_disk(self):
        path = _commit_path()
        if int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") or 0) == 0 or not os.path.exists(path):
            return False
        with open(path, "rb") as f:
            self._load_persistent(pickle.load(f))
        return True


class ObjectState(State):
    def __init__(self, bcast_object=broadcast_object, get_rank=None, **kwargs):
        self._saved_state = kwargs
        self._set_attrs()
        super().__init__(bcast_object=bcast_object, get_rank=get_rank)

    def save(self):
        self._saved_state = {attr: copy.deepcopy(getattr(self, attr)) for attr in self._saved_state}

    def restore(self):
        self._set_attrs()

    def sync(self):
        if self._saved_state:
            self._saved_state = self._bcast_object(self._saved_state)
            self._set_attrs()

    def _set_attrs(self):
        for attr, value in self._saved_state.items():
            setattr(self, attr, copy.deepcopy(value))

    def _persistent(self):
        return {"objects": self._saved_state}

    def _load_persistent(self, saved):
        self._saved_state = saved["objects"]
        self._set_attrs()


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
        super().sync()

    def _persistent(self):
        return {"objects": self._saved_state, "values": self._values}

    def _load_persistent(self, saved):
        super()._load_persistent(saved)
        self._values = saved["values"]
        variables = self._all_variables()
        if len(variables) != len(self._values):
            raise RuntimeError(f"elastic commit on disk has {len(self._values)} variables but the state has "
                               f"{len(variables)}; remove {_commit_path()} if the model changed")
        for v, value in zip(variables, self._values):
            v.assign(value)


class TensorFlowKerasState(TensorFlowState):
    """A Keras model, its optimizer (built first, so its slots exist) and picklable values."""

    def __init__(self, model, optimizer=None, backend=None, **kwargs):
        self.model = model
        self.optimizer = optimizer if optimizer is not None else getattr(model, "optimizer", None)
        if self.optimizer is not None and not self.optimizer.built and model.built:
            self.optimizer.build(model.trainable_variables)
        super().__init__(**kwargs)

    def _all_variables(self):
        variables = list(self.model.variables)
        if self.optimizer is not None and self.optimizer.built:
            variables += list(self.optimizer.variables)
        return variables


KerasState = TensorFlowKerasState


class CommitStateCallback(keras.callbacks.Callback):
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


class UpdateBatchStateCallback(keras.callbacks.Callback):
    def __init__(self, state):
        super().__init__()
        self.state = state

    def on_train_batch_end(self, batch, logs=None):
        self.state.batch = batch

    def on_epoch_end(self, epoch, logs=None):
        self.state.batch = 0


class UpdateEpochStateCallback(keras.callbacks.Callback):
    def __init__(self, state):
        super().__init__()
        self.state = state

    def on_epoch_end(self, epoch, logs=None):
        self.state.epoch = epoch + 1


def run(func):
    """Horovod's decorator over torchrun restarts (see byteps_native.torch.elastic.run)."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        engine.init()
        if engine.rank() == 0:
            state.resume_from_disk()
        state.sync()
        try:
            result = func(state, *args, **kwargs)
        except HorovodInternalError:
            state.restore()
            raise
        if engine.rank() == 0 and os.path.exists(_commit_path()):
            os.remove(_commit_path())
        return result

    return wrapper


__all__ = ["State", "ObjectState", "TensorFlowState", "TensorFlowKerasState", "KerasState", "CommitStateCallback",
           "UpdateBatchStateCallback", "UpdateEpochStateCallback", "run", "HorovodInternalError",
           "HostsUpdatedInterrupt"]
