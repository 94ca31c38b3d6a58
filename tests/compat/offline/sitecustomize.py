"""Loaded at start-up when tests/compat/offline is on PYTHONPATH (the ported
upstream scripts only). Two things, neither touching the scripts:

* keras.datasets.mnist.load_data (Keras 3, and Keras 2's tf_keras, which is
  tf.keras under TF_USE_LEGACY_KERAS=1) returns the bundled digits instead of
  downloading MNIST (no network here);
* the trained state is fingerprinted at exit, so the runner can check that
  the ranks agree: every model/variable list handed to byteps_native's
  DistributedOptimizer, DistributedDataParallel, DistributedGradientTape or
  Keras fit is hashed into $COMPAT_FINGERPRINT_DIR/rank<r>.json.
"""
import atexit
import hashlib
import importlib.abc
import json
import os
import sys
import weakref


def _load_data(path="mnist.npz", cache_dir=None):
    from bundled_digits import mnist_like
    return mnist_like()


_tracked = []  # callables returning lists of numpy arrays


def _digest():
    h = hashlib.sha256()
    count = 0
    for get_arrays in _tracked:
        try:
            arrays = get_arrays()
        except Exception:  # an object gone at exit: nothing to compare
            continue
        for a in arrays:
            h.update(a.tobytes())
            count += 1
    return h.hexdigest(), count


def _write_fingerprint():
    folder = os.environ.get("COMPAT_FINGERPRINT_DIR")
    if not folder or not _tracked:
        return
    rank = os.environ.get("RANK", os.environ.get("DMLC_WORKER_ID", "0"))
    digest, count = _digest()
    with open(os.path.join(folder, f"rank{rank}.json"), "w") as f:
        json.dump({"digest": digest, "arrays": count}, f)


atexit.register(_write_fingerprint)


def _track_torch_params(params):
    refs = [weakref.ref(p) for p in params]
    _tracked.append(lambda: [r().detach().cpu().double().numpy() for r in refs if r() is not None])


_tracked_ids = set()


def _track_tf_variables(variables):
    refs = [v for v in variables if id(v) not in _tracked_ids]
    _tracked_ids.update(id(v) for v in refs)
    if refs:
        _tracked.append(lambda: [v.numpy() for v in refs])


def _patch_torch(module):
    original_optimizer = module.DistributedOptimizer

    def DistributedOptimizer(optimizer, *args, **kwargs):
        _track_torch_params([p for g in optimizer.param_groups for p in g["params"]])
        return original_optimizer(optimizer, *args, **kwargs)

    module.DistributedOptimizer = DistributedOptimizer


def _patch_torch_parallel(module):
    original_init = module.DistributedDataParallel.__init__

    def __init__(self, model, *args, **kwargs):
        _track_torch_params(list(model.parameters()))
        original_init(self, model, *args, **kwargs)

    module.DistributedDataParallel.__init__ = __init__


def _patch_tf(module):
    tape_class = module.DistributedGradientTape
    original_gradient = tape_class.gradient

    def gradient(self, target, sources, *args, **kwargs):
        if not getattr(self, "_compat_tracked", False):
            import tensorflow as tf
            _track_tf_variables([s for s in tf.nest.flatten(sources) if hasattr(s, "numpy")])
            self._compat_tracked = True
        return original_gradient(self, target, sources, *args, **kwargs)

    tape_class.gradient = gradient


def _patch_keras_trainer(module):
    trainer = module.TensorFlowTrainer
    original_fit = trainer.fit

    def fit(self, *args, **kwargs):
        result = original_fit(self, *args, **kwargs)
        _track_tf_variables(list(self.trainable_variables))
        return result

    trainer.fit = fit


def _patch_keras2_training(module):
    model = module.Model
    original_fit = model.fit

    def fit(self, *args, **kwargs):
        result = original_fit(self, *args, **kwargs)
        _track_tf_variables(list(self.trainable_variables))
        return result

    model.fit = fit


_PATCHES = {
    "keras.src.datasets.mnist": lambda m: setattr(m, "load_data", _load_data),
    "tf_keras.src.datasets.mnist": lambda m: setattr(m, "load_data", _load_data),
    "tf_keras.src.engine.training": _patch_keras2_training,
    "byteps_native.torch": _patch_torch,
    "byteps_native.torch.parallel": _patch_torch_parallel,
    "byteps_native.tf": _patch_tf,
    "keras.src.backend.tensorflow.trainer": _patch_keras_trainer,
}


class _PatchAfterLoad(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in _PATCHES:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                original = spec.loader.exec_module

                def exec_module(module, original=original, patch=_PATCHES[name]):
                    original(module)
                    patch(module)

                spec.loader.exec_module = exec_module
                return spec
        return None


sys.meta_path.insert(0, _PatchAfterLoad())
