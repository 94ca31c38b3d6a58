"""Horovod's ``hvd.elastic`` (State, commit, run, TorchState, ElasticSampler)
over torchrun's restart mechanism.

Horovod keeps the surviving processes alive and re-forms the ring; torchrun
instead restarts every worker of the group when one fails
(``--max-restarts``). So ``commit()`` also writes the committed state to disk
(rank 0, atomically), and a restarted worker's State starts from it: the
training function resumes from the last commit, as under Horovod. Membership
changes without a failure (Horovod's host discovery) are torchrun's
``--nnodes=MIN:MAX`` business; ``check_host_updates()`` never interrupts.

The commit file lives in $BYTEPS_ELASTIC_DIR (default: the temp dir, per
torchrun run id); it is removed when the decorated function returns.
"""
import copy
import functools
import os
import tempfile

import torch

from byteps_native.torch import ops
from byteps_native.torch.collectives import HorovodInternalError
from byteps_native.torch.extension import _c10d
from byteps_native.torch.functions import broadcast_object, broadcast_optimizer_state, broadcast_parameters
from byteps_native.torch.ops import init, shutdown  # noqa: F401  (hvd.elastic.init, as in Horovod)


class HostsUpdatedInterrupt(RuntimeError):
    """Horovod raises it when hosts join or leave; torchrun restarts instead."""

    def __init__(self, skip_sync=False):
        super().__init__("hosts updated")
        self.skip_sync = skip_sync


def _commit_path():
    folder = os.environ.get("BYTEPS_ELASTIC_DIR") or os.path.join(
        tempfile.gettempdir(), "byteps_native_elastic", os.environ.get("TORCHELASTIC_RUN_ID", "job"))
    return os.path.join(folder, "commit.pt")


def _restart_count():
    return int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") or 0)


class State:
    """Horovod's State: save/restore/sync plus reset callbacks."""

    def __init__(self, bcast_object=broadcast_object, get_rank=None):
        self._bcast_object = bcast_object
        self._rank = get_rank or ops.rank
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
        """Save the state in memory and on disk; a restarted job resumes here."""
        self.save()
        if self._rank() == 0:
            path = _commit_path()
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.tmp.{os.getpid()}"
            torch.save(self._persistent(), tmp)
            os.replace(tmp, path)
        self.check_host_updates()

    def check_host_updates(self):
        """Never raises: under torchrun a membership change restarts the workers."""

    def save(self):
        raise NotImplementedError()

    def restore(self):
        raise NotImplementedError()

    def sync(self):
        raise NotImplementedError()

    def reset(self):
        pass

    def _persistent(self):
        raise NotImplementedError()

    def _load_persistent(self, saved):
        raise NotImplementedError()

    def resume_from_disk(self):
        """After a torchrun restart: load the last commit (rank 0; sync() spreads it). True if one existed."""
        path = _commit_path()
        if _restart_count() == 0 or not os.path.exists(path):
            return False
        self._load_persistent(torch.load(path, weights_only=False))
        self.save()
        return True


class ObjectState(State):
    """Keyword arguments become attributes, saved, restored and broadcast from rank 0."""

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


class TorchState(ObjectState):
    """State of a model, an optimizer and any picklable values (epoch, batch, ...)."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        self.model = model
        self.optimizer = optimizer
        self._model_snapshot = None
        self._optimizer_snapshot = None
        super().__init__(**kwargs)
        self._snapshot()

    def _snapshot(self):
        if self.model is not None:
            self._model_snapshot = copy.deepcopy(self.model.state_dict())
        if self.optimizer is not None:
            self._optimizer_snapshot = copy.deepcopy(self.optimizer.state_dict())

    def save(self):
        self._snapshot()
        super().save()

    def restore(self):
        if self.model is not None:
            self.model.load_state_dict(self._model_snapshot)
        if self.optimizer is not None:
            self.optimizer.load_state_dict(self._optimizer_snapshot)
        super().restore()

    def sync(self):
        if self.model is not None:
            broadcast_parameters(self.model.state_dict(), root_rank=0, prefix="elastic.model")
        if self.optimizer is not None:
            broadcast_optimizer_state(self.optimizer, root_rank=0)
        super().sync()

    def _persistent(self):
        return {"objects": self._saved_state, "model": self._model_snapshot, "optimizer": self._optimizer_snapshot}

    def _load_persistent(self, saved):
        super()._load_persistent(saved)
        self._model_snapshot, self._optimizer_snapshot = saved["model"], saved["optimizer"]
        if self.model is not None and saved["model"] is not None:
            self.model.load_state_dict(saved["model"])
        if self.optimizer is not None and saved["optimizer"] is not None:
            self.optimizer.load_state_dict(saved["optimizer"])


class ElasticSampler(torch.utils.data.Sampler):
    """Horovod's ElasticSampler: shards the indices not yet processed this
    epoch over the current ranks; record_batch() marks progress, and its
    state_dict() belongs in the elastic State."""

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_num = 0
        self.reset()

    def set_epoch(self, epoch):
        self.epoch = epoch
        self.processed_num = 0
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        self.processed_num += batch_size * ops.size()

    def record_indices(self, indices):
        self.processed_num += len(indices) * ops.size()

    def load_state_dict(self, state_dict):
        self.epoch = state_dict["epoch"]
        self.processed_num = state_dict["processed_num"]
        self.reset()

    def state_dict(self):
        return {"epoch": self.epoch, "processed_num": self.processed_num}

    def reset(self):
        initialized = _c10d.initialized()
        self.num_replicas = ops.size() if initialized else 1
        self.rank = ops.rank() if initialized else 0
        if self.shuffle:
            generator = torch.Generator()
            generator.manual_seed(self.seed + self.epoch)
            order = torch.randperm(len(self.dataset), generator=generator).tolist()
        else:
            order = list(range(len(self.dataset)))
        self.remaining_indices = order[self.processed_num:]
        self.num_samples = -(-len(self.remaining_indices) // self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self):
        indices = list(self.remaining_indices)
        indices += indices[:self.total_size - len(indices)]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples


def run(func):
    """Horovod's decorator: `func(state, ...)` starts from rank 0's state
    (after a torchrun restart: from the last commit) and, on a collective
    failure, rolls back to the last commit. A failure that took a peer away
    cannot be healed in-process under torchrun: it is re-raised, the worker
    exits, and torchrun restarts the group, which resumes from disk."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        ops.init()
        if ops.rank() == 0:
            state.resume_from_disk()
        state.sync()
        try:
            result = func(state, *args, **kwargs)
        except HorovodInternalError:
            state.restore()
            raise
        if ops.rank() == 0 and os.path.exists(_commit_path()):
            os.remove(_commit_path())
        return result

    return wrapper


__all__ = ["State", "ObjectState", "TorchState", "ElasticSampler", "run", "HostsUpdatedInterrupt",
           "HorovodInternalError"]
