"""PyTorch adapter. Importing it registers the 'byteps' c10d backend, so

    import byteps_native.torch
    torch.distributed.init_process_group("byteps")

works under torchrun. The Horovod-style API (``import byteps_native.torch as bps``)
is re-exported below; each piece lives in its own module.
"""
from byteps_native.torch.backend import register as _register_backend

_register_backend()

from byteps_native.torch.compression import Compression  # noqa: E402
from byteps_native.torch.ddp_hooks import (  # noqa: E402
    PushPullHookState,
    bf16_compress_push_pull_hook,
    fp16_compress_push_pull_hook,
    push_pull_hook,
    register_push_pull_hook,
)
from byteps_native.torch.functions import (  # noqa: E402
    broadcast_object,
    broadcast_optimizer_state,
    broadcast_parameters,
)
from byteps_native.torch.engine import init, local_rank, local_size, rank, shutdown, size  # noqa: E402
from byteps_native.torch.ops import (  # noqa: E402
    poll,
    push_pull,
    push_pull_async,
    push_pull_async_inplace,
    push_pull_inplace,
    synchronize,
)
from byteps_native.torch.optimizer import DistributedOptimizer  # noqa: E402
from byteps_native.torch.cross_barrier import CrossBarrier  # noqa: E402
from byteps_native.torch.sync_batch_norm import SyncBatchNorm  # noqa: E402,F401
from byteps_native.torch.trainers import init_process_group  # noqa: E402,F401  (docs/trainers.md)
from byteps_native.core import stats  # noqa: E402,F401  (one engine per process)

# ---- Horovod / BytePS API compatibility (owned by the "compat" helper; issue 18) ----
from byteps_native.torch import elastic, parallel  # noqa: E402,F401
from byteps_native.torch.basics import (  # noqa: E402,F401
    byteps_torch_set_num_grads, ccl_built, cross_rank, cross_size, cuda_built, ddl_built, declare,
    get_pushpull_speed, gloo_built, gloo_enabled, is_homogeneous, is_initialized, mpi_built, mpi_enabled,
    mpi_threads_supported, nccl_built, resume, rocm_built, start_timeline, stop_timeline, suspend)
from byteps_native.torch.collectives import (  # noqa: E402,F401
    HorovodInternalError, allgather, allgather_async, allgather_object, allreduce, allreduce_,
    allreduce_async, allreduce_async_, alltoall, alltoall_async, barrier, broadcast, broadcast_,
    broadcast_async, broadcast_async_, grouped_allgather, grouped_allgather_async, grouped_allreduce,
    grouped_allreduce_, grouped_allreduce_async, grouped_allreduce_async_, grouped_reducescatter,
    grouped_reducescatter_async, join, reducescatter, reducescatter_async, sparse_allreduce_async)
from byteps_native.torch.process_sets import (  # noqa: E402,F401
    ProcessSet, add_process_set, global_process_set, remove_process_set)
from byteps_native.torch.reduce_ops import Adasum, Average, Max, Min, Product, Sum  # noqa: E402,F401
from byteps_native.torch.ops import push_pull_async_inplace as byteps_push_pull  # noqa: E402,F401
from byteps_native.torch.missing_names import module_getattr as __getattr__  # noqa: E402,F401
# ---- end of the compatibility block ----
