"""The two names of the `portpicker` package that TensorFlow's multi-worker
test utilities use, so that the adapted tests need no extra dependency."""
import socket


class NoFreePortFoundError(Exception):
    pass


def pick_unused_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
