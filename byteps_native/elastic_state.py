"""Horovod's elastic State, framework-neutral, over torchrun's restarts.

Horovod keeps the surviving processes alive and re-forms the ring; torchrun
restarts every worker of the group when one fails (``--max-restarts``). So
``commit()`` also writes the committed state to disk (rank 0, atomically),
and after a restart ``run`` starts from it: the training function resumes
from the last commit. The file lives in $BYTEPS_ELASTIC_DIR (default: the
temp dir, per torchrun run id) and is removed when the decorated function
returns. Membership changes without a failure are torchrun's
``--nnodes=MIN:MAX`` business; ``check_host_updates()`` never interrupts.

byteps_native/torch/elastic.py and byteps_native/tf/elastic.py add the
framework's defaults (broadcast, rank, file format) and its state classes.
"""
import copy
import functools
import os
import pickle
import tempfile

from byteps_native._runtime import config
from byteps_native._runtime.errors import HostsUpdatedInterrupt  # noqa: F401  (re-exported)


def commit_path(file_name):
    folder = os.environ.get("BYTEPS_ELASTIC_DIR") or os.path.join(
        tempfile.gettempdir(), "byteps_native_elastic", os.environ.get("TORCHELASTIC_RUN_ID", "job"))
    return os.path.join(folder, file_name)


def restart_count():
    return config.restart_count()


class State:
    """Horovod's State: save/restore/sync plus reset callbacks, and the commit file."""

    commit_file = "commit.pkl"  # per framework

    def __init__(self, bcast_object, get_rank):
        self._bcast_object = bcast_object
        self._rank = get_rank
        self._reset_callbacks = []

    @staticmethod
    def _dump(obj, path):
        with open(path, "wb") as f:
            pickle.dump(obj, f)

    @staticmethod
    def _load(path):
        with open(path, "rb") as f:
            return pickle.load(f)

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
            path = commit_path(self.commit_file)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.tmp.{os.getpid()}"
            self._dump(self._persistent(), tmp)
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
        path = commit_path(self.commit_file)
        if restart_count() == 0 or not os.path.exists(path):
            return False
        self._load_persistent(self._load(path))
        self.save()
        return True


class ObjectState(State):
    """Keyword arguments become attributes, saved, restored and broadcast from rank 0."""

    def __init__(self, bcast_object=None, get_rank=None, **kwargs):
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


def make_run(init, rank, internal_error):
    """Horovod's ``@elastic.run`` for one framework: `func(state, ...)` starts from
    rank 0's state (after a torchrun restart: from the last commit) and, on a
    collective failure, rolls back to the last commit. A failure that took a
    peer away cannot be healed in-process under torchrun: it is re-raised, the
    worker exits, and torchrun restarts the group, which resumes from disk."""

    def run(func):
        @functools.wraps(func)
        def wrapper(state, *args, **kwargs):
            init()
            if rank() == 0:
                state.resume_from_disk()
            state.sync()
            try:
                result = func(state, *args, **kwargs)
            except internal_error:
                state.restore()
                raise
            path = commit_path(state.commit_file)
            if rank() == 0 and os.path.exists(path):
                os.remove(path)
            return result

        return wrapper

    return run
