"""Gradient compression for the wire (Horovod's ``Compression`` interface).

``compress``/``decompress`` keep Horovod scripts working; ``wire_dtype`` is
what the fast path uses: the C++ adapter converts into that dtype for the
engine and back into the caller's tensor, with no Python per tensor.
"""
import torch


class Compressor:
    wire_dtype = None  # None: the tensor travels in its own dtype

    @classmethod
    def compress(cls, tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class NoneCompressor(Compressor):
    pass


class _CastCompressor(Compressor):
    @classmethod
    def compress(cls, tensor):
        if tensor.dtype.is_floating_point and tensor.dtype != cls.wire_dtype:
            return tensor.to(cls.wire_dtype), tensor.dtype
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor if ctx is None else tensor.to(ctx)


class FP16Compressor(_CastCompressor):
    wire_dtype = torch.float16


class BF16Compressor(_CastCompressor):
    wire_dtype = torch.bfloat16


class Compression:
    none = NoneCompressor
    fp16 = FP16Compressor
    bf16 = BF16Compressor


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
