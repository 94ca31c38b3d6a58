"""Layer 0 of the Python package: what every face (core, torch, tf) shares.

    library    the engine library through its C ABI, loaded once per process
    errors     the error classes every layer raises (HorovodInternalError, ...)
    config     the environment, read once into typed values
    lifecycle  the one start-up / shutdown policy and its on_init hooks
    c_store    a Python key-value store as the C ABI's rendezvous store

Nothing here imports a framework at module level or anything above this
package (tests/test_import_layers.py checks it); docs/architecture.md shows
the layers.
"""
