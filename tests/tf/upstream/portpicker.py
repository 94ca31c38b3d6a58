"""The two names of the `portpicker` package that TensorFlow's multi-worker
test utilities use, so that the adapted tests need no extra dependency."""
from tests.support.ports import free_port


class NoFreePortFoundError(Exception):
    pass


def pick_unused_port():
    return free_port()
