"""Horovod's collectives beyond a sum, written once over the engine's sums
over ranks for every framework.

    framework.py      what a framework supplies: its tensors, a sum round, a placed sum
    gather.py         allgather: a length round, then a zero-padded byte sum
                      (the engine's gather, csrc/core/placed_sum.h, where the adapter has it)
    alltoall.py       alltoall: a splits round, then a gather of the rows
    reducescatter.py  the rows of a reduction that each rank keeps
    objects.py        allgather_object, broadcast_object (pickles as bytes)
    rounds.py         barrier, and join's last-to-arrive without a store

byteps_native/torch/collectives.py and byteps_native/tf/collectives.py adapt
these to their framework (handles and autograd, tf.function and gradients);
docs/migration.md says what the byte-sum gathers cost.
"""
