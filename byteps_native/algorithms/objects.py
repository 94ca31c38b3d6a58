"""Collectives of picklable objects: their pickles travel as bytes.

`to_numpy` turns the framework's result tensors into NumPy arrays (eagerly,
or, in a TF 1 graph, through a session).
"""
import pickle

import numpy as np

from byteps_native.algorithms.gather import gather_bytes, padded_length


def allgather_object(fw, obj, name, to_numpy):
    """Every rank's `obj`, in rank order."""
    payload = pickle.dumps(obj)
    data, lengths = gather_bytes(fw, fw.bytes_of(payload), len(payload), name, f"allgather_object '{name}'")
    data, lengths = to_numpy([data, lengths])
    out, offset = [], 0
    for length in lengths:
        out.append(pickle.loads(data[offset:offset + int(length)].tobytes()))
        offset += int(length)
    return out


def broadcast_object(fw, obj, root_rank, name, to_numpy):
    """Root's `obj` on every rank: a round of the length (a table with root's
    slot filled; it fails after a join, as Horovod's broadcasts do), then a
    sum of a padded buffer holding root's bytes and everyone else's zeros."""
    is_root = fw.rank() == root_rank
    payload = pickle.dumps(obj) if is_root else b""
    (lengths,) = to_numpy([fw.sum_failing_if_joined(fw.table(len(payload)), f"{name}.length",
                                                    f"broadcast_object '{name}'")])
    length = int(lengths[root_rank])
    buffer = np.zeros(padded_length(length), np.uint8)
    buffer[:len(payload)] = np.frombuffer(payload, np.uint8)
    (data,) = to_numpy([fw.sum(fw.bytes_of(buffer), f"{name}.bytes")])
    return obj if is_root else pickle.loads(data[:length].tobytes())
