"""Horovod's ``backward_passes_per_step`` for Keras 2 optimizers: gradients
are summed locally and reduced across processes once every N backward passes;
the wrapped optimizer applies them only on those steps (its ``iterations``
still counts every step). ``average_aggregated_gradients`` divides the sum
by N. Works eagerly and inside tf.function (``model.fit``): the decisions are
``tf.cond`` on a counter variable that every process advances in step.

Horovod's tests read ``optimizer._agg_helper.counter``; the optimizer keeps
this object under that name."""
import tensorflow as tf


class LocalGradientAccumulator:
    def __init__(self, backward_passes_per_step, reduce_fn, sparse_as_dense, average_aggregated_gradients):
        if backward_passes_per_step < 1:
            raise ValueError(f"backward_passes_per_step must be >= 1, got {backward_passes_per_step}")
        self.backward_passes_per_step = int(backward_passes_per_step)
        self.reduce_fn = reduce_fn  # (grads, variables) -> reduced grads
        self.sparse_as_dense = sparse_as_dense
        self.average_aggregated_gradients = average_aggregated_gradients
        with tf.init_scope():
            self.counter = tf.Variable(0, trainable=False, dtype=tf.int32, name="bps_accumulation_counter")
        self._sums = {}  # gradient position -> variable holding the local sum

    def _sum_for(self, index, grad, variable):
        if index not in self._sums:
            shape = variable.shape if variable is not None else grad.shape
            with tf.init_scope():  # created once, eagerly, even when first reached inside tf.function
                self._sums[index] = tf.Variable(tf.zeros(shape, grad.dtype), trainable=False,
                                                name=f"bps_accumulated_grad_{index}")
        return self._sums[index]

    def compute_gradients(self, grads, variables):
        """Add `grads` to the local sums; on every N-th call return the sums
        reduced across processes (and clear them), else the local sums."""
        grads, variables = list(grads), list(variables)
        present, sums = [], []
        for i, (g, v) in enumerate(zip(grads, variables)):
            if g is None:
                continue
            if isinstance(g, tf.IndexedSlices):
                if not self.sparse_as_dense:
                    raise ValueError("IndexedSlices gradients (e.g. of an Embedding) cannot be accumulated with "
                                     "backward_passes_per_step > 1 unless sparse_as_dense=True (as in Horovod)")
                g = tf.convert_to_tensor(g)
            total = self._sum_for(i, g, v)
            total.assign_add(g)
            present.append(i)
            sums.append(total.read_value())
        self.counter.assign_add(1)

        def reduce_and_clear():
            reduced = self.reduce_fn(sums, [variables[i] for i in present])
            if self.average_aggregated_gradients:
                reduced = [g / self.backward_passes_per_step for g in reduced]
            reduced = [tf.identity(g) for g in reduced]  # read before the sums are cleared
            with tf.control_dependencies(reduced):
                clear = [self._sums[i].assign(tf.zeros_like(self._sums[i])) for i in present]
                clear.append(self.counter.assign(0))
            with tf.control_dependencies(clear):
                return [tf.identity(g) for g in reduced]

        def keep_local():
            return [tf.identity(s) for s in sums]

        if sums:
            out = tf.cond(tf.equal(self.counter, self.backward_passes_per_step), reduce_and_clear, keep_local)
        else:
            out = []
        result = [None] * len(grads)
        for i, g in zip(present, out):
            result[i] = g
        return result

    def apply_gradients(self, apply_fn, optimizer):
        """Run `apply_fn` on the steps whose gradients were reduced (counter
        back at 0); on the others only advance the optimizer's iterations."""
        def apply():
            apply_fn()
            return tf.constant(True)

        def skip():
            optimizer.iterations.assign_add(1)
            return tf.constant(False)

        return tf.cond(tf.equal(self.counter, 0), apply, skip)
