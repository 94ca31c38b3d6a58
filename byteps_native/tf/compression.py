"""Horovod's and BytePS's TF ``Compression``: cast floating tensors to 16 bits
for the wire and back after the reduction."""
import tensorflow as tf


class Compressor:
    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class NoneCompressor(Compressor):
    pass


class FP16Compressor(Compressor):
    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating and tensor.dtype != tf.float16:
            return tf.cast(tensor, tf.float16), tensor.dtype
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor if ctx is None else tf.cast(tensor, ctx)


class Compression:
    none = NoneCompressor
    fp16 = FP16Compressor
