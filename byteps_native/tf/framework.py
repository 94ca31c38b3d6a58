"""TensorFlow as the collective algorithms' Framework (byteps_native/algorithms).

Everything is a TF op, so the algorithms run eagerly and inside tf.function,
where a length is a tensor known only at run time: there a buffer's engine
name gets its run-time size from the op (ops.shape_suffix), eagerly the size
goes into the name here. Every round runs on the CPU.
"""
import numpy as np
import tensorflow as tf

from byteps_native.algorithms.framework import Framework
from byteps_native.algorithms.gather import MIN_GATHER_BYTES
from byteps_native.tf import engine
from byteps_native.tf.join_protocol import JOIN_MARK
from byteps_native.tf.ops import sum_over_ranks


class TensorFlow(Framework):
    def rank(self):
        return engine.rank()

    def size(self):
        return engine.size()

    def sum(self, tensor, name):
        if tf.executing_eagerly():
            name = f"{name}.{tensor.shape.num_elements()}"
        return sum_over_ranks(tensor, name)

    def sum_failing_if_joined(self, table, name, what):
        # A joined rank standing in for it sends its row all -1, which no
        # training rank does; the op then fails with FailedPreconditionError
        # naming them (the engine's rule: csrc/core/join_mark.h).
        return sum_over_ranks(table, name, JOIN_MARK)

    def table(self, row, width=None):
        n, me = engine.size(), engine.rank()
        row = tf.cast(row, tf.int64)
        if width is None:
            return tf.scatter_nd([[me]], tf.reshape(row, [1]), [n])
        return tf.scatter_nd([[me]], tf.reshape(row, [1, width]), [n, width])

    def length(self, data):
        return tf.cast(tf.size(data), tf.int64)

    def bytes_of(self, payload):
        return tf.constant(np.frombuffer(payload, np.uint8) if isinstance(payload, bytes) else payload)

    def minimum(self, a, b):
        return tf.minimum(a, b)

    def total(self, values):
        return tf.reduce_sum(values)

    def padded_length(self, total):
        total = tf.maximum(tf.cast(total, tf.float64), float(MIN_GATHER_BYTES))
        return tf.cast(tf.pow(tf.constant(2.0, tf.float64), tf.math.ceil(tf.math.log(total) / np.log(2.0))),
                       tf.int64)

    def placed_sum(self, data, offset, length, name):
        # Traced graphs know the offset and length only at run time: the
        # placement stays a TF op before the sum.
        buffer = tf.pad(data, [[offset, length - offset - tf.cast(tf.size(data), tf.int64)]])
        return self.sum(buffer if tf.executing_eagerly() else tf.reshape(buffer, [-1]), name)

    def as_bytes(self, tensor):
        if tensor.dtype == tf.bool:
            tensor = tf.cast(tensor, tf.uint8)
        return tf.reshape(tensor if tensor.dtype == tf.uint8 else tf.bitcast(tensor, tf.uint8), [-1])

    def from_bytes(self, data, dtype, row_shape):
        working = tf.uint8 if dtype == tf.bool else dtype
        if working == tf.uint8:
            values = data
        elif working == tf.int8:
            values = tf.bitcast(data, tf.int8)
        else:
            values = tf.bitcast(tf.reshape(data, [-1, working.size]), working)
        values = tf.reshape(values, tf.concat([[-1], tf.constant(row_shape, tf.int32)], 0))
        return tf.cast(values, tf.bool) if dtype == tf.bool else values

    def row_bytes(self, dtype, row_shape):
        return max(1, int(np.prod(row_shape, dtype=np.int64)) * dtype.size)

    def concat(self, pieces):
        return tf.concat(pieces, 0)

    def cast_counts(self, counts):
        return tf.cast(counts, tf.int32)


TF = TensorFlow()
