"""BytePS's ``byteps.torch.parallel``: a DistributedDataParallel wrapper."""
from byteps_native.torch.parallel.distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
