"""Processes with different numbers of local replicas (process m has m + 1
logical CPUs): their MEAN would divide by different numbers, so every
reduction must fail on every process, naming the tensor, instead of
returning disagreeing results. Writes what each reduction did."""
import os

import common

MACHINE = int(os.environ["DMLC_WORKER_ID"])
tf = common.setup_tensorflow(logical_devices=MACHINE + 1)
import byteps_native.tf as bps  # noqa: E402

strategy = tf.distribute.MirroredStrategy(cross_device_ops=bps.BytePSOps())
result = {"local_replicas": strategy.num_replicas_in_sync}
value = strategy.experimental_distribute_values_from_function(lambda ctx: tf.fill([3], 1.0))
try:
    reduced = strategy.reduce(tf.distribute.ReduceOp.MEAN, value, axis=None)
    result["reduce_mean"] = reduced.numpy().tolist()
except Exception as e:  # noqa: BLE001 -- what failed, and how, is the result
    result["error"] = f"{type(e).__name__}: {e}"
common.write_result(bps.rank(), result)
