"""Horovod's Keras-level collectives and load_model."""
from byteps_native.tf import collectives
from byteps_native.tf.compression import Compression
from byteps_native.tf.keras.flavor import tf_keras_module
from byteps_native.tf.keras.optimizer import make_distributed
from byteps_native.tf.reduce_ops import Average


def allreduce(value, name=None, average=None, prescale_factor=1.0, postscale_factor=1.0, op=None,
              compression=Compression.none):
    """The reduction (default: mean) of `value` over processes, as a tensor."""
    return collectives.allreduce(value, average=average, name=name, op=op, prescale_factor=prescale_factor,
                                 postscale_factor=postscale_factor, compression=compression)


def allgather(value, name=None):
    return collectives.allgather(value, name=name)


def reducescatter(value, name=None, op=Average):
    return collectives.reducescatter(value, name=name, op=op)


def load_model(filepath, custom_optimizers=None, custom_objects=None, compression=Compression.none,
               legacy_opts=False):
    """tf.keras's load_model (Keras 3, or tf_keras under TF_USE_LEGACY_KERAS=1),
    with the model's optimizer (and its restored state) turned into a
    DistributedOptimizer. `custom_optimizers` (optimizer classes the file may
    name) are added to custom_objects; `legacy_opts` is accepted (the saved
    optimizer's own class is restored, legacy or not)."""
    objects = dict(custom_objects or {})
    for optimizer_class in custom_optimizers or []:
        objects[optimizer_class.__name__] = optimizer_class
    model = tf_keras_module().models.load_model(filepath, custom_objects=objects or None)
    if getattr(model, "optimizer", None) is not None:
        make_distributed(model.optimizer, compression=compression)
    return model
