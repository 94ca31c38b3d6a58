"""byteps_native.core: the framework-free Python face of the engine.

    import numpy as np, byteps_native.core as bps
    bps.init()                                   # from BytePS / bpslaunch env
    g = np.ones(1000, np.float32)
    bps.push_pull(g, name="grad.fc1")            # in place, averaged over ranks
    h = bps.push_pull_async(g, name="grad.fc2")  # handle.wait() / handle.poll()

Arrays: NumPy or any object exposing a writable C-contiguous buffer (DLPack
CPU arrays via numpy.from_dlpack). bfloat16 arrays (ml_dtypes) are accepted.
"""
from byteps_native.core.api import (
    CANCELLED,
    DEADLINE_EXCEEDED,
    BytePSError,
    Handle,
    build_info,
    capabilities,
    declare_compression,
    init,
    initialized,
    local_rank,
    local_size,
    push_pull,
    push_pull_async,
    rank,
    shutdown,
    size,
    stats,
)

__all__ = ["CANCELLED", "DEADLINE_EXCEEDED", "BytePSError", "Handle", "build_info", "capabilities", "declare_compression", "init", "initialized", "local_rank", "local_size", "push_pull",
           "push_pull_async", "rank", "shutdown", "size", "stats"]
