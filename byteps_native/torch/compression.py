"""Gradient compression for the wire (Horovod's ``Compression`` interface).

``compress``/``decompress`` keep Horovod scripts working; ``wire_dtype`` is
what the fast path uses: the C++ adapter converts into that dtype for the
engine and back into the caller's tensor, with no Python per tensor.
"""
import torch

from byteps_native.compression import CastCompressor, Compressor, EngineCompressor, NoneCompressor  # noqa: F401
from byteps_native.compression import onebit as _onebit, randomk as _randomk, topk as _topk


class _CastCompressor(CastCompressor):
    is_floating = staticmethod(lambda tensor: tensor.dtype.is_floating_point)
    cast = staticmethod(lambda tensor, dtype: tensor.to(dtype))


class FP16Compressor(_CastCompressor):
    wire_dtype = torch.float16


class BF16Compressor(_CastCompressor):
    wire_dtype = torch.bfloat16


class Compression:
    none = NoneCompressor
    fp16 = FP16Compressor
    bf16 = BF16Compressor
    # Through the servers, by the engine (docs/compression.md): float32 tensors
    # of at least BYTEPS_MIN_COMPRESS_BYTES; error feedback on the worker.
    onebit = _onebit()
    topk = staticmethod(_topk)        # Compression.topk(0.01)
    randomk = staticmethod(_randomk)  # Compression.randomk(0.01, seed=0)


def wire_dtype_for(compression, tensor):
    """The dtype `tensor` should travel in under `compression` (None: its own)."""
    wanted = getattr(compression, "wire_dtype", None)
    if wanted is None or not tensor.dtype.is_floating_point:
        return None
    return wanted


def wire_name(name, wire_dtype):
    """A compressed tensor gets its own name: the engine fixes a name's dtype and
    size at first use, and the same tensor may travel uncompressed elsewhere."""
    return name if wire_dtype is None else f"{name}.{str(wire_dtype).replace('torch.', '')}"
