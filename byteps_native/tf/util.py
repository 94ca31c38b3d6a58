"""BytePS's and Horovod's ``tensorflow.util`` helpers."""
import tensorflow as tf


def _executing_eagerly():
    """True when eager execution is on (always available in TF 2)."""
    return tf.executing_eagerly()


def _make_subgraph(f):
    return tf.function(f)


def _cache(f):
    cache = {}

    def wrapper(*args):
        key = (args, tf.executing_eagerly())
        if key not in cache:
            cache[key] = f(*args)
        return cache[key]

    return wrapper


def vars_to_refs(variables):
    if isinstance(variables, list):
        return [vars_to_refs(v) for v in variables]
    return variables.ref()


def refs_to_vars(refs):
    if isinstance(refs, list):
        return [refs_to_vars(r) for r in refs]
    return refs.deref()


executing_eagerly = _executing_eagerly
