"""How a DistributedOptimizer reduces one list of gradients, whichever Keras it
wraps: the op, compression and predivide factor, and Horovod's worker-local
variables (``register_local_var`` / PartialDistributedOptimizer), whose
gradients are not reduced but divided by size() when
``scale_local_gradients`` is set (Horovod's pull/3695: the local layers then
take steps of the same size as if their gradients had been averaged)."""
import tensorflow as tf

from byteps_native.tf import engine
from byteps_native.tf.api import push_pull_gradients
from byteps_native.tf.compression import Compression
from byteps_native.tf.reduce_ops import Average


class GradientReduction:
    def __init__(self, op=Average, compression=Compression.none, gradient_predivide_factor=1.0,
                 sparse_as_dense=False, scale_local_gradients=True, label="bps.tf.keras.grad"):
        self.op = op
        self.compression = compression
        self.gradient_predivide_factor = float(gradient_predivide_factor)
        self.sparse_as_dense = sparse_as_dense
        self.scale_local_gradients = scale_local_gradients
        self.label = label
        # id -> variable: the variable is kept alive so that its id stays its own.
        self.local_variables = {}

    def register_local_var(self, variable):
        self.local_variables[id(variable)] = variable

    def is_local(self, variable):
        return variable is not None and id(variable) in self.local_variables

    def reduce(self, grads, variables):
        """The gradients, in order: shared ones reduced over processes (fused),
        local ones kept (scaled by 1/size() if scale_local_gradients)."""
        grads = list(grads)
        variables = list(variables) if variables is not None else [None] * len(grads)
        shared = [i for i, v in enumerate(variables) if not self.is_local(v)]
        out = list(grads)
        if self.sparse_as_dense:
            out = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in out]
        reduced = push_pull_gradients([out[i] for i in shared], [variables[i] for i in shared],
                                      label=self.label, compression=self.compression, op=self.op,
                                      gradient_predivide_factor=self.gradient_predivide_factor)
        for i, g in zip(shared, reduced):
            out[i] = g
        if self.scale_local_gradients and len(shared) < len(grads):
            size = float(engine.size())
            for i, v in enumerate(variables):
                if self.is_local(v) and out[i] is not None:
                    g = out[i]
                    out[i] = (tf.IndexedSlices(g.values / size, g.indices, g.dense_shape)
                              if isinstance(g, tf.IndexedSlices) else g / size)
        return out
