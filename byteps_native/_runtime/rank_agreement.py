"""The engine's rank-agreement check (csrc/core/rank_agreement.h) through the
C ABI: one row layout, one hash of the operation kind and one comparison for
every face. A face builds its row here, sums the [ranks, SLOTS] table over
ranks in a round of its own, and raises what disagreement() returns."""
import ctypes

from byteps_native._runtime import library

SLOTS = 16  # BPS_AGREEMENT_SLOTS
KIND_SLOT = 0  # 0 in a rank's row: that rank sent nothing (it joined)

_Int64Array = ctypes.POINTER(ctypes.c_int64)


def _engine():
    lib = library.engine()
    if not getattr(lib, "_agreement_typed", False):
        lib.bps_agreement_row.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int32, _Int64Array,
                                          ctypes.c_int32, ctypes.c_int32, ctypes.c_int64, _Int64Array]
        lib.bps_agreement_row.restype = None
        lib.bps_ranks_disagreement.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32,
                                               ctypes.c_char_p, ctypes.c_size_t]
        lib.bps_ranks_disagreement.restype = ctypes.c_size_t
        lib._agreement_typed = True
    return lib


def row(kind, dtype, shape, on_device=False, any_first_dim=False, extra=0):
    """This rank's row (SLOTS ints) for one tensor; `dtype` is its Python name ("float32")."""
    dims = (ctypes.c_int64 * max(1, len(shape)))(*[int(d) for d in shape])
    out = (ctypes.c_int64 * SLOTS)()
    _engine().bps_agreement_row(kind.encode(), dtype.encode(), int(bool(on_device)), dims, len(shape),
                                int(bool(any_first_dim)), int(extra), out)
    return list(out)


def group_row(kind, count, digest, extra=0):
    """This rank's row for a group of `count` tensors described by `digest` (an int)."""
    dims = (ctypes.c_int64 * 1)(int(digest) & 0x7FFFFFFFFFFFFFFF)
    out = (ctypes.c_int64 * SLOTS)()
    _engine().bps_agreement_row(kind.encode(), None, 0, dims, int(count), 0, int(extra), out)
    return list(out)


def disagreement(kind, rows_address, ranks, rank):
    """None when every present rank's row equals `rank`'s; otherwise the error
    (naming each rank's tensor). `rows_address`: a C-contiguous int64 table
    [ranks, SLOTS] in host memory."""
    lib = _engine()
    needed = lib.bps_ranks_disagreement(kind.encode(), rows_address, ranks, rank, None, 0)
    if needed == 0:
        return None
    buf = ctypes.create_string_buffer(needed)
    lib.bps_ranks_disagreement(kind.encode(), rows_address, ranks, rank, buf, len(buf))
    return buf.value.decode(errors="replace")
