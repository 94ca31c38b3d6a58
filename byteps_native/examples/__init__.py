"""Runnable examples, shipped with the package so an installed byteps-native
can run them from anywhere (they need scikit-learn: `pip install 'byteps-native[examples]'`):

    torchrun --nproc_per_node 2 -m byteps_native.examples.ddp_digits
    torchrun --nproc_per_node 2 -m byteps_native.examples.horovod_style
    bpslaunch --local-workers 2 -- python -m byteps_native.examples.hello_push_pull
    bpslaunch --machines 2 --local-workers 1 --servers 1 -- python -m byteps_native.examples.mirrored_digits
    torchrun --standalone --nproc_per_node 2 --max-restarts 2 -m byteps_native.examples.elastic_checkpoint --checkpoint /tmp/c.pt
"""
