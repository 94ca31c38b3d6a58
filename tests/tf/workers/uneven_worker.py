"""Machines of different sizes (issue 29) under MirroredStrategy(BytePSOps),
one logical device per process: the sizes and ranks the engine, the Horovod
API and the strategy report, and exact global sums and means."""

import common

tf = common.setup_tensorflow(logical_devices=1)
import byteps_native.tf as bps  # noqa: E402

strategy = tf.distribute.MirroredStrategy(cross_device_ops=bps.BytePSOps())
rank, size = bps.rank(), bps.size()
SUM, MEAN = tf.distribute.ReduceOp.SUM, tf.distribute.ReduceOp.MEAN
mine = strategy.experimental_distribute_values_from_function(
    lambda ctx: tf.fill([5000], float(rank + 1)))  # several partitions at BYTEPS_PARTITION_BYTES=4096
result = {
    "rank": rank, "size": size, "local_rank": bps.local_rank(), "local_size": bps.local_size(),
    "cross_rank": bps.cross_rank(), "cross_size": bps.cross_size(), "homogeneous": bps.is_homogeneous(),
    "replicas": strategy.num_replicas_in_sync,
    "sum": sorted(set(strategy.reduce(SUM, mine, axis=None).numpy().tolist())),
    "mean": sorted(set(strategy.reduce(MEAN, mine, axis=None).numpy().tolist())),
}
common.write_result(rank, common.to_jsonable(result))
bps.shutdown()
