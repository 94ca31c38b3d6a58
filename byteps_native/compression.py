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


# --- Compression through the servers (issue 29, docs/compression.md) ---------
# The engine compresses each pushed partition slice of a float32 tensor, the
# servers sum the decompressed pushes and answer compressed: one C++
# implementation (csrc/compression) behind every face. A compressor of this
# kind carries `engine_spec`; the faces declare it for the tensor's name
# (bps_declare_compression) before its push_pull and send the tensor as is.

class EngineCompressor(Compressor):
    """A compressor the engine runs (see docs/compression.md)."""
    engine_spec = None

    def __init__(self, engine_spec):
        self.engine_spec = engine_spec

    def __repr__(self):
        return f"Compression({self.engine_spec!r})"

    def __eq__(self, other):
        return isinstance(other, EngineCompressor) and other.engine_spec == self.engine_spec

    def __hash__(self):
        return hash(self.engine_spec)


def _options(error_feedback, momentum=0.0, nesterov=True, server_error_feedback=False, server_topk=False, **numbers):
    parts = [f"{k}={v!r}" for k, v in numbers.items() if v is not None]
    if not error_feedback:
        parts.append("ef=0")
    if momentum:
        parts.append(f"momentum={float(momentum)!r}")
        if not nesterov:
            parts.append("nesterov=0")
    if server_error_feedback:
        parts.append("server_ef=1")
    if server_topk:
        parts.append("server_topk=1")
    return ":" + ",".join(parts) if parts else ""


# momentum=mu runs momentum on the worker before error feedback and the
# compressor (BytePS's momentum_type=nesterov, momentum_mu): give the
# optimizer momentum 0 then; server_error_feedback keeps error feedback on
# the server's re-compressed sum; topk's server_topk=True re-compresses the
# sum to k entries instead of answering it exactly (docs/compression.md).

def onebit(error_feedback=True, momentum=0.0, nesterov=True, server_error_feedback=False):
    """Sign of each element and one scale (mean |x|) per slice: 1 bit per float32."""
    return EngineCompressor("onebit" + _options(error_feedback, momentum, nesterov, server_error_feedback))


def topk(ratio=0.01, error_feedback=True, momentum=0.0, nesterov=True, server_error_feedback=False,
         server_topk=False):
    """The k = max(1, floor(n * ratio)) largest magnitudes of each slice, with their indices."""
    return EngineCompressor("topk" + _options(error_feedback, momentum, nesterov, server_error_feedback,
                                              server_topk, ratio=float(ratio)))


def randomk(ratio=0.01, seed=0, error_feedback=True, momentum=0.0, nesterov=True, server_error_feedback=False):
    """k values at indices every rank and server draw alike from (seed, key, step)."""
    return EngineCompressor("randomk" + _options(error_feedback, momentum, nesterov, server_error_feedback,
                                                 ratio=float(ratio), seed=int(seed)))


ENGINE_COMPRESSORS = ("onebit", "topk", "randomk")


def as_engine_spec(compression):
    """The engine spec of `compression` (an EngineCompressor or a spec string such as
    "onebit" or "topk:ratio=0.01"), or None when the engine does not compress it.
    A string naming no engine compressor is an error, not "uncompressed"."""
    if compression is None:
        return None
    if isinstance(compression, str):
        if compression in ("", "none"):
            return None
        name = compression.split(":", 1)[0]
        if name not in ENGINE_COMPRESSORS:
            raise ValueError(f"unknown compressor {name!r} in compression {compression!r}: the engine's "
                             f"compressors are {', '.join(ENGINE_COMPRESSORS)} (e.g. 'topk:ratio=0.01'; "
                             f"docs/compression.md)")
        return compression
    return getattr(compression, "engine_spec", None)


_engine_lib = None


def _engine():
    global _engine_lib
    if _engine_lib is None:
        import ctypes
        import os
        # The library every adapter links: its one engine, already loaded.
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib", "libbyteps_engine.so")
        lib = ctypes.CDLL(path)
        lib.bps_declare_compression.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
        lib.bps_declare_compression.restype = ctypes.c_int
        lib.bps_declare_compression_segments.argtypes = [ctypes.c_char_p, ctypes.c_char_p,
                                                         ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
        lib.bps_declare_compression_segments.restype = ctypes.c_int
        lib.bps_last_error.restype = ctypes.c_char_p
        _engine_lib = lib
    return _engine_lib


_declared = set()


def apply_to(name, compression, segments=None):
    """Declares `compression` for `name` when the engine runs it; clears an earlier
    declaration of `name` when it no longer does (a name keeps its declaration)."""
    spec = as_engine_spec(compression)
    if spec:
        declare_compression(name, spec, segments)
        _declared.add(name)
    elif name in _declared:
        declare_compression(name, None)
        _declared.discard(name)


def declare_compression(name, compression, segments=None):
    """Tensor `name` travels compressed from its next push_pull on (None or "none": not).
    `segments`: the sizes of the tensors fused into it (a DDP bucket's
    parameters, in order, adding up to it): onebit then keeps a scale per
    tensor. Every rank must declare the same; the servers refuse a
    disagreement on every rank."""
    import ctypes
    spec = as_engine_spec(compression) or ""
    lib = _engine()
    sizes = [int(s) for s in segments or ()]
    if any(s < 0 for s in sizes):
        raise ValueError(f"compression segments of tensor {name!r} must be sizes >= 0, got {sizes}")
    array = (ctypes.c_uint64 * len(sizes))(*sizes)
    if lib.bps_declare_compression_segments(name.encode(), spec.encode(), array, len(sizes)) != 0:
        message = lib.bps_last_error().decode(errors="replace")
        raise ValueError(f"compression {spec!r} for tensor {name!r}: {message}")
