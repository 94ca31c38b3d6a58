"""DDP communication hooks that push_pull each gradient bucket.

    model.register_comm_hook(None, byteps_native.torch.push_pull_hook)

Priority: DDP's bucket 0 holds the last layers and the highest index the
first layers, which the next forward pass needs first, so priority = index.
Names: DDP rebuilds its buckets after the first iteration; a name built from
(index, dtype, numel) is identical on every rank before and after the
rebuild, stays bounded in number, and never contains a step counter.
"""
import torch

from byteps_native.torch.extension import _c10d


class PushPullHookState:
    """Optional hook state: a name prefix keeps two DDP models in one process apart."""

    def __init__(self, name_prefix=""):
        self.name_prefix = name_prefix


def _bucket_name(state, bucket, suffix=""):
    prefix = getattr(state, "name_prefix", "") if state is not None else ""
    buffer = bucket.buffer()
    dtype = str(buffer.dtype).replace("torch.", "")
    return f"{prefix}ddp.bucket{bucket.index()}.{dtype}.{buffer.numel()}{suffix}"


def push_pull_hook(state, bucket):
    """Average the bucket across ranks; returns a Future of the bucket's tensor."""
    return _c10d.push_pull_async(bucket.buffer(), _bucket_name(state, bucket), bucket.index(), True)


def fp16_compress_push_pull_hook(state, bucket):
    """As push_pull_hook, but the bucket travels as float16 (half the bytes)."""
    return _c10d.push_pull_async(bucket.buffer(), _bucket_name(state, bucket, ".fp16"),
                                 bucket.index(), True, torch.float16)


def bf16_compress_push_pull_hook(state, bucket):
    """As push_pull_hook, but the bucket travels as bfloat16 (half the bytes, fp32 range)."""
    return _c10d.push_pull_async(bucket.buffer(), _bucket_name(state, bucket, ".bf16"),
                                 bucket.index(), True, torch.bfloat16)
