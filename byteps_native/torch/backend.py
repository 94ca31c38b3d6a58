"""Registration of the 'byteps' c10d backend with torch.distributed."""
import torch.distributed as dist

from byteps_native.torch.extension import _c10d

NAME = "byteps"


def _create(dist_options, backend_options):
    """torch's extended-API creator: (DistributedBackendOptions, backend options) -> Backend.

    The first call starts the engine, rendezvousing through the c10d store that
    torch hands us (torchrun's TCPStore, behind a per-group prefix).
    """
    return _c10d.create_backend(
        dist_options.store,
        dist_options.group_rank,
        dist_options.group_size,
        str(dist_options.group_id),
        [int(r) for r in (dist_options.global_ranks_in_group or [])],
    )


def register():
    """Idempotent: a second import (or reload) must not re-register."""
    if NAME.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(NAME, _create, extended_api=True, devices=["cpu", "cuda"])
