"""Which Keras is in use: Keras 3 (the ``keras`` package, what ``tf.keras`` is
since TF 2.16) or Keras 2 (the ``tf_keras`` package, what ``tf.keras`` is when
TF_USE_LEGACY_KERAS=1; Horovod users on TF >= 2.16 run their Keras 2 scripts
that way). Optimizers are told apart by their class, so a Keras 2 optimizer
imported as ``tf_keras`` works without the variable too; callbacks have no
object to look at when they are made, so they follow ``tf.keras``, as
Horovod's do."""
import os


def legacy_keras_requested():
    """True where tf.keras is tf_keras (TensorFlow's own test of the variable)."""
    return os.environ.get("TF_USE_LEGACY_KERAS", None) in ("true", "True", "1")


def is_keras2(obj):
    """True for a tf_keras class or object (optimizer, model, layer)."""
    cls = obj if isinstance(obj, type) else type(obj)
    return any(c.__module__.split(".")[0] == "tf_keras" for c in cls.__mro__)


def keras2_module():
    try:
        import tf_keras
    except ImportError as e:
        raise ImportError("TF_USE_LEGACY_KERAS=1 asks for Keras 2, which is the tf_keras package: "
                          "pip install tf_keras==<your TensorFlow's version>") from e
    return tf_keras


def tf_keras_module():
    """The Keras that tf.keras is."""
    if legacy_keras_requested():
        return keras2_module()
    import keras
    return keras


def optimizer_variables(optimizer):
    """An optimizer's variables as a list: a property in Keras 3, a method of
    Keras 2's legacy optimizers, a callable list in Keras 2's new ones."""
    variables = optimizer.variables
    return list(variables() if callable(variables) else variables)


def build_optimizer(optimizer, trainable_variables):
    """Create the optimizer's slots for `trainable_variables` now (Keras 2
    creates them at the first step otherwise), so that they can be broadcast
    or saved before training; False where this optimizer cannot say."""
    if getattr(optimizer, "built", False) or getattr(optimizer, "_built", False):
        return True
    try:
        if hasattr(optimizer, "_create_all_weights"):  # Keras 2 legacy OptimizerV2
            optimizer._create_all_weights(list(trainable_variables))
            return True
        if hasattr(optimizer, "build"):
            optimizer.build(list(trainable_variables))
            return True
    except (TypeError, ValueError, NotImplementedError):
        return False
    return False
