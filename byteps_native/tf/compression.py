"""Horovod's and BytePS's TF ``Compression``: floating tensors travel as
float16 and are cast back after the reduction (the interface is
byteps_native/compression.py, shared with torch)."""
import tensorflow as tf

from byteps_native.compression import CastCompressor, Compressor, EngineCompressor, NoneCompressor  # noqa: F401
from byteps_native.compression import onebit as _onebit, randomk as _randomk, topk as _topk


class FP16Compressor(CastCompressor):
    wire_dtype = tf.float16
    is_floating = staticmethod(lambda tensor: tensor.dtype.is_floating)
    cast = staticmethod(lambda tensor, dtype: tf.cast(tensor, dtype))


class Compression:
    none = NoneCompressor
    fp16 = FP16Compressor
    # Through the servers, by the engine (docs/compression.md).
    onebit = _onebit()
    topk = staticmethod(_topk)
    randomk = staticmethod(_randomk)
