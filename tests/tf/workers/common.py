"""Shared set-up of the TF test workers: logical CPU devices before any op,
few threads (2 cores shared by every process), JSON result output."""
import numpy as np

from tests.support.results import report


def setup_tensorflow(logical_devices):
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(2)
    if logical_devices > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(logical_devices)])
    return tf


def to_jsonable(value):
    if hasattr(value, "numpy"):
        value = value.numpy()
    if isinstance(value, np.ndarray):
        return value.astype(np.float64).tolist() if value.dtype.kind in "fcb" or value.dtype.name == "bfloat16" \
            else value.tolist()
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    return value


def write_result(rank, result):
    report(to_jsonable(result), rank)


def digits(num_samples):
    """sklearn's bundled digits, scaled to [0, 1], float32 / int32."""
    from sklearn.datasets import load_digits
    data = load_digits()
    x = (data.data[:num_samples] / 16.0).astype(np.float32)
    y = data.target[:num_samples].astype(np.int32)
    return x, y


def shard_global_batches(x, y, global_batch, rank, size):
    """The rows this process sees when every global batch is split evenly over processes."""
    per = global_batch // size
    rows = np.concatenate([np.arange(b * global_batch + rank * per, b * global_batch + (rank + 1) * per)
                           for b in range(len(x) // global_batch)])
    return x[rows], y[rows]
