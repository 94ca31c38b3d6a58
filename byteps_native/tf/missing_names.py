"""Names of Horovod's and BytePS's TF API left out on purpose: the error says
what to use instead, rather than a bare AttributeError."""

INSTEAD = {
    "SyncBatchNormalization": "keras.layers.BatchNormalization(synchronized=True) under "
                              "MirroredStrategy(cross_device_ops=BytePSOps())",
    "LocalGradientAggregationHelper": "DistributedOptimizer(backward_passes_per_step=N)",
    "gpu_available": "tf.config.list_physical_devices('GPU') (a Horovod internal helper)",
    "check_extension": "nothing: the import-time check runs by itself (a Horovod internal helper)",
    "split_list": "nothing (a Horovod internal helper)",
    "is_version_greater_equal_than": "packaging.version (a Horovod internal helper)",
    "mpi_ops": "the functions on byteps_native.tf itself",
}


def make_getattr(module_name):
    def module_getattr(name):
        if name in INSTEAD:
            raise AttributeError(f"{module_name} has no {name!r} on purpose; use {INSTEAD[name]}")
        raise AttributeError(f"module {module_name!r} has no attribute {name!r} (Horovod/BytePS names and "
                             "ours are listed in docs/migration.md)")
    return module_getattr
