"""Registration of the 'byteps' c10d backend with torch.distributed."""
import datetime
import functools
import os

import torch
import torch.distributed as dist

from byteps_native._runtime import config
from byteps_native._runtime.orphaned_shm import remove_orphaned_segments
from byteps_native.torch.extension import _c10d

NAME = "byteps"


def _create(dist_options, backend_options):
    """torch's extended-API creator: (DistributedBackendOptions, backend options) -> Backend.

    A group of all ranks starts the engine on its first call, rendezvousing
    through the c10d store that torch hands us (torchrun's TCPStore, behind a
    per-group prefix). Every group also owns delegates over the same store,
    which serve what the engine does not (see docs/torch.md).
    """
    store = dist_options.store
    rank, size = dist_options.group_rank, dist_options.group_size
    global_ranks = [int(r) for r in (dist_options.global_ranks_in_group or [])]
    cpu_delegate, cuda_delegate = _delegates(store, rank, size, dist_options.timeout,
                                             str(dist_options.group_id), global_ranks)
    try:
        return _c10d.create_backend(
            _rendezvous_store(store),
            rank,
            size,
            str(dist_options.group_id),
            global_ranks,
            dist.get_world_size() if dist.is_initialized() else size,
            cpu_delegate,
            cuda_delegate,
        )
    except Exception:
        remove_orphaned_segments()  # a local rank 0 killed at start-up left its machine's
        raise


def _delegates(store, rank, size, timeout, group_name, global_ranks):
    """gloo for CPU tensors; NCCL for CUDA tensors when both are there. Each
    under its own prefix of the group's store, so their keys never meet the
    engine's. NCCL connects lazily, on its first collective."""
    # torchrun keeps one agent store across restarts: a key from the attempt
    # before (a dead rank's address) must never be read by this one.
    attempt = config.restart_count()
    cpu = dist.ProcessGroupGloo(dist.PrefixStore(f"byteps_delegate_gloo/{attempt}", store), rank, size, timeout)
    cpu._set_sequence_number_for_group()
    cuda = None
    if torch.cuda.is_available() and dist.is_nccl_available():
        options = dist.ProcessGroupNCCL.Options()
        options._timeout = timeout
        options.group_name = group_name + ":byteps_delegate_nccl"
        options.global_ranks_in_group = global_ranks
        cuda = dist.ProcessGroupNCCL(dist.PrefixStore(f"byteps_delegate_nccl/{attempt}", store), rank, size, options)
    return cpu, cuda


_dedicated_store = None


def _rendezvous_store(group_store):
    """With dedicated servers (DMLC_NUM_SERVER > 0) rendezvous through the raw
    TCPStore at MASTER_ADDR:MASTER_PORT, which `python -m byteps_native.server`
    can reach too; otherwise through the group's own (prefixed) store."""
    global _dedicated_store
    if config.dedicated_servers() <= 0 or not os.environ.get("MASTER_ADDR"):
        return group_store
    if _dedicated_store is None:
        _dedicated_store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                                         is_master=False, timeout=config.rendezvous_timeout())
    return _dedicated_store


def _devices():
    """The device types 'byteps' serves: CUDA only where a GPU is visible.
    torch code that picks a device for the tensors of its own collectives
    from a plugin backend's device list (ShardedTensor.gather, hence
    torch.distributed.checkpoint's resharding) takes the first non-CPU one;
    on a host without GPUs that must be the CPU, as it is for gloo. The
    NVML-based count does not poison fork."""
    return ["cpu", "cuda"] if torch.cuda.device_count() > 0 else ["cpu"]


def register():
    """Idempotent: a second import (or reload) must not re-register."""
    if NAME.upper() in dist.Backend._plugins:
        # Named by the torch.backends entry point (torch_autoload), which runs
        # while torch is still importing, too early to count devices.
        dist.Backend.backend_capability[NAME] = _devices()
        return
    dist.Backend.register_backend(NAME, _create, extended_api=True, devices=_devices())


def _admit_byteps_groups_to_monitored_barrier():
    """torch.distributed.monitored_barrier refuses every group whose backend
    is not named 'gloo', before it reaches the group. A 'byteps' group serves
    it (its gloo delegate's monitored barrier, after the group's engine work:
    BytepsBackend::monitoredBarrier), so byteps groups are let through; any
    other group gets torch's own function and answer. Idempotent."""
    from torch.distributed import distributed_c10d as c10d

    original = c10d.monitored_barrier
    if getattr(original, "_admits_byteps", False):
        return

    @functools.wraps(original)
    def monitored_barrier(group=c10d.GroupMember.WORLD, timeout=None, wait_all_ranks=False):
        if c10d._rank_not_in_group(group) or dist.get_backend(group) != NAME:
            return original(group, timeout, wait_all_ranks)
        if timeout is None:
            timeout = c10d._get_default_timeout(NAME)
        elif isinstance(timeout, (int, float)):
            timeout = datetime.timedelta(seconds=timeout)
        c10d._check_valid_timeout(timeout)
        group_to_use = c10d._get_default_group() if group is None else group
        return group_to_use.monitored_barrier(timeout, wait_all_ranks=wait_all_ranks)

    monitored_barrier._admits_byteps = True
    c10d.monitored_barrier = monitored_barrier
    dist.monitored_barrier = monitored_barrier


_admit_byteps_groups_to_monitored_barrier()
