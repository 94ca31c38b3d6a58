"""DDP communication hooks that push_pull each gradient bucket.

    byteps_native.torch.register_push_pull_hook(model)               # C++ hook
    model.register_comm_hook(None, byteps_native.torch.push_pull_hook)  # Python hook

Both do the same; the C++ one (csrc/torch/ddp_comm_hook.cc) runs inside DDP's
Reducer and never enters the interpreter per bucket, the Python ones are for
composing with other Python hook logic.

Priority: DDP's bucket 0 holds the last layers and the highest index the
first layers, which the next forward pass needs first, so priority = index.
Names: DDP rebuilds its buckets after the first iteration; a name built from
(index, dtype, numel) is identical on every rank before and after the
rebuild, stays bounded in number, and never contains a step counter.
"""
import torch

from byteps_native.compression import apply_to, as_engine_spec
from byteps_native.torch.extension import _c10d


class PushPullHookState:
    """Optional hook state: a name prefix keeps two DDP models in one process apart;
    `compression` is one of the engine's compressors (Compression.onebit,
    Compression.topk(0.01), Compression.randomk(0.01), or a spec string such as
    "onebit"): float32 buckets then travel compressed through the servers, with
    error feedback on the worker (docs/compression.md)."""

    def __init__(self, name_prefix="", compression=None):
        self.name_prefix = name_prefix
        self.compression = compression


def _bucket_name(state, bucket, suffix=""):
    prefix = getattr(state, "name_prefix", "") if state is not None else ""
    buffer = bucket.buffer()
    dtype = str(buffer.dtype).replace("torch.", "")
    return f"{prefix}ddp.bucket{bucket.index()}.{dtype}.{buffer.numel()}{suffix}"


def _segments(bucket):
    """The sizes of the bucket's parameters in buffer order (onebit keeps a
    scale per parameter), or None when they do not tile the buffer."""
    buffer = bucket.buffer()
    parts = sorted(((g.data_ptr() - buffer.data_ptr()) // buffer.element_size(), g.numel())
                   for g in bucket.gradients())
    end = 0
    for offset, size in parts:
        if offset != end:
            return None
        end += size
    return [size for _, size in parts] if end == buffer.numel() else None


def push_pull_hook(state, bucket):
    """Average the bucket across ranks; returns a Future of the bucket's tensor."""
    name = _bucket_name(state, bucket)
    compression = getattr(state, "compression", None)
    # The parameters' layout only matters to a compressor: an uncompressed
    # bucket costs no walk over its gradients.
    apply_to(name, compression, _segments(bucket) if as_engine_spec(compression) else None)
    return _c10d.push_pull_async(bucket.buffer(), name, bucket.index(), True)


def fp16_compress_push_pull_hook(state, bucket):
    """As push_pull_hook, but the bucket travels as float16 (half the bytes)."""
    return _c10d.push_pull_async(bucket.buffer(), _bucket_name(state, bucket, ".fp16"),
                                 bucket.index(), True, torch.float16)


def bf16_compress_push_pull_hook(state, bucket):
    """As push_pull_hook, but the bucket travels as bfloat16 (half the bytes, fp32 range)."""
    return _c10d.push_pull_async(bucket.buffer(), _bucket_name(state, bucket, ".bf16"),
                                 bucket.index(), True, torch.bfloat16)


_WIRE_DTYPES = {None: None, "fp16": torch.float16, "bf16": torch.bfloat16,
                torch.float16: torch.float16, torch.bfloat16: torch.bfloat16}


def register_push_pull_hook(ddp_model, name_prefix="", compression=None):
    """Install the C++ push_pull hook on a DistributedDataParallel model.

    compression: None, "fp16" or "bf16" (the bucket travels in that dtype), or
    one of the engine's compressors (Compression.onebit, Compression.topk(0.01),
    "onebit", "topk:ratio=0.01", ...): float32 buckets then travel compressed
    through the servers, with error feedback on the worker, exactly as with
    PushPullHookState(compression=...) and the Python push_pull_hook (same
    bucket names, so ranks may mix the two hooks; docs/compression.md).
    DDP takes one hook per model; a second registration raises.
    """
    if not isinstance(ddp_model, torch.nn.parallel.DistributedDataParallel):
        raise TypeError(f"register_push_pull_hook needs a DistributedDataParallel model, got "
                        f"{type(ddp_model).__name__}; wrap it first: DistributedDataParallel(model)")
    engine_spec = None if compression in _WIRE_DTYPES else as_engine_spec(compression)
    if compression not in _WIRE_DTYPES and not engine_spec:
        raise ValueError(f"compression must be None, 'fp16', 'bf16', or an engine compressor such as "
                         f"Compression.onebit or 'topk:ratio=0.01', got {compression!r}")
    wire_dtype = _WIRE_DTYPES[compression] if compression in _WIRE_DTYPES else None
    _c10d.register_push_pull_hook(ddp_model.reducer, name_prefix, wire_dtype, engine_spec or "")
    logger = getattr(ddp_model, "logger", None)
    if logger is not None and hasattr(logger, "_set_comm_hook_name"):
        logger._set_comm_hook_name("byteps_native.torch.register_push_pull_hook")
