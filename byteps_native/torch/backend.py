"""Registration of the 'byteps' c10d backend with torch.distributed."""
import datetime
import os

import torch.distributed as dist

from byteps_native.torch.extension import _c10d

NAME = "byteps"


def _create(dist_options, backend_options):
    """torch's extended-API creator: (DistributedBackendOptions, backend options) -> Backend.

    The first call starts the engine, rendezvousing through the c10d store that
    torch hands us (torchrun's TCPStore, behind a per-group prefix).
    """
    return _c10d.create_backend(
        _rendezvous_store(dist_options.store),
        dist_options.group_rank,
        dist_options.group_size,
        str(dist_options.group_id),
        [int(r) for r in (dist_options.global_ranks_in_group or [])],
    )


_dedicated_store = None


def _rendezvous_store(group_store):
    """With dedicated servers (DMLC_NUM_SERVER > 0) rendezvous through the raw
    TCPStore at MASTER_ADDR:MASTER_PORT, which `python -m byteps_native.server`
    can reach too; otherwise through the group's own (prefixed) store."""
    global _dedicated_store
    if int(os.environ.get("DMLC_NUM_SERVER", "0") or 0) <= 0 or not os.environ.get("MASTER_ADDR"):
        return group_store
    if _dedicated_store is None:
        timeout = datetime.timedelta(seconds=float(os.environ.get("BYTEPS_RENDEZVOUS_TIMEOUT", "300")))
        _dedicated_store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                                         is_master=False, timeout=timeout)
    return _dedicated_store


def register():
    """Idempotent: a second import (or reload) must not re-register."""
    if NAME.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(NAME, _create, extended_api=True, devices=["cpu", "cuda"])
