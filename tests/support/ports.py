"""The one free-port allocator of the tests and benchmarks.

The kernel picks a port nobody holds; it is released at once, so start the
process that binds it right away (another test could take it meanwhile, which
on one host is rare enough for a test to live with).
"""
import socket


def distinct_free_ports(count, host="127.0.0.1"):
    """`count` distinct TCP ports free on `host` ("" = every address);
    they are held together while chosen, so they differ."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind((host, 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def free_port(host="127.0.0.1"):
    """A TCP port free on `host` now (also: a port where nothing listens)."""
    return distinct_free_ports(1, host)[0]
