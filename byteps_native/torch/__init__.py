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
from byteps_native.torch.ops import (  # noqa: E402
    init,
    local_rank,
    local_size,
    poll,
    push_pull,
    push_pull_async,
    push_pull_async_inplace,
    push_pull_inplace,
    rank,
    shutdown,
    size,
    synchronize,
)
from byteps_native.torch.optimizer import DistributedOptimizer  # noqa: E402
from byteps_native.core import stats  # noqa: E402,F401  (one engine per process)
