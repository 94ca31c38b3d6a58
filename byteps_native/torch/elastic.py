"""Horovod's ``hvd.elastic`` for torch (State, commit, run, TorchState,
ElasticSampler) over torchrun's restarts; the framework-neutral part (commit
file, restart rules, ObjectState, run) is byteps_native/elastic_state.py."""
import copy

import torch

from byteps_native import elastic_state
from byteps_native.elastic_state import HostsUpdatedInterrupt  # noqa: F401  (hvd.elastic.HostsUpdatedInterrupt)
from byteps_native._runtime.errors import HorovodInternalError
from byteps_native.torch import ops
from byteps_native.torch.engine import init, is_initialized, shutdown  # noqa: F401  (hvd.elastic.init, as in Horovod)
from byteps_native.torch.functions import broadcast_object, broadcast_optimizer_state, broadcast_parameters


class State(elastic_state.State):
    """Horovod's State for torch (commits saved with torch.save)."""

    commit_file = "commit.pt"

    def __init__(self, bcast_object=None, get_rank=None):
        super().__init__(bcast_object or broadcast_object, get_rank or ops.rank)

    _dump = staticmethod(torch.save)

    @staticmethod
    def _load(path):
        return torch.load(path, weights_only=False)


class ObjectState(elastic_state.ObjectState, State):
    """Keyword arguments become attributes, saved, restored and broadcast from rank 0."""


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
        initialized = is_initialized()
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


run = elastic_state.make_run(init, ops.rank, HorovodInternalError)


__all__ = ["State", "ObjectState", "TorchState", "ElasticSampler", "run", "HostsUpdatedInterrupt",
           "HorovodInternalError"]
