"""Horovod's ``Compression`` interface, framework-neutral: a compressor turns a
tensor into what travels (``compress`` -> (tensor, ctx)) and back
(``decompress``). The frameworks add their casts: byteps_native/torch/compression.py
(fp16, bf16, with a wire dtype the C++ adapter converts into) and
byteps_native/tf/compression.py (fp16)."""


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


class CastCompressor(Compressor):
    """Floating tensors travel as `wire_dtype`; the framework supplies the checks and the cast."""

    @staticmethod
    def is_floating(tensor):
        raise NotImplementedError

    @staticmethod
    def cast(tensor, dtype):
        raise NotImplementedError

    @classmethod
    def compress(cls, tensor):
        if cls.is_floating(tensor) and tensor.dtype != cls.wire_dtype:
            return cls.cast(tensor, cls.wire_dtype), tensor.dtype
        return tensor, None

    @classmethod
    def decompress(cls, tensor, ctx):
        return tensor if ctx is None else cls.cast(tensor, ctx)
