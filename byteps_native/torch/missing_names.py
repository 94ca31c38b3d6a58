"""Names of Horovod's and BytePS's torch API that byteps_native leaves out on
purpose: the error says what to use instead, rather than a bare AttributeError."""

INSTEAD = {
    "mpi_lib": "nothing: byteps_native has no MPI library; the engine is byteps_native.core",
    "mpi_lib_v2": "nothing: byteps_native has no MPI library; the engine is byteps_native.core",
    "handle_average_backwards_compatibility": "op=Average / op=Sum (average= is still accepted)",
    "check_extension": "nothing: the import-time check runs by itself (a Horovod internal helper)",
    "push_pull_group_sync_inplace": "push_pull_inplace (the engine groups and fuses by itself)",
}


def module_getattr(name):
    if name in INSTEAD:
        raise AttributeError(f"byteps_native.torch has no {name!r} on purpose; use {INSTEAD[name]}")
    raise AttributeError(f"module 'byteps_native.torch' has no attribute {name!r} (Horovod/BytePS names "
                         "and ours are listed in docs/migration.md)")
